"""The CapacityScheduler's compiled per-call passes agree with the formulas they stand for."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.capacity import formulas as f
from pipeline.policies.capacity.prepare import (
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
    pair = scan_running(np.arange(n), jobs, req, minimum_a, calc, np.zeros(1),
                        np.zeros(1, np.int64), 1, np.zeros(0), used, np.empty(n, np.int64))
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
