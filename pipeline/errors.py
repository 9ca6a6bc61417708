"""User-facing errors: each names the file, the row or field, and the reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class TraceError(Exception):
    """A problem with user input, reported as one line and a non-zero exit (never a traceback)."""

    reason: str
    path: Path | str | None = None
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else ""
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f" [{self.field}]" if where else f"[{self.field}]"
        return f"{where}: {self.reason}" if where else self.reason


class UsageError(TraceError):
    """A wrong option, name or value given on the command line or in params.yaml."""
