"""The ingest stage: run an adapter into a temporary directory, write the manifest, validate,
and only then put the canonical trace in place (a failed ingest leaves no partial output and
keeps an earlier good one).

Bad raw rows are rejected and counted, and the ingest goes on with the rest: a part whose
every row is rejected costs only its rows.  When a table had rows but not one was usable
(a wrong file, a wrong format), the trace would silently lack what the table holds: that is
a one-line error naming the table's first rejected row (file and line) and the main reasons,
not a trace built without it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.errors import TraceError
from pipeline.ingest.base import Adapter
from pipeline.ingest.registry import make_adapter
from pipeline.progress import Progress
from pipeline.trace.identity import content_digest
from pipeline.trace.io import atomic_dir
from pipeline.trace.manifest import Ledger, Manifest, SourceFile
from pipeline.trace.validate import count_rows, validate


class _Sources(list):  # type: ignore[type-arg]
    """The manifest's source list, telling a progress display as each raw file is done."""

    def __init__(self, shown: Progress) -> None:
        super().__init__()
        self.shown, self.read = shown, 0

    def append(self, item: SourceFile) -> None:
        super().append(item)
        self.read += item.bytes
        self.shown.update(self.read / 1e6)


def _raw_megabytes(adapter: Adapter, src: Path) -> float:
    """Size of the raw files the adapter will read (for progress)."""
    total = 0
    for table in adapter.tables:
        try:
            total += sum(f.stat().st_size for f in table.files(src))
        except (OSError, TraceError):
            continue  # an absent optional table; the adapter says what it needs
    return total / 1e6


def ingest(fmt: str, src: Path, out: Path, progress: bool = False,
           options: Mapping[str, Any] | None = None) -> Manifest:
    """Ingest the raw published files of format ``fmt`` under ``src`` into ``out``
    (``progress``: show how much of the raw data was read, :mod:`pipeline.progress`;
    ``options``: the adapter's options, ``ingest --set KEY=VALUE``)."""
    adapter = make_adapter(fmt, **dict(options or {}))
    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise TraceError("source directory not found", src)
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise TraceError("output must not be inside the source directory", out)
    shown = Progress(_raw_megabytes(adapter, src), f"ingest {fmt}", "MB read",
                     enabled=progress)
    with shown, atomic_dir(out) as tmp:
        ledger = Ledger()
        manifest = Manifest(source_format=fmt, created_by=f"tracereplay {__version__}")
        manifest.sources = _Sources(shown)
        adapter.run(src, tmp, ledger, manifest)
        record_options(adapter, manifest)
        manifest.sources = list(manifest.sources)
        require_usable_rows(adapter, src, ledger)
        ledger.fill(manifest)
        manifest.rows = count_rows(tmp)
        manifest.write(tmp)
        report = validate(tmp)
        if not report.ok:
            raise TraceError(f"ingest produced an invalid trace: {report.first()}", out)
        if manifest.window_end_s is None:
            raise TraceError(f"adapter {fmt} stated no observation window", out)
        # the content digest of the validated tables: replays that find it skip the checks
        manifest.digest = content_digest(tmp, json.loads(manifest.to_json()))
        manifest.write(tmp)
    return manifest


def record_options(adapter: Adapter, manifest: Manifest) -> None:
    """Note the adapter's options as used, defaults included, in ``manifest.notes["options"]``.

    Read back from the adapter's attributes (a constructor stores each option under its
    name).  Notes are provenance, outside the trace identity: an option that changes the
    tables changes the digest through them.  Adapters without options get no note.
    """
    declared: dict[str, str] = getattr(adapter, "options", {})
    if declared:
        used = {name: getattr(adapter, name) for name in sorted(declared)}
        manifest.notes["options"] = json.dumps(used, sort_keys=True, default=str)


def require_usable_rows(adapter: Adapter, src: Path, ledger: Ledger) -> None:
    """Fail when a raw table had rows and every one of them was rejected."""
    for table in adapter.tables:
        read = ledger.input_rows[table.name]
        if not read or ledger.rows_used[table.name]:
            continue
        reasons = ledger.rows_rejected[table.name]
        top = ", ".join(f"{reason}: {n}" for reason, n in reasons.most_common(3))
        example = next((e for e in ledger.examples if e["table"] == table.name), None)
        path = src / example["path"] if example else table.files(src)[0]
        raise TraceError(
            f"no usable rows in table {table.name}: all {read} rejected ({top})",
            path, line=example["line"] if example else None,
            field=example["field"] if example else None,
        )
