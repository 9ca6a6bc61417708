"""The compiled task fold keeps its slot bookkeeping right while it grows."""

from __future__ import annotations

import numpy as np

from pipeline.ingest.google2011 import taskstate as ts


def events(n: int, event: int, t: float) -> dict[str, np.ndarray]:
    return {
        "time": np.full(n, t), "job_id": np.full(n, 7, dtype=np.int64),
        "task_index": np.arange(n, dtype=np.int64), "machine_id": np.full(n, 1, dtype=np.int64),
        "event_type": np.full(n, event, dtype=np.int64), "priority": np.zeros(n, np.int64),
        "sched_class": np.zeros(n, np.int64), "cpu": np.full(n, 0.1), "mem": np.full(n, 0.1),
    }


def test_growing_then_closing_every_task() -> None:
    state = ts.TaskState(capacity=2)
    for rounds in range(3):
        n = 50 * (rounds + 1)
        ts.fold_part(state, events(n, ts.SUBMIT, 10.0 * rounds + 1))
        ts.fold_part(state, events(n, ts.SCHEDULE, 10.0 * rounds + 2))
        assert state.free.size == state.capacity
        _, done = ts.fold_part(state, events(n, ts.FINISH, 10.0 * rounds + 5))
        assert len(done["submit_s"]) == n and len(state.slots) == 0
        assert state.n_free[0] == state.capacity
        assert sorted(state.free.tolist()) == list(range(state.capacity))
