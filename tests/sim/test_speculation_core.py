"""Speculative copies in the core (pipeline.sim.speculation): the first attempt to finish
wins, the other is killed, both hold resources while they run, the loser's time is lost, and
a stop of one attempt leaves the other to carry the task; what the core refuses."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from pipeline.sim import ClusterSpec, Decisions, FixedCluster, PolicyError, SimOptions, Simulation
from pipeline.sim.interface import SchedView
from pipeline.sim.needs import Needs
from pipeline.sim.tasks import OUTCOMES, SPEC_NAMES, RecordChunk
from tests.sim.test_core import batch

Script = Callable[[SchedView], Decisions | None]


def nodes(speeds: list[float], cpu: float = 4.0,
          periods: list[tuple[int, float, float]] | None = None) -> FixedCluster:
    n = len(speeds)
    periods = periods if periods is not None else [(i, 0.0, np.inf) for i in range(n)]
    return FixedCluster(ClusterSpec(), [f"m{i}" for i in range(n)],
                        np.tile([cpu, cpu, 0.0], (n, 1)), np.array(speeds, float),
                        np.zeros(n, np.int32), periods)


class Scripted:
    """Places every pending request on node 0; at each call ``script`` may add decisions."""

    name = "scripted"

    def __init__(self, script: Script, wakes: list[float]) -> None:
        self.script = script
        self.wakes = sorted(wakes)

    def setup(self, cluster, rng) -> Needs:
        return Needs(running=True, job_stats=True)

    def decide(self, view: SchedView) -> Decisions:
        m = len(view.pending)
        d = self.script(view) or Decisions()
        if m:
            d.place_req, d.place_node = np.arange(m), np.zeros(m, np.int64)
        later = [w for w in self.wakes if w > view.now]
        d.wake_at_s = later[0] if later else None
        return d


def copy_at(when: float, node: int, run: int = 0) -> Script:
    def script(view: SchedView) -> Decisions | None:
        if view.now == when:
            return Decisions(spec_run=np.array([run]), spec_node=np.array([node]))
        return None
    return script


def replay(clu: FixedCluster, policy: Scripted, b=None, **options) -> tuple[dict, Simulation]:
    chunks: list[RecordChunk] = []
    sim = Simulation(clu, policy, [b if b is not None else batch([0], [100])], chunks.append,
                     options=SimOptions(**options))
    sim.run()
    out = {}
    for c in chunks:
        for i in range(len(c.row)):
            rec = {k: getattr(c, k)[i] for k in c.__dataclass_fields__}
            rec["outcome"] = OUTCOMES[rec["outcome"]]
            rec["spec"] = dict(zip(SPEC_NAMES, rec["spec"].tolist(), strict=True))
            out[int(rec["row"])] = rec
    return out, sim


def test_a_copy_on_a_fast_node_wins_and_the_original_is_killed() -> None:
    clu = nodes([0.25, 1.0])
    recs, _ = replay(clu, Scripted(copy_at(10.0, 1), [10.0]))
    r = recs[0]
    assert r["outcome"] == "finished" and r["end"] == 110.0  # not 400 on the slow node
    assert r["instance"] == 0 and r["start"] == 0.0  # the original attempt's place
    assert r["spec"] == {"copies": 1, "won": 1, "instance": 1, "start": 10.0, "run_s": 100.0,
                         "wasted_s": 110.0}
    assert not clu.nodes.alloc.any() and not clu.nodes.ncont.any()
    assert clu.nodes.done.tolist() == [0, 1] and clu.nodes.done_s.tolist() == [0.0, 100.0]


def test_the_original_wins_over_a_slow_copy_which_is_lost() -> None:
    recs, _ = replay(nodes([1.0, 0.25]), Scripted(copy_at(10.0, 1), [10.0]))
    r = recs[0]
    assert r["end"] == 100.0 and r["instance"] == 0
    assert r["spec"]["won"] == 0 and r["spec"]["run_s"] == 90.0 and r["spec"]["wasted_s"] == 90.0


def test_both_attempts_hold_their_resources_while_they_run() -> None:
    seen: list[np.ndarray] = []

    def script(view: SchedView) -> Decisions | None:
        if view.now == 10.0:
            return Decisions(spec_run=np.array([0]), spec_node=np.array([1]))
        if view.now == 20.0:
            seen.append(view.nodes.alloc[:, 0].copy())
            assert view.running.speculative.tolist() == [False, True]
            assert view.running.has_copy.tolist() == [True, False]
            assert view.running.copies.tolist() == [1, 0]
        return None

    replay(nodes([0.25, 1.0]), Scripted(script, [10.0, 20.0]))
    assert seen[0].tolist() == [1.0, 1.0]


def test_a_preempted_original_hands_its_task_to_the_copy() -> None:
    def script(view: SchedView) -> Decisions | None:
        if view.now == 10.0:
            return Decisions(spec_run=np.array([0]), spec_node=np.array([1]))
        if view.now == 20.0:
            return Decisions(preempt=np.array([0]))  # the original
        return None

    clu = nodes([0.25, 1.0])
    recs, _ = replay(clu, Scripted(script, [10.0, 20.0]))
    r = recs[0]
    assert r["outcome"] == "finished" and r["end"] == 110.0 and r["preemptions"] == 1
    assert r["wasted"] == 20.0 and r["instance"] == 1 and r["start"] == 10.0
    # the copy's whole run is the task's run now (start_s is the copy's): not extra
    assert r["spec"]["won"] == 1 and r["spec"]["run_s"] == 0.0 and r["spec"]["wasted_s"] == 0
    assert not clu.nodes.alloc.any()


def test_a_copy_on_a_node_that_goes_down_is_lost_and_the_original_runs_on() -> None:
    clu = nodes([1.0, 1.0], periods=[(0, 0.0, np.inf), (1, 0.0, 30.0)])
    recs, _ = replay(clu, Scripted(copy_at(10.0, 1), [10.0]))
    r = recs[0]
    assert r["end"] == 100.0 and r["evictions"] == 0
    assert r["spec"]["copies"] == 1 and r["spec"]["wasted_s"] == 20.0


def test_a_killed_original_takes_its_copy_with_it() -> None:
    def script(view: SchedView) -> Decisions | None:
        if view.now == 10.0:
            return Decisions(spec_run=np.array([0]), spec_node=np.array([1]))
        if view.now == 30.0:
            return Decisions(kill=np.array([0]))
        return None

    clu = nodes([1.0, 1.0])
    recs, _ = replay(clu, Scripted(script, [10.0, 30.0]))
    assert recs[0]["outcome"] == "killed" and recs[0]["end"] == 30.0
    assert recs[0]["spec"]["wasted_s"] == 20.0 and not clu.nodes.ncont.any()


def test_both_attempts_running_at_the_horizon_leave_the_task_unfinished() -> None:
    recs, _ = replay(nodes([0.25, 0.25]), Scripted(copy_at(10.0, 1), [10.0]), horizon_s=50.0)
    r = recs[0]
    assert r["outcome"] == "unfinished" and r["spec"]["run_s"] == 40.0
    assert r["remaining"] == pytest.approx(100.0 - 50 * 0.25)


def test_children_wait_for_the_winning_attempt() -> None:
    b = batch([0, 0], [100, 5], task_id={0: "p"}, deps={1: ["p"]})
    chunks: list[RecordChunk] = []
    sim = Simulation(nodes([0.25, 1.0]), Scripted(copy_at(10.0, 1), [10.0]), [b],
                     chunks.append, options=SimOptions(), dep_refs={"p": 1})
    sim.run()
    ends = {int(r): float(e) for c in chunks for r, e in zip(c.row, c.end, strict=True)}
    assert ends[0] == 110.0 and ends[1] == 110.0 + 5 * 4  # the child on slow node 0


def test_job_statistics_count_finished_tasks_by_kind() -> None:
    b = batch([0, 0, 0], [10, 20, 30], kind=np.array([1, 1, 2], np.int8))
    seen: list[tuple[list[int], list[int], float]] = []

    def script(view: SchedView) -> None:
        if view.now == 15.0:
            j = view.jobs
            seen.append((j.arrived[0].tolist(), j.finished[0].tolist(), j.run_s_sum[0, 1]))

    replay(nodes([1.0]), Scripted(script, [15.0]), b)
    assert seen == [([0, 2, 1], [0, 1, 0], 10.0)]


@pytest.mark.parametrize(("script", "message"), [
    (lambda v: Decisions(spec_run=np.array([0]), spec_node=np.array([0])), "original's node"),
    (lambda v: Decisions(spec_run=np.array([0, 0]), spec_node=np.array([1, 1])), "two copies"),
    (lambda v: Decisions(spec_run=np.array([5]), spec_node=np.array([1])), "outside"),
    (lambda v: Decisions(spec_run=np.array([0]), spec_node=np.array([9])), "out of range"),
    (lambda v: Decisions(kill=np.array([0]), spec_run=np.array([0]), spec_node=np.array([1])),
     "stopped in the same call"),
])
def test_bad_copies_are_refused(script: Script, message: str) -> None:
    def at10(view: SchedView) -> Decisions | None:
        return script(view) if view.now == 10.0 else None

    with pytest.raises(PolicyError, match=message):
        replay(nodes([1.0, 1.0]), Scripted(at10, [10.0]))


def test_a_second_copy_or_a_copy_of_a_copy_is_refused() -> None:
    def second(view: SchedView) -> Decisions | None:
        if view.now in (10.0, 20.0):
            return Decisions(spec_run=np.array([0]), spec_node=np.array([1 + (view.now > 10)]))
        return None

    with pytest.raises(PolicyError, match="already has a running copy"):
        replay(nodes([1.0, 1.0, 1.0]), Scripted(second, [10.0, 20.0]))

    def of_copy(view: SchedView) -> Decisions | None:
        if view.now == 10.0:
            return Decisions(spec_run=np.array([0]), spec_node=np.array([1]))
        if view.now == 20.0:
            return Decisions(spec_run=np.array([1]), spec_node=np.array([2]))
        return None

    with pytest.raises(PolicyError, match="is itself a copy"):
        replay(nodes([1.0, 1.0, 1.0]), Scripted(of_copy, [10.0, 20.0]))


def test_a_copy_that_does_not_fit_is_refused() -> None:
    b = batch([0], [100], cpu=[3.0])

    def script(view: SchedView) -> Decisions | None:
        if view.now == 10.0:
            return Decisions(spec_run=np.array([0]), spec_node=np.array([1]))
        return None

    clu = FixedCluster(ClusterSpec(), ["m0", "m1"], np.array([[4.0, 4.0, 0.0], [2.0, 4.0, 0.0]]),
                       np.ones(2), np.zeros(2, np.int32), [(0, 0.0, np.inf), (1, 0.0, np.inf)])
    with pytest.raises(PolicyError, match="does not fit"):
        replay(clu, Scripted(script, [10.0]), b)


def test_progress_is_the_share_of_the_run_gone_reading_included() -> None:
    """A map that reads 128 MiB rack-local runs 9 s + 128/96 s (pipeline.sim.core.READ_MB_S):
    its progress is the share of that run gone (of its input read), not work at its speed."""
    from tests.sim.test_core import _inputs

    b = batch([0], [10], inputs=_inputs([[1]]), has_inputs=np.array([True]),
              input_mb=np.array([128.0]))
    seen: list[float] = []

    def script(view: SchedView) -> None:
        if view.now == 5.5:
            seen.append(float(view.running.progress[0]))

    recs, _ = replay(nodes([1.0, 1.0]), Scripted(script, [5.5]), b, sched_interval_s=0.0)
    end = 9.0 + 128.0 / 96.0
    assert recs[0]["end"] == pytest.approx(end) and seen == [pytest.approx(5.5 / end)]


def test_a_machine_slowed_for_a_while_stretches_what_is_left_of_its_runs() -> None:
    """100 s of work; the machine runs at half speed from 20 s to 60 s: 20 s of work done by
    20 s, 20 more by 60 s, the last 60 at full speed: it ends at 120 s; at 40 s it has done
    30 % of its work."""
    from pipeline.sim.contention import SpeedChanges

    seen: list[float] = []

    def script(view: SchedView) -> None:
        if view.now == 40.0:
            seen.append(float(view.running.progress[0]))

    chunks: list[RecordChunk] = []
    changes = SpeedChanges(np.array([20.0, 60.0]), np.array([0, 0]), np.array([0.5, 1.0]))
    sim = Simulation(nodes([1.0]), Scripted(script, [40.0]), [batch([0], [100])],
                     chunks.append, options=SimOptions(horizon_s=None), speed_changes=changes)
    sim.run()
    assert chunks[0].end[0] == pytest.approx(120.0) and seen == [pytest.approx(0.3)]


def test_a_run_still_going_at_the_horizon_reports_the_work_left_after_slowdowns() -> None:
    from pipeline.sim.contention import SpeedChanges

    chunks: list[RecordChunk] = []
    changes = SpeedChanges(np.array([20.0]), np.array([0]), np.array([0.5]))
    sim = Simulation(nodes([1.0]), Scripted(lambda v: None, []), [batch([0], [100])],
                     chunks.append, options=SimOptions(horizon_s=60.0), speed_changes=changes)
    sim.run()
    assert chunks[0].remaining[0] == pytest.approx(100 - 20 - 20)
