"""The CapacityScheduler's compiled per-call passes agree with the formulas they stand for."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.capacity import formulas as f
from pipeline.policies.capacity.prepare import (
    AliveApps,
    AliveCounts,
    JobSums,
    Sizing,
    alive_counts,
    keep_waiting,
    normalize_pending,
    scan_running,
)

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

_values = st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.3, 2.0, 2.5, 7.0, 1e-3])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_values, _values, _values), min_size=1, max_size=30),
       st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0]),
                 st.sampled_from([0.0, 1.0])),
       st.booleans(), st.data())
def test_normalised_requests_match_the_formula(rows: list, minimum: tuple, dominant: bool,
                                               data: st.DataObject) -> None:
    """Pending (capped at the largest node) and running requests are rounded as
    formulas.normalize rounds them (DefaultResourceCalculator: memory; Dominant: each
    resource with a minimum), and normalising only some rows gives those rows the same
    values and leaves the others untouched."""
    req = np.array(rows, dtype=float)
    minimum_a = np.array(minimum)
    calc = 1 if dominant else 0
    largest = np.array([3.0, 3.0, 3.0])
    n = len(req)
    nonzero = (req > 0) | (minimum_a > 0)  # formulas.normalize: a zero request stays zero
    expect = f.normalize(req, minimum_a, f.DOMINANT if dominant else f.DEFAULT)
    jobs = np.zeros(n, dtype=np.int64)
    out = np.empty((n, 3))
    normalize_pending(req, np.arange(n), minimum_a, calc, largest, out)
    capped = np.minimum(expect, largest)
    np.testing.assert_array_equal(out[nonzero], capped[nonzero])
    rows_ = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.int64)
    some = np.full((n, 3), np.nan)
    normalize_pending(req, rows_, minimum_a, calc, largest, some)
    np.testing.assert_array_equal(some[rows_], out[rows_])
    assert np.isnan(np.delete(some, rows_, axis=0)).all()
    used = np.empty((n, 3))
    pair = scan_running(np.arange(n), jobs, req, Sizing(minimum_a, calc),
                        JobSums(np.zeros(1), np.zeros(1, np.int64), np.zeros(0)), 1, used,
                        np.empty(n, np.int64))
    np.testing.assert_array_equal(used[nonzero], expect[nonzero])
    np.testing.assert_array_equal(pair[0], used.sum(axis=0))


def test_keep_waiting_reads_each_application_s_key() -> None:
    """Requests of started applications are kept; those of applications not started only
    where their key (leaf, or partition and leaf) is open; candidates once each, in
    first-seen order."""
    jobs = np.array([3, 1, 2, 1, 0, 3, 2])
    started = np.array([False, True, False, False])
    job_key = np.array([0, 1, 1, 2])  # job -> key
    closed = np.array([True, False, True])  # key 1 open
    mark = np.zeros(4, dtype=bool)
    kept, cand = np.empty(7, np.int64), np.empty(7, np.int64)
    n_kept, n_cand = keep_waiting(jobs, started, job_key, closed, mark, kept, cand)
    assert kept[:n_kept].tolist() == [1, 2, 3, 6]  # job 1 (started), job 2 (key 1 open)
    assert cand[:n_cand].tolist() == [2]
    assert not mark.any()


def _alive_reference(run_job: list[int], pend_job: list[int], started: list[bool],
                     key: list[int], pair: list[int], am_req: np.ndarray, n_keys: int,
                     n_pairs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each started application with a container running or a request pending, once, in
    first-seen order (running first): its AM resources and count per key, count per
    pair (state.py: the AM counts while the application is alive)."""
    am_used = np.zeros((n_keys, 3))
    key_apps = np.zeros(n_keys, dtype=np.int64)
    pair_apps = np.zeros(n_pairs, dtype=np.int64)
    seen: set[int] = set()
    for j in run_job + pend_job:
        if started[j] and j not in seen:
            seen.add(j)
            am_used[key[j]] += am_req[j]
            key_apps[key[j]] += 1
            pair_apps[pair[j]] += 1
    return am_used, key_apps, pair_apps


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_alive_counts_match_a_plain_count(data: st.DataObject) -> None:
    """alive_counts sums each alive started application once, as the reference does, and
    leaves its scratch marks clear."""
    n_jobs = data.draw(st.integers(1, 8))
    jobs = st.lists(st.integers(0, n_jobs - 1), max_size=12)
    run_job, pend_job = data.draw(jobs), data.draw(jobs)
    started = data.draw(st.lists(st.booleans(), min_size=n_jobs, max_size=n_jobs))
    key = data.draw(st.lists(st.integers(0, 2), min_size=n_jobs, max_size=n_jobs))
    pair = data.draw(st.lists(st.integers(0, 3), min_size=n_jobs, max_size=n_jobs))
    am_req = np.array(data.draw(st.lists(st.tuples(_values, _values, _values),
                                         min_size=n_jobs, max_size=n_jobs)))
    apps = AliveApps(np.array(started, dtype=np.bool_), np.array(key, dtype=np.int64),
                     np.array(pair, dtype=np.int64), am_req, np.zeros(n_jobs, np.bool_))
    counts = AliveCounts(np.zeros((3, 3)), np.zeros(3, np.int64), np.zeros(4, np.int64))
    alive_counts(np.array(run_job, np.int64), np.array(pend_job, np.int64), apps, counts)
    expect = _alive_reference(run_job, pend_job, started, key, pair, am_req, 3, 4)
    for got, want in zip(counts, expect, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not apps.mark.any()
