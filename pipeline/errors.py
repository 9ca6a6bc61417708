"""User-facing errors: each names the file, the row or field, and the reason.

File-system faults (a full disk, a read-only mount, a path whose parent is a file) are the
user's to fix too, but they reach us in many shapes: ``OSError`` from Python and pyarrow,
polars errors quoting ``(os error 28)``, DuckDB ``IO Error`` text.  :func:`filesystem_reason`
recognizes them all and :func:`filesystem_error` turns one into a :class:`TraceError`, so
every stage reports them as one line instead of a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
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


# Faults of the file system or the environment, not of the code: reported, never a traceback.
FILESYSTEM_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
    errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.EMFILE, errno.ENFILE,
    errno.EIO, errno.EFBIG, errno.EXDEV, errno.ENOTEMPTY, errno.ELOOP,
})
# Errno as quoted inside the messages of libraries that do not raise OSError.
_QUOTED_ERRNO = re.compile(r"(?:os error|errno)\s*(\d+)", re.IGNORECASE)
# Their wording when no number is quoted (DuckDB: 'Could not write file ...: No space ...').
_PHRASES = {os.strerror(e).lower(): e for e in FILESYSTEM_ERRNOS}


def filesystem_reason(exc: BaseException) -> str | None:
    """The file-system fault behind ``exc`` in words ("No space left on device"), or None."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code is None:
        quoted = _QUOTED_ERRNO.search(str(exc))
        code = int(quoted.group(1)) if quoted else None
    if code is None:
        text = str(exc).lower()
        code = next((e for phrase, e in _PHRASES.items() if phrase in text), None)
    if code in FILESYSTEM_ERRNOS:
        return os.strerror(code)
    return None


def filesystem_error(
    exc: BaseException, path: Path | str | None = None, doing: str = ""
) -> TraceError | None:
    """A one-line :class:`TraceError` for a file-system fault (None if ``exc`` is not one).

    The path is the one the fault is about when the exception names it, else ``path``;
    ``doing`` (e.g. "writing the output") is added to the reason when given.
    """
    reason = filesystem_reason(exc)
    if reason is None:
        return None
    named = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
    if doing:
        reason = f"{reason} ({doing})"
    return TraceError(reason, named if named is not None else path)


def read_json_object(path: Path) -> dict:
    """The JSON object in file ``path`` (a TraceError naming the file if it is not one)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"unreadable JSON ({exc})", path) from exc
    if not isinstance(data, dict):
        raise TraceError("expected a JSON object", path)
    return data
