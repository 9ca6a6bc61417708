"""Output directories written whole or not at all, and what killed runs leave behind.

A stage writes into ``.NAME.tmp-<id>-<host>-<pid>-<start>`` beside its output ``NAME`` and
swaps it into place when done (:func:`atomic_dir`).  The suffix names the owning process
(host and pid namespace, pid, and the process's start time in clock ticks, so a reused pid
is not mistaken for the owner), which lets the next run of the same output tell an abandoned
temporary directory (owner gone: removed, often gigabytes) from one a concurrent run is still
writing (kept: a Dask sweep runs many replays at once, and several processes may write beside
each other).  When the owner cannot be checked from here -- another host or container on a
shared file system, or a directory without an owner suffix (written before owners were
recorded) -- it is removed only once it has not changed for ``UNOWNED_STALE_S``.

The swap (:func:`replace_dir`) never leaves ``NAME`` missing: on Linux it exchanges the two
directories atomically (``renameat2(RENAME_EXCHANGE)``); elsewhere the old output is first
renamed to ``.NAME.old-...``, and if the process dies between the two renames the next run
of the same output puts that copy back before doing anything else.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import TraceError, filesystem_error

UNOWNED_STALE_S = 24 * 3600.0
_LEFTOVER = re.compile(
    r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<id>[0-9a-f]{8})"
    r"(?:-(?P<host>[A-Za-z0-9._]*)-(?P<pid>\d+)-(?P<start>\d+))?$"
)


@dataclass(frozen=True)
class Owner:
    """The process that created a temporary directory."""

    host: str
    pid: int
    start: int  # process start time in clock ticks since boot (0 when unknown)

    def tag(self) -> str:
        return f"{self.host}-{self.pid}-{self.start}"

    def alive(self) -> bool:
        """Whether the owner may still be running (True whenever that cannot be ruled out)."""
        if self.host != host_name():
            return True
        if self.pid != os.getpid():
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except OSError:  # EPERM: a process of another user holds the pid, so it exists
                pass
        start = process_start(self.pid)  # a different start time: the pid was reused
        return not (start and self.start and start != self.start)


@functools.cache
def host_name() -> str:
    """Where pids mean something: the machine's name and its pid namespace.

    Two containers may share a volume and even a host name, but not a pid namespace; a pid
    seen from another namespace is not checked (reduced to the characters a name may hold).
    """
    try:
        namespace = os.readlink("/proc/self/ns/pid").removeprefix("pid:").strip("[]")
    except OSError:
        namespace = ""
    name = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:48] or "host"
    return f"{name}.{namespace}" if namespace else name


def process_start(pid: int) -> int:
    """Start time of process ``pid`` in clock ticks since boot (0 where /proc has none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def current_owner() -> Owner:
    """The owner stamp of this process (computed per call: a forked worker has its own pid)."""
    pid = os.getpid()
    return Owner(host_name(), pid, process_start(pid))


def sibling(out: Path, kind: str) -> Path:
    """A new, unique ``.NAME.KIND-<id>-<owner>`` path beside ``out`` (kind: tmp or old)."""
    return out.with_name(f".{out.name}.{kind}-{uuid.uuid4().hex[:8]}-{current_owner().tag()}")


def leftovers(out: Path) -> list[tuple[Path, str, Owner | None]]:
    """Temporary and backup directories of ``out`` in its parent: (path, kind, owner)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(out.parent):
            match = _LEFTOVER.match(entry.name)
            if not match or match["name"] != out.name:
                continue
            owner = (Owner(match["host"], int(match["pid"]), int(match["start"]))
                     if match["pid"] else None)
            found.append((Path(entry.path), match["kind"], owner))
    return found


def _abandoned(path: Path, owner: Owner | None) -> bool:
    """Owner gone; or, when the owner cannot be checked from here, untouched for long."""
    if owner is not None and owner.host == host_name():
        return not owner.alive()
    try:
        return time.time() - path.lstat().st_mtime > UNOWNED_STALE_S
    except OSError:
        return False


def clean_leftovers(out: Path) -> list[Path]:
    """Recover or remove what dead runs of ``out`` left; return the paths removed.

    A backup of an output whose swap was cut short is renamed back to ``out`` when ``out``
    is missing (the newest, if several); all other abandoned leftovers are removed.
    """
    out = Path(out)
    dead = [(p, kind) for p, kind, owner in leftovers(out) if _abandoned(p, owner)]
    backups = sorted((p for p, kind in dead if kind == "old"),
                     key=lambda p: p.lstat().st_mtime, reverse=True)
    if backups and not os.path.lexists(out):
        with contextlib.suppress(OSError):
            os.rename(backups[0], out)
            dead = [(p, kind) for p, kind in dead if p != backups[0]]
    removed = []
    for path, _ in dead:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def clean_abandoned(parent: Path) -> list[Path]:
    """:func:`clean_leftovers` for every output in ``parent`` that has leftovers.

    A killed run of an output that is never written again (a sweep's run whose key changed
    with the code or the trace) would otherwise keep its temporary directory forever: the
    cleaning in :func:`atomic_dir` only runs for the output being written.
    """
    names = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            match = _LEFTOVER.match(entry.name)
            if match:
                names.add(match["name"])
    removed = []
    for name in sorted(names):
        removed += clean_leftovers(Path(parent) / name)
    return removed


def make_parents(path: Path) -> None:
    """Create the directories above ``path``; one line naming the culprit if that fails."""
    parent = Path(path).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (parent, *parent.parents)
                        if os.path.lexists(p) and not p.is_dir()), None)
        if blocker is not None:
            raise TraceError(f"Not a directory (so {path} cannot be created)", blocker) from None
        error = filesystem_error(exc, parent)
        if error is None:
            raise
        raise error from None


@contextlib.contextmanager
def atomic_dir(out: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``out``; on success it replaces ``out``.

    Leftovers of earlier runs of ``out`` that died are cleaned first.  On any exception the
    temporary directory is removed and an existing ``out`` is left untouched, so a failed or
    killed stage never leaves half an output; file-system faults (full disk, read-only
    mount) become a :class:`TraceError` naming ``out``.
    """
    out = Path(out)
    if os.path.lexists(out) and not out.is_dir():
        raise TraceError("exists and is not a directory (refusing to replace it)", out)
    make_parents(out)
    clean_leftovers(out)
    tmp = sibling(out, "tmp")
    try:
        tmp.mkdir()
        yield tmp
        replace_dir(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        error = None if isinstance(exc, TraceError) else _output_error(exc, tmp, out)
        if error is None:
            raise
        raise error from exc


def _output_error(exc: BaseException, tmp: Path, out: Path) -> TraceError | None:
    """A file-system fault while writing ``out`` (paths inside ``tmp`` named as in ``out``)."""
    if not isinstance(exc, Exception):
        return None
    error = filesystem_error(exc, out)
    if error is not None and error.path is not None:
        named = str(error.path)
        if named == str(tmp) or named.startswith(str(tmp) + os.sep):
            error.path = str(out) + named[len(str(tmp)):]
    return error


def replace_dir(new: Path, out: Path) -> None:
    """Move directory ``new`` to ``out``, replacing an old ``out`` without ever removing it.

    ``new`` must be whole: from the swap on, readers of ``out`` see it.
    """
    new, out = Path(new), Path(out)
    for _ in range(3):
        if not os.path.lexists(out):
            try:
                os.rename(new, out)
                return
            except OSError as exc:  # another process put an output there meanwhile
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                continue
        swapped = exchange(new, out)
        if swapped is None:
            _replace_via_backup(new, out)
            return
        if swapped:
            shutil.rmtree(new, ignore_errors=True)  # ``new`` now holds the old output
            return
    raise OSError(errno.EBUSY, "the output kept changing while being replaced", str(out))


def exchange(a: Path, b: Path) -> bool | None:
    """Swap two paths atomically: True if done, False if one is missing, None if unsupported."""
    rename2 = _renameat2()
    if rename2 is None:
        return None
    if rename2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        return False
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # kernel or file system lacks it
        return None
    raise OSError(err, os.strerror(err), str(b))


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """glibc's ``renameat2`` (Linux 3.15+, glibc 2.28+), or None where there is none."""
    try:
        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


def _replace_via_backup(new: Path, out: Path) -> None:
    """Two renames through a ``.NAME.old-...`` backup (recovered by the next run if cut short)."""
    backup = sibling(out, "old")
    os.rename(out, backup)
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(backup, out)
        raise
    shutil.rmtree(backup, ignore_errors=True)
