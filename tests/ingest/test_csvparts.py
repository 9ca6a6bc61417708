"""Raw CSV parts: block streaming gives the same rows, line numbers and accounting."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable, iter_parts
from pipeline.trace.manifest import Ledger

TABLE = RawTable("t", "t*.csv*", (Column("a", INT, True), Column("b", FLOAT), Column("c", STR)))


@pytest.mark.parametrize("compress", [True, False])
def test_blocks_match_whole_file(tmp_path: Path, compress: bool) -> None:
    lines = [f"{i},{i / 4},x{i}" for i in range(2000)]
    lines[700] = "1,2"            # wrong column count
    lines[1500] = "q,1.0,z"       # not a number
    text = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("t.csv.gz" if compress else "t.csv")
    path.write_bytes(gzip.compress(text) if compress else text)
    results = []
    for block_bytes in (1 << 20, 997):
        ledger, sources = Ledger(), []
        frames = [f for _, f in iter_parts(tmp_path, TABLE, ledger, sources,
                                           block_bytes=block_bytes)]
        results.append((frames, ledger, sources))
    (whole, l1, s1), (blocks, l2, s2) = results
    assert len(whole) == 1 and len(blocks) > 10
    merged = pl.concat(blocks)
    assert merged.equals(whole[0])
    assert merged["_line"].to_list()[700] == 702  # line numbers are the file's
    assert l1.rows_rejected == l2.rows_rejected == {
        "t": {"wrong_column_count": 1, "bad_number:a": 1}}
    assert l1.input_rows["t"] == 2000 and s1[0].sha256 == s2[0].sha256
    assert s1[0].bytes == path.stat().st_size


CHECKED = RawTable("v", "v*.csv*", (Column("a", INT, True, nonnegative=True),
                                    Column("b", FLOAT, nonnegative=True), Column("c", FLOAT)))


@pytest.mark.parametrize(("bad", "reason"), [
    ("1,nan,0.5", "not_finite:b"), ("1,0.5,inf", "not_finite:c"),
    ("1,0.5,-inf", "not_finite:c"), ("-1,0.5,0.5", "negative_value:a"),
    ("1,-0.5,0.5", "negative_value:b"), ("1,1e308,1e308", None),
])
def test_value_checks_find_the_one_bad_row(tmp_path: Path, bad: str, reason: str | None
                                           ) -> None:
    """The summary that skips the row-by-row checks never hides a bad row (and finite
    values whose sum overflows are not rejected)."""
    lines = ["3,0.25,-2.5"] * 50 + [bad] + ["3,1e308,0.0"] * 3
    (tmp_path / "v.csv").write_text("\n".join(lines) + "\n")
    ledger = Ledger()
    frame = pl.concat([f for _, f in iter_parts(tmp_path, CHECKED, ledger, [])])
    assert ledger.rows_rejected.get("v", {}) == ({reason: 1} if reason else {})
    assert frame.height == len(lines) - (1 if reason else 0)
