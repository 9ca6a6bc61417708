"""Policy parameters whose value is a file: their contents are part of a run's identity.

A parameter such as capacity-scheduler's ``config`` names a configuration file, and editing
the file changes what the run does, so run ids (:func:`pipeline.replay.stage.run_identity`)
and sweep keys (:mod:`pipeline.sweep.grid`) hash each such file's sha256 besides the path
given.  Which parameters are files: :func:`pipeline.policies.base.file_params`.  A relative
path is read from ``base_dir`` (default: the current directory, where the policy opens it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.policies import policy_class
from pipeline.policies.base import file_params

BLOCK_BYTES = 1 << 20


def param_files(policy: str, params: Mapping[str, Any],
                base_dir: Path | str | None = None) -> dict[str, Path]:
    """Parameter name -> the file it names, for the file parameters set in ``params``.

    A file parameter left empty (unset) is left out; one naming no file is a UsageError
    naming the path and the parameter.
    """
    files = {}
    for name in file_params(policy_class(policy)):
        value = params.get(name)
        if value is None or value == "":
            continue
        path = Path(str(value))
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        if not path.is_file():
            raise UsageError(f"policy '{policy}' parameter '{name}': no such file", path,
                             field=name)
        files[name] = path
    return files


def file_sha256(path: Path) -> str:
    """sha256 of a file's contents (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def param_file_digests(policy: str, params: Mapping[str, Any],
                       base_dir: Path | str | None = None) -> dict[str, str]:
    """Parameter name -> sha256 of the file it names (empty when the policy reads none)."""
    return {name: file_sha256(path)
            for name, path in param_files(policy, params, base_dir).items()}
