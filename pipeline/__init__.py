"""tracereplay: replay public cluster traces through scheduler policies and measure the cost."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

__version__ = "0.1.0"


def _numba_cache_dir() -> None:
    """Keep compiled kernels in a cache of this code version's own.

    numba's cache (``cache=True``) notices when a function's own file changes, not when a
    function it calls from another file does: after an update, a cached caller would run
    its stale copy of the changed callee (a crash or a wrong result).  So the cache lives
    under a key of every source file's path, size and modification time
    (``~/.cache/tracereplay/numba/<key>``, or under ``XDG_CACHE_HOME``); a user who sets
    ``NUMBA_CACHE_DIR`` keeps it.  Where no such directory can be made, numba caches next
    to the sources as before.
    """
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    root = Path(__file__).parent
    key = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        st = f.stat()
        key.update(f"{f.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    try:  # (no home directory, or none that can be written: numba's default)
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        path = base / "tracereplay" / "numba" / key.hexdigest()[:16]
        path.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):
        return
    os.environ["NUMBA_CACHE_DIR"] = str(path)  # child processes (sweep workers) inherit it
    if "numba" in sys.modules:  # imported before us: numba read its settings already
        sys.modules["numba"].config.CACHE_DIR = str(path)


_numba_cache_dir()
