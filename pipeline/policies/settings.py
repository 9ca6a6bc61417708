"""The settings a run actually used, and where each came from.

A policy's parameters are only part of what decides a run: a scheduler that reads a
configuration file (capacity-scheduler's ``config``, fair-scheduler's ``allocation_file``)
takes its queues, limits, calculator and preemption switches from the file, and the inline
parameters of the same name are then ignored.  ``effective_settings`` lists every setting
with its value and source: ``default``, ``set`` (given on the command line or in
params.yaml), ``FILE: PROPERTY`` (read from a configuration file), or ``FILE (default)``
(the file leaves it at the scheduler's own default).  ``run.json`` stores it as
``settings``; the warehouse shows these values as ``runs.params``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

Setting = dict[str, Any]  # {"value": ..., "source": "..."}


def parameter_settings(params: Mapping[str, Any], given: Collection[str]) -> dict[str, Setting]:
    """Each parameter's value, ``set`` when the user gave it, else ``default``."""
    return {key: {"value": value, "source": "set" if key in given else "default"}
            for key, value in params.items()}


def from_file(value: Any, path: str, prop: str | None, present: bool = True) -> Setting:
    """A setting read from configuration file ``path`` (property ``prop``, when one names it);
    ``present=False``: the file leaves it at the scheduler's default."""
    if not present:
        return {"value": value, "source": f"{path} (default)"}
    return {"value": value, "source": f"{path}: {prop}" if prop else path}


def per_queue(names: Sequence[str], values: Sequence[Any]) -> Any:
    """One value when every queue has the same, else ``{queue: value}``."""
    plain = [_plain(v) for v in values]
    if plain and all(v == plain[0] for v in plain):
        return plain[0]
    return dict(zip(names, plain, strict=True))


def _plain(value: Any) -> Any:
    """A JSON-friendly scalar (numpy numbers to Python ones)."""
    return value.item() if hasattr(value, "item") else value
