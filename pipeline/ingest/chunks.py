"""Tables read as (file index, frame) pairs, for adapters that join rows across files.

:func:`~pipeline.ingest.csvparts.iter_parts` already streams a huge published file (Alibaba
2018 ``batch_instance.csv``: ~100 GB) in newline-aligned blocks of ``chunk_bytes``; this
module adds the file index and the published column types (kept even in a block whose every
row was rejected), and :func:`read_whole` for small tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from pipeline.ingest.csvparts import BLOCK_BYTES, RawTable, iter_parts
from pipeline.trace.manifest import Ledger, SourceFile

CHUNK_BYTES = BLOCK_BYTES


def iter_table(
    src: Path, table: RawTable, ledger: Ledger, sources: list[SourceFile],
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[tuple[int, pl.DataFrame]]:
    """Yield ``(file index, frame)`` for every block of every part, in file and line order.

    ``_line`` in each frame is the line number in the original file.
    """
    types = {c.name: c.dtype for c in table.columns}
    index, previous = -1, None
    for path, frame in iter_parts(src, table, ledger, sources, block_bytes=chunk_bytes):
        if path != previous:
            index, previous = index + 1, path
        yield index, frame.cast(types)


def read_whole(
    src: Path, table: RawTable, ledger: Ledger, sources: list[SourceFile],
    chunk_bytes: int = CHUNK_BYTES,
) -> pl.DataFrame:
    """A small table whole, in file then line order, with ``_file`` (index) and ``_line``."""
    frames = [
        frame.with_columns(pl.lit(index, pl.Int64).alias("_file"))
        for index, frame in iter_table(src, table, ledger, sources, chunk_bytes)
    ]
    return pl.concat(frames).sort("_file", "_line", maintain_order=True)
