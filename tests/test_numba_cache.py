"""Compiled kernels are cached per code version (pipeline.__init__): a changed callee in
another file must never run from a caller's stale cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _cache_dir(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", "import os, pipeline; "
                          "print(os.environ.get('NUMBA_CACHE_DIR', ''))"],
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_cache_is_keyed_by_the_code_version(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    first = _cache_dir(env)
    assert first.startswith(str(tmp_path / "tracereplay" / "numba"))
    assert Path(first).is_dir() and _cache_dir(env) == first  # same code, same cache


def test_a_users_cache_dir_is_kept(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "mine")}
    assert _cache_dir(env) == str(tmp_path / "mine")
