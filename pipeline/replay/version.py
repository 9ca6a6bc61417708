"""The version of the code that made a run (recorded in ``run.json``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pipeline import __version__


def code_version() -> str:
    """The package version, plus the git commit when run from a checkout."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
            capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    except OSError:
        sha = ""
    return f"{__version__}+{sha}" if sha else __version__
