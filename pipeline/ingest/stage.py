"""The ingest stage: run an adapter into a temporary directory, write the manifest, validate,
and only then put the canonical trace in place (a failed ingest leaves no partial output and
keeps an earlier good one)."""

from __future__ import annotations

from pathlib import Path

from pipeline import __version__
from pipeline.errors import TraceError
from pipeline.ingest.registry import make_adapter
from pipeline.trace.io import atomic_dir
from pipeline.trace.manifest import Ledger, Manifest
from pipeline.trace.validate import count_rows, validate


def ingest(fmt: str, src: Path, out: Path) -> Manifest:
    """Ingest the raw published files of format ``fmt`` under ``src`` into ``out``."""
    adapter = make_adapter(fmt)
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise TraceError("source directory not found", src)
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise TraceError("output must not be inside the source directory", out)
    with atomic_dir(out) as tmp:
        ledger = Ledger()
        manifest = Manifest(source_format=fmt, created_by=f"tracereplay {__version__}")
        adapter.run(src, tmp, ledger, manifest)
        ledger.fill(manifest)
        manifest.rows = count_rows(tmp)
        manifest.write(tmp)
        report = validate(tmp)
        if not report.ok:
            raise TraceError(f"ingest produced an invalid trace: {report.first()}", out)
    return manifest
