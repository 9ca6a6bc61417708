"""Reading raw published CSV parts (gzip or plain) into typed polars frames, row by row accounted.

Every row of a part is either returned or rejected into the :class:`Ledger` with a reason:
``wrong_column_count`` (field count differs from the published schema),
``bad_number:FIELD`` (a value that does not parse as the published type),
``missing_value:FIELD`` (a mandatory field that is empty), ``not_finite:FIELD`` (a float
written as nan or inf: no published measurement is) or ``negative_value:FIELD`` (below zero
in a field the schema defines as a time or amount, :attr:`Column.nonnegative`).  Examples
keep file and line.  A part whose every row is rejected yields empty, typed frames: it is
counted like any other, and the ingest stage decides whether anything usable is left.

The stored bytes (gzip or plain, checked, hashed, streamed in blocks) come from
:mod:`pipeline.ingest.rawfile`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import polars as pl

from pipeline.ingest import limits
from pipeline.ingest.rawfile import stored_blocks
from pipeline.trace.manifest import Ledger, SourceFile

INT = pl.Int64
FLOAT = pl.Float64
STR = pl.String
BLOCK_BYTES = 256 * 1024 * 1024  # decompressed bytes parsed at once (bounds peak memory)


@dataclass(frozen=True)
class Column:
    """One field of a published table: name, polars type, and whether the schema requires it."""

    name: str
    dtype: type[pl.DataType] | pl.DataType
    mandatory: bool = False
    nonnegative: bool = False  # a value below 0 is invalid (rejected, not clamped)
    high: float | None = None  # the most it can physically be (pipeline.ingest.limits)


@dataclass(frozen=True)
class RawTable:
    """A published table: its name, its file pattern under the source root, and its fields."""

    name: str
    pattern: str
    columns: tuple[Column, ...]
    required: bool = True
    header: bool = False

    def files(self, src: Path) -> list[Path]:
        """The table's part files under ``src``, in name order (which is time order)."""
        return sorted(p for p in Path(src).glob(self.pattern) if p.is_file())


@numba.njit(cache=True, nogil=True)
def scan_lines(buf: np.ndarray) -> tuple[np.ndarray, ...]:  # pragma: no cover
    """Start, end (exclusive), field count and 1-based line number of each non-empty line,
    and the number of physical lines (empty ones included).

    One compiled pass: the formats read here never quote commas, so counting is exact.
    """
    n = 1
    for i in range(buf.size):
        if buf[i] == 10:
            n += 1
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    counts = np.empty(n, np.int64)
    numbers = np.empty(n, np.int64)
    k, start, commas, line = 0, 0, 0, 1
    for i in range(buf.size):
        b = buf[i]
        if b == 44:
            commas += 1
        elif b == 10:
            stop = i - 1 if i > start and buf[i - 1] == 13 else i
            if stop > start:
                starts[k], ends[k], counts[k], numbers[k] = start, stop, commas + 1, line
                k += 1
            start, commas, line = i + 1, 0, line + 1
    if buf.size > start:
        starts[k], ends[k], counts[k], numbers[k] = start, buf.size, commas + 1, line
        k += 1
    physical = line - 1 if buf.size == start else line
    return starts[:k], ends[:k], counts[:k], numbers[:k], physical


@numba.njit(cache=True, nogil=True)
def count_separators(buf: np.ndarray) -> tuple[int, int, int]:  # pragma: no cover
    """Commas, newlines and carriage returns in ``buf`` (one vectorized pass; comparisons
    widened to int64 before the sums, which LLVM vectorizes better than adding booleans)."""
    commas = newlines = returns = np.int64(0)
    for i in range(buf.size):
        b = buf[i]
        commas += np.int64(b == 44)
        newlines += np.int64(b == 10)
        returns += np.int64(b == 13)
    return commas, newlines, returns


def parse_block(
    data: bytes, table: RawTable, ledger: Ledger, rel: str, line_offset: int = 0,
    skip_header: bool | None = None,
) -> tuple[pl.DataFrame, int]:
    """Parse newline-aligned CSV bytes into a typed frame with ``_line`` (1-based, in the file).

    Rows with the wrong number of fields, unparsable numbers or empty mandatory fields are
    rejected into ``ledger``; the rest are returned, with the number of physical lines in
    ``data``.  ``line_offset`` is the number of lines of the file before ``data``.
    """
    if not (table.header if skip_header is None else skip_header):
        parsed = _parse_uniform(data, table, ledger, rel, line_offset)
        if parsed is not None:
            return parsed
    starts, ends, counts, numbers, physical = scan_lines(np.frombuffer(data, dtype=np.uint8))
    numbers += line_offset
    first = 1 if (table.header if skip_header is None else skip_header) else 0
    starts, ends, counts, numbers = starts[first:], ends[first:], counts[first:], numbers[first:]
    ledger.read(table.name, len(starts))
    ncols = len(table.columns)
    good = counts == ncols
    if not good.all():
        bad = np.flatnonzero(~good)
        ledger.reject(
            table.name, "wrong_column_count", len(bad), path=rel, line=int(numbers[bad[0]]),
            field_name=f"{int(counts[bad[0]])} fields, expected {ncols}",
        )
        data = b"\n".join(data[s:e] for s, e in zip(starts[good], ends[good], strict=True))
    elif first or physical != len(starts) or b"\r" in data:
        data = b"\n".join(data[s:e] for s, e in zip(starts, ends, strict=True))
    line_no = pl.Series("_line", numbers[good], dtype=pl.Int64)
    if not len(line_no):
        return _empty(table).with_columns(line_no), physical
    try:  # fast path: every value parses as its published type
        frame = _parse(data, {c.name: c.dtype for c in table.columns})
        frame = _check_mandatory(frame.with_columns(line_no), table, ledger, rel)
    except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError):
        frame = _parse(data, {c.name: pl.String for c in table.columns})
        frame = _typed(frame.with_columns(line_no), table, ledger, rel)
    return _check_values(frame, table, ledger, rel), physical


def _parse_uniform(
    data: bytes, table: RawTable, ledger: Ledger, rel: str, line_offset: int
) -> tuple[pl.DataFrame, int] | None:
    """The fast path of :func:`parse_block`, or None when ``data`` needs the line-by-line one.

    Taken when every value parses as its type and the commas number exactly (fields - 1) per
    line: polars refuses a line with too many fields, so then no line has too few, none is
    empty, and the row for line ``i`` is row ``i`` (no per-line scan needed).
    """
    commas, newlines, returns = count_separators(np.frombuffer(data, dtype=np.uint8))
    lines = newlines + (1 if data and not data.endswith(b"\n") else 0)
    if returns or not lines or commas != (len(table.columns) - 1) * lines:
        return None
    try:
        frame = _parse(data, {c.name: c.dtype for c in table.columns})
    except pl.exceptions.PolarsError:
        return None
    if frame.height != lines:
        return None
    ledger.read(table.name, lines)
    line_no = pl.Series("_line", np.arange(line_offset + 1, line_offset + lines + 1))
    frame = _check_mandatory(frame.with_columns(line_no), table, ledger, rel)
    return _check_values(frame, table, ledger, rel), lines


def _parse(data: bytes, schema: dict) -> pl.DataFrame:
    return pl.read_csv(
        data, has_header=False, new_columns=list(schema), schema=schema, quote_char=None,
        empty_string_is_null=True,
    )


def _check_mandatory(
    frame: pl.DataFrame, table: RawTable, ledger: Ledger, rel: str
) -> pl.DataFrame:
    missing = [c.name for c in table.columns if c.mandatory and frame[c.name].null_count()]
    if not missing:
        return frame
    flags = frame.select(pl.col(name).is_null().alias(f"missing_value:{name}")
                         for name in missing)
    return frame.filter(~_reject_flagged(frame, flags, table, ledger, rel))


def _check_values(frame: pl.DataFrame, table: RawTable, ledger: Ledger, rel: str
                  ) -> pl.DataFrame:
    """Reject rows with a nan/inf float, a negative value where the schema forbids one, or a
    value past what the field can physically be (:mod:`pipeline.ingest.limits`)."""
    if frame.is_empty() or not _may_flag(frame, table):
        return frame
    checks = [
        (pl.col(c.name).is_nan() | pl.col(c.name).is_infinite()).fill_null(False)
        .alias(f"not_finite:{c.name}") for c in table.columns if c.dtype == FLOAT
    ] + [
        (pl.col(c.name) < 0).fill_null(False).alias(f"negative_value:{c.name}")
        for c in table.columns if c.nonnegative
    ] + [
        (pl.col(c.name) > c.high).fill_null(False).alias(limits.reason(c.name))
        for c in table.columns if c.high is not None
    ]
    if not checks or frame.is_empty():
        return frame
    flags = frame.select(checks)
    if not flags.select(pl.any_horizontal(pl.all()).any()).item():
        return frame
    return frame.filter(~_reject_flagged(frame, flags, table, ledger, rel))


def _may_flag(frame: pl.DataFrame, table: RawTable) -> bool:
    """Whether :func:`_check_values` may flag a row, from one scalar per column.

    A float column's sum is NaN or infinite whenever it holds a NaN or an infinity (and, in
    theory, when finite values overflow: then the exact row checks run and find nothing);
    a column below zero has a negative minimum.  Cheaper than a flag per row and column,
    which is only computed when this says so.
    """
    summary = [~pl.col(c.name).sum().is_finite() for c in table.columns if c.dtype == FLOAT]
    summary += [(pl.col(c.name).min() < 0).fill_null(False)
                for c in table.columns if c.nonnegative]
    summary += [(pl.col(c.name).max() > c.high).fill_null(False)
                for c in table.columns if c.high is not None]
    return bool(summary) and bool(frame.select(pl.any_horizontal(summary)).item())


def _reject_flagged(frame: pl.DataFrame, flags: pl.DataFrame, table: RawTable, ledger: Ledger,
                    rel: str) -> pl.Series:
    """Count flagged rows by reason (each row once, under its first flag); the rows hit."""
    bad_any = pl.Series("bad", np.zeros(frame.height, bool))
    for reason in flags.columns:
        hit = flags[reason] & ~bad_any
        n = int(hit.sum())
        if n:
            ledger.reject(table.name, reason, n, path=rel,
                          line=int(frame["_line"].filter(hit)[0]),
                          field_name=reason.split(":", 1)[1])
            bad_any = bad_any | hit
    return bad_any


def _empty(table: RawTable) -> pl.DataFrame:
    """No rows, with the published types (a part whose every row was rejected)."""
    return pl.DataFrame(schema={c.name: c.dtype for c in table.columns})


def _typed(frame: pl.DataFrame, table: RawTable, ledger: Ledger, rel: str) -> pl.DataFrame:
    casts, checks = [], []
    for col in table.columns:
        raw = pl.col(col.name).str.strip_chars()
        if col.dtype == STR:
            casts.append(pl.when(raw == "").then(None).otherwise(raw).alias(col.name))
            if col.mandatory:  # as on the fast path (_check_mandatory)
                checks.append((raw.is_null() | (raw == "")).alias(f"missing_value:{col.name}"))
            continue
        parsed = _number(raw, col.dtype)
        casts.append(parsed.alias(col.name))
        present = raw.is_not_null() & (raw != "")
        checks.append((present & parsed.is_null()).alias(f"bad_number:{col.name}"))
        if col.mandatory:
            checks.append((~present).alias(f"missing_value:{col.name}"))
    flags = frame.select(checks) if checks else pl.DataFrame()
    bad_any = _reject_flagged(frame, flags, table, ledger, rel)
    typed = frame.with_columns(casts)
    if bad_any.any():
        typed = typed.filter(~bad_any)
    return typed


def _number(raw: pl.Expr, dtype: type[pl.DataType] | pl.DataType) -> pl.Expr:
    if dtype == INT:
        # Integers may appear as "1e+06" or "12.0" in some dumps; accept exact floats.
        as_float = raw.cast(pl.Float64, strict=False)
        as_int = raw.cast(pl.Int64, strict=False)
        whole = as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < 2**53)
        return pl.coalesce(as_int, pl.when(whole).then(as_float.cast(pl.Int64)))
    return raw.cast(pl.Float64, strict=False)


def iter_parts(
    src: Path, table: RawTable, ledger: Ledger, sources: list[SourceFile],
    files: Sequence[Path] | None = None, block_bytes: int = BLOCK_BYTES,
) -> Iterator[tuple[Path, pl.DataFrame]]:
    """Yield ``(path, frame)`` for each part of ``table`` in order, recording each source file.

    A part is decompressed as a stream and parsed in newline-aligned blocks of about
    ``block_bytes``, so one huge published file (Alibaba 2018's ``batch_instance.csv``) is
    read in bounded memory; a large part yields several frames in line order.
    """
    for path in files if files is not None else table.files(src):
        rel = str(path.relative_to(src)) if path.is_relative_to(src) else str(path)
        before = ledger.input_rows[table.name]
        reader, blocks = stored_blocks(path, block_bytes)
        lines = 0
        for data in blocks:
            frame, physical = parse_block(data, table, ledger, rel, lines,
                                          table.header and lines == 0)
            lines += physical
            yield path, frame
        sources.append(SourceFile(
            path=rel, table=table.name, bytes=reader.size, sha256=reader.digest.hexdigest(),
            rows=ledger.input_rows[table.name] - before,
        ))


