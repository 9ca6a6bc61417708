"""The sweep stage: replay traces x policies x parameter grid x seeds in parallel with Dask."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import UsageError
from pipeline.sweep.grid import RunSpec, build_grid, check_specs
from pipeline.sweep.runner import run_dask, run_serial

__all__ = ["RunSpec", "build_grid", "read_params", "sweep"]


def read_params(path: Path) -> dict[str, Any]:
    """The parsed params.yaml (a clear error when missing or malformed)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError("params file not found", path) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"invalid YAML ({exc})".replace("\n", " "), path) from None
    if not isinstance(data, dict):
        raise UsageError("params file must be a mapping of stage sections", path)
    return data


def sweep(params_path: Path = Path("params.yaml"), scheduler: str | None = None,
          workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the ``sweep`` section of ``params_path``; write ``runs_dir/index.json``.

    ``scheduler``: ``None`` for a LocalCluster, ``"serial"`` to run in this process, or the
    address of an existing dask.distributed scheduler.
    """
    params = read_params(params_path)
    if "sweep" not in params:
        raise UsageError("no 'sweep' section", params_path)
    section = params["sweep"]
    specs = build_grid(section, Path(params_path).resolve().parent)
    check_specs(specs)
    if scheduler == "serial":
        results = run_serial(specs, progress)
    else:
        results = run_dask(specs, scheduler, workers, progress)
    runs_dir = Path(params_path).resolve().parent / section.get("runs_dir", "data/runs")
    index = {"runs": [s.out_dir for s in specs], "specs": [json.loads(s.to_json()) for s in specs]}
    _write_index(runs_dir, index)
    stale = _prune(runs_dir, {Path(s.out_dir) for s in specs})
    return {"runs": len(specs), "skipped": sum(r["skipped"] for r in results),
            "ran": sum(not r["skipped"] for r in results), "removed_stale": stale,
            "index": str(runs_dir / "index.json")}


def _prune(runs_dir: Path, current: set[Path]) -> int:
    """Remove run directories of earlier grids or code (``runs_dir`` mirrors params.yaml)."""
    stale = [p.parent for p in runs_dir.glob("*/*/*/run.json") if p.parent not in current]
    for path in stale:
        shutil.rmtree(path)
    return len(stale)


def _write_index(runs_dir: Path, index: dict[str, Any]) -> None:
    runs_dir.mkdir(parents=True, exist_ok=True)
    tmp = runs_dir / ".index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    tmp.replace(runs_dir / "index.json")

