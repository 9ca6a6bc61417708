"""The manifest of a canonical trace: provenance, units, and an account of every input row.

Accounting rule (checked by the validator): for every raw table read,
``input_rows == rows_used + sum(rows_rejected[table].values())``.  Records an adapter built
from used rows and then chose not to emit (a task that never ran, say) are counted in
``dropped`` by reason; records emitted after a documented repair are counted in
``repaired``.  Nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipeline.trace.schema import FORMAT_VERSION

MAX_EXAMPLES = 20


@dataclass
class SourceFile:
    """One raw input file, identified by size and content hash."""

    path: str
    table: str
    bytes: int
    sha256: str
    rows: int = 0


@dataclass
class Manifest:
    """Everything a reader needs to trust a canonical trace directory.

    ``window_start_s``/``window_end_s``: the observation window, the span of time the trace
    describes (seconds from the time origin); replays measure cost and utilization over it.
    ``window_source`` says where it came from.  ``digest``: the content digest of the tables
    as written and validated by ingest (:mod:`pipeline.trace.identity`); a replay that finds
    the same digest knows the trace is the validated one.
    """

    source_format: str
    units: dict[str, str] = field(default_factory=dict)
    time_origin: str = ""
    window_start_s: float | None = None
    window_end_s: float | None = None
    window_source: str = ""
    digest: str = ""
    format_version: int = FORMAT_VERSION
    created_by: str = ""
    sources: list[SourceFile] = field(default_factory=list)
    tables_absent: list[str] = field(default_factory=list)
    input_rows: dict[str, int] = field(default_factory=dict)
    rows_used: dict[str, int] = field(default_factory=dict)
    rows_rejected: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    repaired: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialize with sorted keys so identical inputs give identical manifests."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    def write(self, directory: Path) -> None:
        """Write ``manifest.json`` into ``directory``."""
        (directory / "manifest.json").write_text(self.to_json())

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        """Read ``manifest.json`` from ``directory``."""
        data = json.loads((directory / "manifest.json").read_text())
        data["sources"] = [SourceFile(**s) for s in data.get("sources", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class Ledger:
    """Counts raw rows used and rejected (by reason), and records dropped or repaired.

    Adapters call it as they go; :meth:`fill` copies the counts into a manifest.
    """

    def __init__(self) -> None:
        self.input_rows: Counter[str] = Counter()
        self.rows_used: Counter[str] = Counter()
        self.rows_rejected: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.dropped: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.repaired: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.examples: list[dict[str, Any]] = []

    def read(self, table: str, rows: int) -> None:
        """Count ``rows`` raw rows read from ``table``."""
        self.input_rows[table] += rows

    def use(self, table: str, rows: int) -> None:
        """Count ``rows`` raw rows of ``table`` that contributed to the output."""
        self.rows_used[table] += rows

    def reject(
        self, table: str, reason: str, count: int = 1, *, path: str | None = None,
        line: int | None = None, field_name: str | None = None,
    ) -> None:
        """Count ``count`` raw rows of ``table`` not used, with the reason (and an example)."""
        if count <= 0:
            return
        self.rows_rejected[table][reason] += count
        if len(self.examples) < MAX_EXAMPLES and path is not None:
            self.examples.append(
                {"table": table, "path": path, "line": line, "field": field_name, "reason": reason}
            )

    def drop(self, table: str, reason: str, count: int = 1) -> None:
        """Count ``count`` canonical records of ``table`` not emitted, with the reason."""
        if count > 0:
            self.dropped[table][reason] += count

    def repair(self, table: str, reason: str, count: int = 1) -> None:
        """Count ``count`` canonical records of ``table`` emitted after a documented repair."""
        if count > 0:
            self.repaired[table][reason] += count

    def rejected_total(self, table: str) -> int:
        """Raw rows of ``table`` rejected so far, over all reasons."""
        return sum(self.rows_rejected[table].values())

    def fill(self, manifest: Manifest) -> Manifest:
        """Copy the counts into ``manifest`` (sorted, plain dicts) and return it."""
        manifest.input_rows = dict(sorted(self.input_rows.items()))
        manifest.rows_used = dict(sorted(self.rows_used.items()))
        manifest.rows_rejected = _plain(self.rows_rejected)
        manifest.dropped = _plain(self.dropped)
        manifest.repaired = _plain(self.repaired)
        manifest.examples = list(self.examples)
        return manifest


def _plain(counters: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    return {k: dict(sorted(v.items())) for k, v in sorted(counters.items()) if v}


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks (constant memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()
