"""Reading raw published CSV parts (gzip or plain) into typed polars frames, row by row accounted.

Every row of a part is either returned or rejected into the :class:`Ledger` with a reason:
``wrong_column_count`` (field count differs from the published schema),
``bad_number:FIELD`` (a value that does not parse as the published type) or
``missing_value:FIELD`` (a mandatory field that is empty).  Examples keep file and line.
A part that cannot be decompressed (truncated gzip) or an empty file is a :class:`TraceError`:
silently reading half a part would lose rows without a trace.
"""

from __future__ import annotations

import hashlib
import io
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from queue import Queue

import numba
import numpy as np
import polars as pl
from isal import igzip

from pipeline.errors import TraceError
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


def read_raw(path: Path) -> bytes:
    """The bytes of ``path`` as stored (compressed or not), with a clear error if unreadable."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read file ({exc.strerror})", path) from exc
    if not raw:
        raise TraceError("empty file (0 bytes)", path)
    return raw


def decompress(raw: bytes, path: Path) -> bytes:
    """Content of a stored file: gunzipped when it starts with the gzip magic number."""
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return _gunzip(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip ({exc})", path) from exc


def read_bytes(path: Path) -> bytes:
    """The decompressed content of ``path`` (gzip by magic number, else plain)."""
    return decompress(read_raw(path), path)


def _gunzip(raw: bytes) -> bytes:
    # ISA-L inflates about 3x faster than zlib; gzip's multi-member handling is kept.
    return igzip.decompress(raw)


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


def read_part(path: Path, table: RawTable, ledger: Ledger, rel: str) -> pl.DataFrame:
    """Parse one whole part (small files; :func:`iter_parts` streams large ones in blocks)."""
    return parse_block(read_bytes(path), table, ledger, rel)[0]


def parse_block(
    data: bytes, table: RawTable, ledger: Ledger, rel: str, line_offset: int = 0,
    skip_header: bool | None = None,
) -> tuple[pl.DataFrame, int]:
    """Parse newline-aligned CSV bytes into a typed frame with ``_line`` (1-based, in the file).

    Rows with the wrong number of fields, unparsable numbers or empty mandatory fields are
    rejected into ``ledger``; the rest are returned, with the number of physical lines in
    ``data``.  ``line_offset`` is the number of lines of the file before ``data``.
    """
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
        return _check_mandatory(frame.with_columns(line_no), table, ledger, rel), physical
    except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError):
        frame = _parse(data, {c.name: pl.String for c in table.columns})
        return _typed(frame.with_columns(line_no), table, ledger, rel), physical


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
    bad_any = pl.Series("bad", np.zeros(frame.height, bool))
    for name in missing:
        hit = frame[name].is_null() & ~bad_any
        n = int(hit.sum())
        if n:
            ledger.reject(table.name, f"missing_value:{name}", n, path=rel,
                          line=int(frame["_line"].filter(hit)[0]), field_name=name)
            bad_any = bad_any | hit
    return frame.filter(~bad_any)


def _empty(table: RawTable) -> pl.DataFrame:
    return pl.DataFrame(schema={c.name: pl.String for c in table.columns})


def _typed(frame: pl.DataFrame, table: RawTable, ledger: Ledger, rel: str) -> pl.DataFrame:
    casts, checks = [], []
    for col in table.columns:
        raw = pl.col(col.name).str.strip_chars()
        if col.dtype == STR:
            casts.append(pl.when(raw == "").then(None).otherwise(raw).alias(col.name))
            continue
        parsed = _number(raw, col.dtype)
        casts.append(parsed.alias(col.name))
        present = raw.is_not_null() & (raw != "")
        checks.append((present & parsed.is_null()).alias(f"bad_number:{col.name}"))
        if col.mandatory:
            checks.append((~present).alias(f"missing_value:{col.name}"))
    flags = frame.select(checks) if checks else pl.DataFrame()
    bad_any = pl.Series("bad", np.zeros(frame.height, bool))
    for reason in flags.columns:
        hit = flags[reason] & ~bad_any  # each row counted once, under its first reason
        n = int(hit.sum())
        if n:
            first = int(frame["_line"].filter(hit)[0])
            ledger.reject(table.name, reason, n, path=rel, line=first,
                          field_name=reason.split(":", 1)[1])
            bad_any = bad_any | hit
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
        reader = _HashingReader(path)
        lines = 0
        for data in _prefetch(_blocks(reader, path, block_bytes)):
            frame, physical = parse_block(data, table, ledger, rel, lines,
                                          table.header and lines == 0)
            lines += physical
            yield path, frame
        sources.append(SourceFile(
            path=rel, table=table.name, bytes=reader.size, sha256=reader.digest.hexdigest(),
            rows=ledger.input_rows[table.name] - before,
        ))


def _prefetch(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """Read and inflate the next block in a thread while the caller parses this one.

    File reads and ISA-L inflation release the GIL, so on two cores this overlaps I/O and
    decompression with parsing; errors are re-raised in the caller, in order.
    """
    queue: Queue[tuple[bytes | None, BaseException | None]] = Queue(maxsize=1)

    def produce() -> None:
        try:
            for block in blocks:
                queue.put((block, None))
            queue.put((None, None))
        except BaseException as exc:  # handed to the consumer, never lost
            queue.put((None, exc))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    while True:
        block, error = queue.get()
        if error is not None:
            raise error
        if block is None:
            break
        yield block
    thread.join()


class _HashingReader(io.RawIOBase):
    """A raw file reader that hashes and counts the stored bytes as they stream by."""

    def __init__(self, path: Path) -> None:
        try:
            self._fh = path.open("rb")
        except OSError as exc:
            raise TraceError(f"cannot read file ({exc.strerror})", path) from exc
        self.digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = self._fh.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
            self.size += n
        return n or 0

    def close(self) -> None:
        self._fh.close()
        super().close()


def _blocks(reader: _HashingReader, path: Path, block_bytes: int) -> Iterator[bytes]:
    """Newline-terminated blocks of about ``block_bytes`` decompressed bytes."""
    with reader:
        head = reader.read(2)
        if not head:
            raise TraceError("empty file (0 bytes)", path)
        stream: io.BufferedIOBase
        body = io.BufferedReader(_Prefixed(head, reader), buffer_size=1 << 20)
        stream = igzip.IGzipFile(fileobj=body, mode="rb") if head == b"\x1f\x8b" else body
        carry = b""
        try:
            while block := stream.read(block_bytes):
                data = carry + block
                cut = data.rfind(b"\n")
                if cut < 0:  # a line longer than a block: keep reading
                    carry = data
                    continue
                carry = data[cut + 1:]
                yield data[: cut + 1]
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(f"corrupt or truncated gzip ({exc})", path) from exc
        if carry.strip():
            yield carry + b"\n"


class _Prefixed(io.RawIOBase):
    """``reader`` with ``prefix`` (bytes already read from it) put back in front."""

    def __init__(self, prefix: bytes, reader: _HashingReader) -> None:
        self._prefix = prefix
        self._reader = reader

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._reader.readinto(buffer)
