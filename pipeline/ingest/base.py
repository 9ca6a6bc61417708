"""What an adapter is: a published format's tables, and one documented mapping to canonical.

An adapter class stores no state in its constructor beyond its options.  Its ``run`` reads
the raw tables under ``src`` part by part (peak memory independent of trace size), writes the
canonical tables into ``out`` (a temporary directory the ingest stage renames into place),
counts every raw row in the ``ledger`` and sets the manifest's units, time origin and notes.
The stage (:mod:`pipeline.ingest.stage`) owns atomicity, the manifest file and validation.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol

from pipeline.errors import TraceError
from pipeline.ingest.csvparts import RawTable
from pipeline.trace.manifest import Ledger, Manifest


class Adapter(Protocol):
    """A published trace format that can be ingested into the canonical trace format."""

    name: ClassVar[str]
    summary: ClassVar[str]
    tables: ClassVar[tuple[RawTable, ...]]

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read raw tables under ``src``; write canonical tables into ``out``."""
        ...


def require_tables(src: Path, tables: tuple[RawTable, ...], manifest: Manifest) -> None:
    """Fail clearly when a required table has no files; note absent optional tables."""
    for table in tables:
        if table.files(src):
            continue
        if table.required:
            raise TraceError(
                f"required table '{table.name}' not found (expected files matching "
                f"'{table.pattern}')", src,
            )
        manifest.tables_absent.append(table.name)


def single_file(src: Path, table: RawTable, what: str, why: str) -> Path:
    """The one file of ``table`` under ``src`` (a log or workload is one machine's, one
    period's); two or more are a one-line error naming them and saying ``why``."""
    files = table.files(src)
    if len(files) > 1:
        names = ", ".join(f.name for f in files)
        raise TraceError(f"{len(files)} {what} ({names}): {why}", src)
    return files[0]
