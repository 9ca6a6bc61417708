"""What ``params.yaml`` may hold: its sections and their keys, checked before any stage acts.

DVC hands each stage only the values its command names, so a misspelt key (``seed:`` for
``seeds:``, ``cluster:`` for ``clusters:``) would otherwise be ignored silently and a stage
would run with its default instead.  Every verb that reads ``params.yaml`` checks the whole
file first: an unknown section or key is an error naming it and the known ones.  Values are
checked where they are used (policy parameters and cluster options by the sweep grid).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import UsageError

# section -> known keys (the stage's options; see dvc.yaml for where each is used)
SECTIONS: dict[str, tuple[str, ...]] = {
    "generate": ("format", "machines", "hours", "seed", "load", "burst_load", "burst_start_h",
                 "burst_hours", "burst_user"),
    "generate_swim": ("machines", "hours", "seed", "load"),
    "generate_gpu": ("machines", "hours", "seed", "load"),
    "generate_swf": ("machines", "hours", "seed", "load"),
    "ingest": ("traces",),
    "sweep": ("traces", "runs_dir", "seeds", "policies", "clusters", "drain"),
    "load": ("db", "baseline"),
    "report": ("out", "baseline", "tolerance"),
}
# keys of each entry of ingest.traces (name -> entry)
INGEST_TRACE_KEYS = ("format", "src")


def read_params(path: Path) -> dict[str, Any]:
    """The parsed and checked ``params.yaml`` (a one-line error when missing or malformed)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError("params file not found", path) from None
    except IsADirectoryError:
        raise UsageError("params file is a directory", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the params file ({exc})", path) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"invalid YAML ({exc})".replace("\n", " "), path) from None
    if not isinstance(data, dict):
        raise UsageError("params file must be a mapping of stage sections", path)
    check_params(data, path)
    return data


def check_params(data: Mapping[str, Any], path: Path | str) -> None:
    """Raise a UsageError naming the first unknown section or key of ``data``."""
    _known("section", data, tuple(SECTIONS), path, "")
    for section, keys in SECTIONS.items():
        value = data.get(section)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise UsageError(f"section '{section}' must be a mapping", path, field=section)
        _known("key", value, keys, path, section)
    traces = (data.get("ingest") or {}).get("traces") or {}
    if not isinstance(traces, Mapping):
        raise UsageError("ingest.traces must map trace names to {format, src}", path,
                         field="ingest.traces")
    for name, entry in traces.items():
        if not isinstance(entry, Mapping):
            raise UsageError("expected {format, src}", path, field=f"ingest.traces.{name}")
        _known("key", entry, INGEST_TRACE_KEYS, path, f"ingest.traces.{name}")


def _known(what: str, mapping: Mapping[str, Any], known: tuple[str, ...], path: Path | str,
           where: str) -> None:
    unknown = [k for k in mapping if k not in known]
    if unknown:
        place = f" in '{where}'" if where else ""
        raise UsageError(f"unknown {what} '{unknown[0]}'{place} (known: {', '.join(known)})",
                         path, field=f"{where}.{unknown[0]}" if where else str(unknown[0]))
