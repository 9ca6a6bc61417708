"""Reading newline-delimited JSON parts (gzip or plain) into typed polars frames, every line
accounted.

The stored bytes come from :mod:`pipeline.ingest.rawfile` (format check, gzip inflation,
hashing, newline-aligned blocks of bounded size).  A block's lines become one Arrow string
array without a Python loop (offsets from the newline positions); polars parses them.

Each non-empty line is read (``input_rows``) and either returned or rejected with a reason:
``not_utf8`` (bytes that are not UTF-8), ``unparsable_json``, ``not_an_object`` (valid JSON
but not ``{...}``), ``unexpected_json_type`` (a field of the wrong JSON shape: an object
where a number belongs, say), then per field, as for CSV parts
(:mod:`pipeline.ingest.csvparts`): ``bad_number:FIELD``, ``missing_value:FIELD``,
``not_finite:FIELD`` and ``negative_value:FIELD``.  Numbers are accepted as JSON numbers or
strings (BigQuery writes INT64 as strings), an integer also as an exact float (``"1e6"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.ingest.csvparts import (
    BLOCK_BYTES,
    FLOAT,
    STR,
    Column,
    RawTable,
    _number,
)
from pipeline.ingest.google2019.tables import (
    ALLOC_SET,
    EVENT_TYPES,
    TIME_AFTER_WINDOW,
    inside_offset,
)
from pipeline.ingest.rawfile import stored_blocks
from pipeline.trace.manifest import Ledger, SourceFile


def flat(name: str) -> str:
    """The frame column of a JSON path (``resource_request.cpus`` -> ``resource_request_cpus``)."""
    return name.replace(".", "_")


def iter_json_parts(
    src: Path, table: RawTable, ledger: Ledger, sources: list[SourceFile],
    block_bytes: int = BLOCK_BYTES,
) -> Iterator[tuple[int, pl.DataFrame]]:
    """Yield ``(file index, frame)`` for every block of every part, in file and line order.

    Frames have one column per :class:`Column` (flattened name) and ``_line`` (1-based line
    in the file); the source file is recorded in ``sources`` once read.
    """
    for index, path in enumerate(table.files(src)):
        rel = str(path.relative_to(src)) if path.is_relative_to(src) else str(path)
        before = ledger.input_rows[table.name]
        reader, blocks = stored_blocks(path, block_bytes)
        lines = 0
        for data in blocks:
            frame, physical = parse_block(data, table, ledger, rel, lines)
            lines += physical
            yield index, frame
        sources.append(SourceFile(
            path=rel, table=table.name, bytes=reader.size, sha256=reader.digest.hexdigest(),
            rows=ledger.input_rows[table.name] - before,
        ))


def parse_block(data: bytes, table: RawTable, ledger: Ledger, rel: str,
                line_offset: int = 0) -> tuple[pl.DataFrame, int]:
    """Parse newline-terminated JSON lines into a typed frame; the number of physical lines."""
    utf8 = True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:  # rare: mark the bad lines, keep the others
        data, utf8 = data.decode("utf-8", "replace").encode("utf-8"), False
    lines, numbers = _lines(data, line_offset)
    physical = int(numbers.size)
    keep = lines.str.strip_chars().str.len_bytes() > 0
    lines, numbers = lines.filter(keep), numbers[keep.to_numpy()]
    ledger.read(table.name, lines.len())
    frame = pl.DataFrame({"raw": lines, "_line": pl.Series(numbers, dtype=pl.Int64)})
    whole = frame["raw"].str.json_path_match("$")
    flags = frame.select(
        pl.lit(not utf8).and_(pl.col("raw").str.contains("\ufffd", literal=True))
        .alias("not_utf8"),
        whole.is_null().alias("unparsable_json"),
        (~whole.str.starts_with("{")).fill_null(False).alias("not_an_object"),
    )
    frame = _reject(frame, flags, table, ledger, rel)
    decoded = _decode(frame, table, ledger, rel)
    return _typed(decoded, table, ledger, rel), physical


def _lines(data: bytes, line_offset: int) -> tuple[pl.Series, np.ndarray]:
    """Every physical line of ``data`` (newline included) and its 1-based number."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    if not data.endswith(b"\n"):
        ends = np.r_[ends, len(data) - 1]
    starts = np.r_[0, ends[:-1] + 1].astype(np.int64)
    offsets = np.r_[starts, len(data)].astype(np.int64)
    array = pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(offsets),
                                             pa.py_buffer(data))
    numbers = np.arange(line_offset + 1, line_offset + len(starts) + 1, dtype=np.int64)
    return pl.Series("raw", array), numbers


def _reject(frame: pl.DataFrame, flags: pl.DataFrame, table: RawTable, ledger: Ledger,
            rel: str) -> pl.DataFrame:
    """Count flagged rows by reason (column ``reason`` or ``reason:field``); return the others."""
    if frame.is_empty() or not flags.select(pl.any_horizontal(pl.all()).any()).item():
        return frame
    bad = pl.Series(np.zeros(frame.height, bool))
    for reason in flags.columns:
        hit = flags[reason] & ~bad
        if hit.any():  # each row once, under its first reason
            ledger.reject(table.name, reason, int(hit.sum()), path=rel,
                          line=int(frame["_line"].filter(hit)[0]),
                          field_name=reason.partition(":")[2] or None)
            bad = bad | hit
    return frame.filter(~bad)


def _struct_type(columns: tuple[Column, ...]) -> pl.Struct:
    """The JSON shape of the columns, every scalar read as text (numbers or strings)."""
    fields: dict[str, object] = {}
    for col in columns:
        head, _, rest = col.name.partition(".")
        if rest:
            inner = fields.setdefault(head, {})
            assert isinstance(inner, dict)
            inner[rest] = pl.String
        else:
            fields[head] = col.dtype if isinstance(col.dtype, pl.List) else pl.String
    return pl.Struct({k: pl.Struct(v) if isinstance(v, dict) else v  # type: ignore[arg-type]
                      for k, v in fields.items()})


def _decode(frame: pl.DataFrame, table: RawTable, ledger: Ledger, rel: str) -> pl.DataFrame:
    """Decode the JSON objects into text columns; lines of an unexpected shape are rejected."""
    shape = _struct_type(table.columns)
    good = _decodable(frame["raw"], shape)
    if not good.all():
        flags = pl.DataFrame({"unexpected_json_type": ~good})
        frame = _reject(frame, flags, table, ledger, rel)
    decoded = frame["raw"].str.json_decode(shape)
    columns = []
    for col in table.columns:
        expr = pl.col("s")
        for part in col.name.split("."):
            expr = expr.struct.field(part)
        columns.append(expr.alias(flat(col.name)))
    return pl.DataFrame({"s": decoded, "_line": frame["_line"]}).select(*columns, "_line")


def _decodable(raw: pl.Series, shape: pl.Struct) -> pl.Series:
    """Which lines decode into ``shape`` (bisecting a block that does not, to find them)."""
    try:
        raw.str.json_decode(shape)
        return pl.Series(np.ones(raw.len(), bool))
    except pl.exceptions.PolarsError:
        if raw.len() == 1:
            return pl.Series([False])
    half = raw.len() // 2
    return pl.concat([_decodable(raw.slice(0, half), shape),
                      _decodable(raw.slice(half), shape)])


def _typed(frame: pl.DataFrame, table: RawTable, ledger: Ledger, rel: str) -> pl.DataFrame:
    """Cast the text columns to their published types; count what does not fit."""
    casts, checks = [], []
    for col in table.columns:
        name = flat(col.name)
        if isinstance(col.dtype, pl.List):
            casts.append(pl.col(name))
            continue
        raw = pl.col(name).str.strip_chars()
        present = raw.is_not_null() & (raw != "")
        if col.dtype == STR:
            casts.append(pl.when(present).then(raw).alias(name))
        else:
            parsed = _number(raw, col.dtype)
            casts.append(parsed.alias(name))
            checks.append((present & parsed.is_null()).alias(f"bad_number:{name}"))
        if col.mandatory:
            checks.append((~present).alias(f"missing_value:{name}"))
    if frame.is_empty():
        return frame.select([*casts, pl.col("_line")])
    frame = _reject(frame, frame.select(checks), table, ledger, rel)
    typed = frame.select([*casts, pl.col("_line")])
    values = [
        (pl.col(flat(c.name)).is_nan() | pl.col(flat(c.name)).is_infinite()).fill_null(False)
        .alias(f"not_finite:{flat(c.name)}") for c in table.columns if c.dtype == FLOAT
    ] + [
        (pl.col(flat(c.name)) < 0).fill_null(False).alias(f"negative_value:{flat(c.name)}")
        for c in table.columns if c.nonnegative
    ]
    return _reject(typed, typed.select(values), table, ledger, rel)


def reject_rows(frame: pl.DataFrame, table: str, ledger: Ledger,
                reasons: list[tuple[str, pl.Expr]], use: bool = True) -> pl.DataFrame:
    """Count rows matching each ``(reason, condition)`` (each row once, first reason first);
    return the rest, counted as used unless ``use`` is false (the caller decides later)."""
    if frame.is_empty():
        return frame
    flags = frame.select([cond.fill_null(False).alias(name) for name, cond in reasons])
    bad = pl.Series(np.zeros(frame.height, bool))
    for name in flags.columns:
        hit = flags[name] & ~bad
        ledger.reject(table, name, int(hit.sum()))
        bad = bad | hit
    kept = frame.filter(~bad)
    if use:
        ledger.use(table, kept.height)
    return kept


def usable_events(frame: pl.DataFrame, table: str, ledger: Ledger, counts: dict[str, int],
                  alloc_key: str) -> pl.DataFrame:
    """A block of ``collection_events`` or ``instance_events`` without its unusable rows:
    unknown event types, alloc sets (counted under ``counts[alloc_key]``: their tasks run
    with their own requests) and events after the window; times inside the 600 s offset
    are read as before the window and counted."""
    alloc = pl.col("collection_type") == ALLOC_SET
    counts[alloc_key] += int(frame.select(alloc.fill_null(False).sum()).item())
    frame = reject_rows(frame, table, ledger, [
        ("unknown_event_type", ~pl.col("type").is_in(list(EVENT_TYPES))),
        ("alloc_set_not_replayed", alloc),
        ("after_window", pl.col("time") == TIME_AFTER_WINDOW),
    ])
    ledger.repair(table, "time_inside_offset_read_as_before_window",
                  int(frame.select(inside_offset(pl.col("time")).sum()).item()))
    return frame
