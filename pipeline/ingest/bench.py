"""``tracereplay bench-ingest``: raw rows per second and peak memory of one ingest.

The ingest runs in a fresh child process so its peak RSS is its own (``RUSAGE_CHILDREN``), and
CPU seconds (user + system) give the per-core rate the issue's target is stated in.  Without
``src`` a synthetic trace in the raw published layout is generated first (not timed).
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path
from typing import Any


def _child(fmt: str, src: str, out: str) -> None:
    from pipeline.ingest.stage import ingest

    ingest(fmt, Path(src), Path(out))


def bench_ingest(
    fmt: str = "google2011", src: Path | None = None, machines: int = 12_500,
    hours: float = 96.0, seed: int = 0, workdir: Path | None = None,
) -> dict[str, Any]:
    """Ingest ``src`` (or a generated trace) once and report rows/s, CPU and peak RSS."""
    with tempfile.TemporaryDirectory(dir=workdir, prefix="bench-ingest-") as tmp:
        if src is None:
            from pipeline.generate import generate

            src = Path(tmp) / "raw"
            generate(src, fmt, machines=machines, hours=hours, seed=seed)
        out = Path(tmp) / "trace"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = mp.get_context("spawn").Process(target=_child, args=(fmt, str(src), str(out)))
        proc.start()
        proc.join()
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.exitcode != 0:
            raise RuntimeError(f"ingest child failed with exit code {proc.exitcode}")
        from pipeline.trace.manifest import Manifest

        manifest = Manifest.read(out)
    raw_rows = sum(manifest.input_rows.values())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "format": fmt, "raw_rows": raw_rows, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
        "rows_per_s": round(raw_rows / wall), "rows_per_cpu_s": round(raw_rows / max(cpu, 1e-9)),
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "tasks": manifest.rows.get("tasks", 0),
        "machines": manifest.rows.get("machines", 0),
    }
