"""The sweep stage: replay traces x policies x parameter grid x seeds in parallel with Dask.

Each trace's runs live under ``runs_dir/<trace>/`` with an ``index.json`` listing, per sweep
definition (the params file, as a path relative to the index), the runs it made there.  A
re-run skips finished runs and prunes only what that same definition ran before and no
longer holds (runs of older code or of grid values since removed), and lists what it
removed.  Runs it does not own (another params file's grid, runs copied in by hand) are kept
and counted; ``prune=True`` removes them too.  ``params.yaml`` is checked whole first
(:mod:`pipeline.params`), so a misspelt key is an error rather than a smaller grid.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.params import read_params
from pipeline.sweep.grid import RunSpec, build_grid, check_specs
from pipeline.sweep.runner import run_dask, run_serial
from pipeline.trace.outdir import clean_abandoned

__all__ = ["RunSpec", "build_grid", "read_params", "sweep", "sweep_runs"]

INDEX = "index.json"


def sweep(params_path: Path = Path("params.yaml"), scheduler: str | None = None,
          workers: int | None = None, progress: bool = True, trace: str | None = None,
          prune: bool = False) -> dict[str, Any]:
    """Run the ``sweep`` section of ``params_path`` (only ``trace``'s runs when given).

    ``scheduler``: ``None`` for a LocalCluster, ``"serial"`` to run in this process, or the
    address of an existing dask.distributed scheduler.  Writes ``runs_dir/<trace>/index.json``
    per trace and returns counts, the indexes and the run directories it removed.
    """
    params = read_params(params_path)
    if "sweep" not in params:
        raise UsageError("no 'sweep' section", params_path)
    section = params["sweep"]
    root = Path(params_path).resolve().parent
    try:
        specs = build_grid(section, root, trace)
        check_specs(specs)
    except UsageError as err:  # a key of the params file: name the file too
        if err.path is None and err.field and err.field.startswith("sweep."):
            err.path = params_path
        raise
    for name in sorted({s.trace for s in specs}):  # before any run: a killed sweep's are owned
        trace_dir = runs_dir_of(section, root) / name
        _claim(trace_dir, [s for s in specs if s.trace == name],
               _definition(params_path, trace_dir))
    if scheduler == "serial":
        results = run_serial(specs, progress)
    else:
        results = run_dask(specs, scheduler, workers, progress)
    removed, kept, indexes = [], [], []
    for name in sorted({s.trace for s in specs}):
        trace_dir = runs_dir_of(section, root) / name
        definition = _definition(params_path, trace_dir)
        mine = [s for s in specs if s.trace == name]
        gone, others = _prune(trace_dir, mine, definition, prune)
        removed += gone
        kept += others
        indexes.append(str(_write_index(trace_dir, mine, definition)))
    return {"runs": len(specs), "skipped": sum(r["skipped"] for r in results),
            "ran": sum(not r["skipped"] for r in results), "removed": removed,
            "kept_other": len(kept), "indexes": indexes}


def _definition(params_path: Path, trace_dir: Path) -> str:
    """The params file as an index names it: relative to the index, so the same wherever
    the project is cloned."""
    return os.path.relpath(Path(params_path).resolve(), trace_dir)


def runs_dir_of(section: dict[str, Any], root: Path) -> Path:
    """Where the sweep writes its runs (``runs_dir``, relative to the params file)."""
    return root / section.get("runs_dir", "data/runs")


def sweep_runs(params_path: Path) -> list[Path]:
    """The run directories the params file's sweep made, every trace (``load --params``)."""
    params = read_params(params_path)
    section = params.get("sweep") or {}
    runs_dir = runs_dir_of(section, Path(params_path).resolve().parent)
    runs = []
    for name in sorted(section.get("traces") or {}):
        trace_dir = runs_dir / name
        definition = _definition(params_path, trace_dir)
        if not (trace_dir / INDEX).is_file():
            raise UsageError(f"trace '{name}' has not been swept yet (run `tracereplay "
                             "sweep`)", trace_dir / INDEX)
        listed = _previous(trace_dir, definition)
        if not listed and _previous(trace_dir, definition, claimed=True):
            raise UsageError(f"trace '{name}' has no finished sweep yet (the last one was "
                             "interrupted: run `tracereplay sweep`)", trace_dir / INDEX)
        runs += sorted(listed)
    return runs


def read_index(path: Path) -> dict[str, Any]:
    """An index's entries: definition -> {"runs": [...], "specs": [...]} (empty if none)."""
    try:
        index = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"unreadable sweep index ({exc})", path) from None
    sweeps = index.get("sweeps") if isinstance(index, dict) else None
    if not isinstance(sweeps, dict):
        raise UsageError("not a sweep index (no 'sweeps' mapping)", path, field="sweeps")
    for name, entry in sweeps.items():
        for key in ("runs", "claimed"):  # "claimed" is there only while a sweep runs
            runs = entry.get(key, [] if key == "claimed" else None) if isinstance(
                entry, dict) else None
            if not isinstance(runs, list) or not all(isinstance(r, str) and r for r in runs):
                raise UsageError("not a sweep index: expected a list of run directories",
                                 path, field=f"sweeps.{name}.{key}")
    return sweeps


def _run_dirs(trace_dir: Path) -> set[Path]:
    """The finished run directories under one trace's runs (``<policy>/<key>/run.json``)."""
    return {p.parent for p in trace_dir.glob("*/*/run.json")}


def _previous(trace_dir: Path, definition: str, claimed: bool = False) -> set[Path]:
    """Run directories the last sweep of ``definition`` listed here (``claimed``: and those
    a sweep of it set out to make, finished or not: see :func:`_claim`)."""
    entry = read_index(trace_dir / INDEX).get(definition) or {}
    keys = ("runs", "claimed") if claimed else ("runs",)
    return {trace_dir / str(run) for key in keys for run in entry.get(key, [])}


def _claim(trace_dir: Path, specs: Sequence[RunSpec], definition: str) -> None:
    """Record in the index, before running, the run directories this sweep will make.

    A sweep that is killed never writes its index, so the runs it finished would belong to
    no definition: kept forever as someone else's once the grid or the code moves on.
    Claimed runs count as the definition's own when the next sweep prunes; ``load`` still
    reads only the runs of the last sweep that finished (``runs``).
    """
    trace_dir.mkdir(parents=True, exist_ok=True)
    sweeps = read_index(trace_dir / INDEX)
    entry = dict(sweeps.get(definition) or {})
    new = {str(Path(s.out_dir).relative_to(trace_dir)) for s in specs}
    entry.setdefault("runs", [])  # a first sweep, killed: no finished sweep to load yet
    entry["claimed"] = sorted(set(entry.get("claimed", [])) | new)
    sweeps[definition] = entry
    _replace_index(trace_dir, sweeps)


def _prune(trace_dir: Path, specs: Sequence[RunSpec], definition: str,
           prune_all: bool) -> tuple[list[str], list[Path]]:
    """Remove this definition's runs the grid no longer holds (all foreign ones with
    ``prune_all``) and what killed runs left (:func:`clean_abandoned`); return the removed
    directories and the foreign ones kept."""
    abandoned = [path for policy_dir in sorted(trace_dir.glob("*/"))
                 for path in clean_abandoned(policy_dir)]
    current = {Path(s.out_dir) for s in specs}
    stale = _run_dirs(trace_dir) - current
    owned = _previous(trace_dir, definition, claimed=True)
    doomed = sorted(stale if prune_all else stale & owned)
    for path in doomed:
        shutil.rmtree(path)
    return [str(p) for p in abandoned + doomed], sorted(stale - set(doomed))


def _write_index(trace_dir: Path, specs: Sequence[RunSpec], definition: str) -> Path:
    """Record in ``index.json`` the definition's runs (paths relative to the index)."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    sweeps = read_index(trace_dir / INDEX)
    sweeps[definition] = {
        "runs": [str(Path(s.out_dir).relative_to(trace_dir)) for s in specs],
        "specs": [{k: v for k, v in json.loads(s.to_json()).items()
                   if k not in ("trace_dir", "out_dir", "files_dir")} for s in specs],
    }
    return _replace_index(trace_dir, sweeps)


def _replace_index(trace_dir: Path, sweeps: dict[str, Any]) -> Path:
    tmp = trace_dir / f".{INDEX}.tmp"
    tmp.write_text(json.dumps({"sweeps": sweeps}, indent=1, sort_keys=True) + "\n")
    tmp.replace(trace_dir / INDEX)
    return trace_dir / INDEX
