"""Reading a run directory: ``run.json`` and the Parquet tables a replay writes.

A table is ``NAME.parquet`` (one file) or a directory ``NAME.parquet/`` of part files, as
with canonical traces.  Extra columns and ``run.json`` keys are allowed; a missing file or
required column is a :class:`TraceError` naming the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import TraceError, read_json_object

REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "task_runs": (
        "run_id", "task_id", "job_id", "user", "queue", "machine_id", "submit_s", "start_s",
        "end_s", "outcome", "attempts", "locality", "cpu", "mem",
    ),
    "node_intervals": ("run_id", "machine_id", "up_s", "down_s", "cpu", "mem"),
    "metrics": ("run_id", "metric", "value", "unit"),
}
# Tables a run directory may have (queue-based policies write queues.parquet, the GPU
# workload-inflation experiment gpu_curve.parquet).
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "queues": ("run_id", "queue", "parent", "leaf", "guaranteed_share", "max_share"),
    "gpu_curve": ("run_id", "arrived_pct", "alloc_ratio", "frag_gpu", "frag_ratio", "pods",
                  "dropped"),
}
REQUIRED_KEYS = ("run_id", "trace", "policy", "seed")
KNOWN_KEYS = (
    "run_id", "trace", "trace_path", "policy", "params", "settings", "seed", "wall_s",
    "code_version", "created_at", "cluster", "window", "measured", "trace_digest",
    "trace_facts", "policy_timings", "mode",
)


@dataclass(frozen=True)
class RunDir:
    """A checked run directory: its ``run.json`` row and the files of each table."""

    path: Path
    run_id: str
    row: dict[str, Any]
    files: dict[str, list[Path]]
    # wall-clock figures a policy measured (provenance ``policy_timings``, e.g. a solver's
    # milliseconds): loaded into ``metrics`` beside the run's deterministic metrics
    timings: dict[str, float] = field(default_factory=dict)


def read_run_dir(path: Path) -> RunDir:
    """Check that ``path`` holds a run (run.json, tables, required columns) and describe it."""
    path = Path(path)
    if not path.is_dir():
        raise TraceError("not a run directory", path)
    meta = read_run_json(path / "run.json")
    meta = {**read_provenance(path / "provenance.json"), **meta}
    files = {name: table_files(path, name) for name in REQUIRED_COLUMNS}
    for name, parts in files.items():
        for part in parts:
            check_columns(part, REQUIRED_COLUMNS[name])
    for name, columns in OPTIONAL_COLUMNS.items():
        if (path / f"{name}.parquet").exists():
            files[name] = table_files(path, name)
            for part in files[name]:
                check_columns(part, columns)
    return RunDir(path, str(meta["run_id"]), runs_row(meta, path), files,
                  _timings(meta.get("policy_timings"), path))


def _timings(value: Any, path: Path) -> dict[str, float]:
    """``policy_timings`` of ``provenance.json``: metric name -> milliseconds (nulls left
    out: a policy that never solved has no figure)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(v, int | float) or v is None for v in value.values()):
        raise TraceError("expected an object of numbers", path / "provenance.json",
                         field="policy_timings")
    return {str(k): float(v) for k, v in value.items() if v is not None}


def read_run_json(path: Path) -> dict[str, Any]:
    """The run description, with the required keys present."""
    if not path.is_file():
        raise TraceError("run.json is missing", path)
    meta = read_json_object(path)
    missing = [k for k in REQUIRED_KEYS if meta.get(k) is None]
    if missing:
        raise TraceError(f"missing key(s) {', '.join(missing)}", path)
    for key in ("params", "cluster"):
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            raise TraceError("expected a JSON object", path, field=key)
    return meta


def read_provenance(path: Path) -> dict[str, Any]:
    """Where, when and how long a run ran (``provenance.json``; empty when absent)."""
    return read_json_object(path) if path.is_file() else {}


def table_files(run: Path, name: str) -> list[Path]:
    """The Parquet files of table ``name`` in run directory ``run``."""
    path = run / f"{name}.parquet"
    if path.is_dir():
        parts = sorted(p for p in path.iterdir() if p.suffix == ".parquet")
        if not parts:
            raise TraceError("no Parquet part files", path)
        return parts
    if not path.is_file():
        raise TraceError(f"{name}.parquet is missing", path)
    return [path]


def check_columns(path: Path, required: tuple[str, ...]) -> None:
    """Raise unless the Parquet file at ``path`` is readable and has the ``required`` columns."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceError(f"unreadable Parquet ({exc})", path) from exc
    missing = [c for c in required if c not in schema.names]
    if missing:
        raise TraceError(f"missing column(s) {', '.join(missing)}", path)


def runs_row(meta: dict[str, Any], run: Path) -> dict[str, Any]:
    """The ``runs`` row of a run: known keys as columns, JSON objects as text, the rest in extra.

    ``params`` holds the settings the run actually used (configuration files included) when
    run.json lists them (``settings``: value and source of each), else its parameters;
    ``params_given`` the parameters as resolved from what the user set.
    """
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    settings = meta.get("settings")
    used = ({k: s.get("value") for k, s in settings.items()} if isinstance(settings, dict)
            else meta.get("params"))
    window = meta.get("window") if isinstance(meta.get("window"), dict) else {}
    measured = meta.get("measured") if isinstance(meta.get("measured"), dict) else {}
    return {
        "run_id": str(meta["run_id"]),
        "trace": str(meta["trace"]),
        "trace_path": _text(meta.get("trace_path")),
        "policy": str(meta["policy"]),
        "params": json.dumps(used or {}, sort_keys=True),
        "params_given": json.dumps(meta.get("params") or {}, sort_keys=True),
        "settings": json.dumps(settings or {}, sort_keys=True),
        "window_start_s": window.get("start_s"),
        "window_end_s": window.get("end_s"),
        "window_source": _text(window.get("source")),
        "measured_from_s": measured.get("from_s"),
        "measured_to_s": measured.get("to_s"),
        "drained": measured.get("drained"),
        "trace_digest": _text(meta.get("trace_digest")),
        "trace_facts": json.dumps(meta.get("trace_facts") or {}, sort_keys=True),
        "seed": meta["seed"],
        "wall_s": meta.get("wall_s"),
        "code_version": _text(meta.get("code_version")),
        "created_at": _text(meta.get("created_at")),
        "cluster": json.dumps(meta.get("cluster") or {}, sort_keys=True),
        "extra": json.dumps(extra, sort_keys=True, default=str),
        "trace_tasks": trace_tasks(meta.get("trace_path"), run),
        "run_path": str(run.resolve()),
        # how the run replayed its trace: "replay" (the event-driven core) or "inflation"
        # (the GPU workload-inflation experiment, time not modelled)
        "mode": _text(meta.get("mode")) or "replay",
    }


def trace_tasks(trace_path: Any, run: Path) -> int | None:
    """Tasks in the replayed trace per its ``manifest.json`` (None when it cannot be found).

    A relative ``trace_path`` is tried from the working directory, then from the run's parent.
    """
    if not trace_path:
        return None
    candidates = [Path(str(trace_path))]
    if not candidates[0].is_absolute():
        candidates.append(run.parent / candidates[0])
    for trace in candidates:
        try:
            rows = json.loads((trace / "manifest.json").read_text()).get("rows", {})
            return int(rows["tasks"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
