"""Fairness indices computed from streamed tasks: the per-point running sums agree with the
event-by-event scan, whatever the input kind, batch size or block of evaluation points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.metrics import fairness as f
from tests.metrics.frames import nodes, tasks
from tests.metrics.test_fairness import frame, random_rows, run


def spacers(n: int) -> pl.DataFrame:
    """Nodes offering nothing, up on [k + 0.1, k + 0.3): extra distinct event times that
    change no capacity, to push a run past a small ``max_evaluations``."""
    return nodes([(k + 0.1, k + 0.3) for k in range(n)], cpu=0.0, mem=0.0)


def test_sampled_path_on_a_known_case() -> None:
    # 4 cpu on [0,20).  a runs 4 one-cpu tasks on [0,7.5); b's 4 are ready at 0 and run on
    # [7.5,20).  Four slices: midpoints 2.5, 7.5, 12.5, 17.5.  J(2.5) = 1/2 for both indices
    # (a holds its fair share and all of it, b nothing); at 7.5 the events at 7.5 have
    # happened (a done, b running): 1; then 1.  Midpoint rule: 3.5 / 4 (exact: 0.8125).
    tr = tasks([run("a", 0.0, 7.5)] * 4 + [run("b", 7.5, 20.0)] * 4)
    ni = pl.concat([nodes([(0.0, 20.0)], mem=100.0), spacers(5)])
    assert f.fairness_indices(tr, ni, 20.0, max_evaluations=4) == (0.875, 0.875)
    assert f.fairness_indices(tr, ni, 20.0, max_evaluations=100) == (0.8125, 0.8125)


def test_sampled_path_raises_capacity_to_what_is_allocated() -> None:
    # 2 cpu yet 3 one-cpu tasks run on [0,10): capacity counts as 3, so every ready task
    # running scores 1, sampled as exactly (against 2 cpu, fair shares 1/2 each, x = 2 and
    # 1: 0.9).  Equal shares 2/3 and 1/3: 0.9.
    tr = tasks([run("a", 0.0, 10.0)] * 2 + [run("b", 0.0, 10.0)])
    ni = pl.concat([nodes([(0.0, 10.0)], cpu=2.0, mem=100.0), spacers(5)])
    assert f.fairness_indices(tr, ni, 10.0, max_evaluations=3) == pytest.approx((1.0, 0.9))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_running_sums_agree_with_the_scan(seed: int) -> None:
    # Exact path both ways (every distinct event time, ties included), and the midpoints.
    tr = frame(random_rows(seed, 300, 6), delayed=seed != 2)
    ni = nodes([(0.0, 60.0), (20.0, 120.0, 30.0)], cpu=6.0, mem=6.0)
    scan = f.fairness_indices(tr, ni, 120.0, max_evaluations=10**6)
    sums = f.fairness_indices(tr, ni, 120.0, max_evaluations=10**6, scan_rows=0)
    assert sums == pytest.approx(scan, rel=1e-12)
    survey, nodes_ = f._survey(tr.lazy(), 120.0), f._nodes(ni, 120.0)
    for at in (np.linspace(0.25, 119.75, 240), np.arange(0.0, 120.0, 0.5)):  # ties at .0/.5
        weight = np.ones(len(at))
        expected = f._scan_sums(survey, nodes_, at, weight)
        assert f._slice_sums(survey, nodes_, at, weight, 64, 4096) == pytest.approx(
            expected, rel=1e-12)


@pytest.mark.parametrize("max_evaluations", [10**6, 50])
def test_lazy_and_eager_input_agree(tmp_path: Path, max_evaluations: int) -> None:
    tr = frame(random_rows(4, 300, 5), delayed=True)
    ni = nodes([(0.0, 100.0)], cpu=6.0, mem=6.0)
    tr.write_parquet(tmp_path / "task_runs.parquet")
    eager = f.fairness_indices(tr, ni, 100.0, max_evaluations)
    assert eager.jain_fairness is not None
    assert f.fairness_indices(tr.lazy(), ni, 100.0, max_evaluations) == eager
    scanned = pl.scan_parquet(tmp_path / "task_runs.parquet")
    assert f.fairness_indices(scanned, ni.lazy(), 100.0, max_evaluations) == eager


@pytest.mark.parametrize("max_evaluations", [10**6, 50])
def test_batches_and_blocks_do_not_change_the_result(max_evaluations: int) -> None:
    # The running sums take the tasks in row order and carry from block to block, so any
    # batch size and any block of points give the very same floats.  One-row batches and
    # one-point blocks are each tried against the other at a middling size (together they
    # read the tasks one row at a time once per point: minutes, and nothing more tested).
    tr = frame(random_rows(5, 200, 7), delayed=True)
    ni = nodes([(0.0, 100.0), (10.0, 70.0, 15.0)], cpu=5.0, mem=5.0)
    whole = f.fairness_indices(tr, ni, 100.0, max_evaluations, scan_rows=0)
    for batch_rows, block_bytes in [(1, 10**9), (64, 1), (7, 5000), (10**6, 10**5)]:
        assert f.fairness_indices(tr, ni, 100.0, max_evaluations, batch_rows=batch_rows,
                                  block_bytes=block_bytes, scan_rows=0) == whole


def test_the_distinct_times_pass_stops_past_the_limit() -> None:
    # 3 distinct times over 1-row batches: found exactly under a limit of 3, None past it.
    survey = f._survey(tasks([run("a", 0.0, 10.0), run("b", 5.0, 10.0)]).lazy(), 10.0)
    none = f._nodes(nodes([]), 10.0)
    assert list(f._distinct_times(survey.tasks, none, 3, 1)) == [0.0, 5.0, 10.0]
    assert f._distinct_times(survey.tasks, none, 2, 1) is None
