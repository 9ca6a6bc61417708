"""Help text in words: ``Usage: tracereplay replay [OPTIONS] TRACE``, option values named by
what they are (``--out DIR``), flags with no value shown.

Typer 0.29 writes required arguments as ``{trace}``, their type as ``<path>`` and every flag
as ``<bool>``.  :func:`words_in_help` replaces those three renderings on Typer's parameter
classes (the classic Click style); a test checks every verb's help, so a Typer release that
renames these methods fails the suite instead of silently changing the help.
"""

from __future__ import annotations

from typing import Any

import click
from typer import core

# value types in words, when a parameter names no metavar
TYPE_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH",
              "list[str]": "TEXT"}


def _argument_usage(self: Any) -> str:
    name = (self.metavar or self.name or "").upper()
    name = name if self.required else f"[{name}]"
    return f"{name}..." if self.nargs != 1 else name


def _argument_type(self: Any, ctx: click.Context) -> str | None:
    return None  # the argument's name says what it is


def _option_type(self: Any, ctx: click.Context) -> str | None:
    if self.is_flag:
        return None
    if self.metavar is not None:
        return str(self.metavar)
    label = str(core.TyperOption.display_type(self, ctx) or "").strip("<>")
    return TYPE_WORDS.get(label, label.upper() or None)


def words_in_help() -> None:
    """Install the renderings (idempotent)."""
    core.TyperArgument._usage_display_name = _argument_usage  # type: ignore[method-assign]
    core.TyperArgument.display_type_rich = _argument_type  # type: ignore[method-assign]
    core.TyperOption.display_type_rich = _option_type  # type: ignore[method-assign]
