"""The replay core on hand-made streams: timing, dependencies, unschedulable tasks, horizon,
node failures, elastic scaling, bounded memory, and what it refuses from a policy."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.policies import make_policy
from pipeline.sim import (
    ClusterSpec,
    Decisions,
    ElasticCluster,
    FixedCluster,
    PolicyError,
    SimOptions,
    Simulation,
    TaskBatch,
)
from pipeline.sim.interface import SchedView
from pipeline.sim.needs import Needs
from pipeline.sim.tasks import INPUT_WIDTH, LOCALITIES, OUTCOMES, RecordChunk

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)


def cluster(n: int = 2, cpu: float = 4.0, mem: float = 4.0,
            periods: list[tuple[int, float, float]] | None = None) -> FixedCluster:
    periods = periods if periods is not None else [(i, 0.0, np.inf) for i in range(n)]
    return FixedCluster(ClusterSpec(), [f"m{i}" for i in range(n)], np.tile([cpu, mem, 0.0],
                        (n, 1)), np.ones(n), np.zeros(n, np.int32), periods)


def batch(submit: list[float], duration: list[float], cpu: list[float] | None = None,
          **sparse: dict) -> TaskBatch:
    n = len(submit)
    cpu = cpu or [1.0] * n
    return TaskBatch(
        row=np.arange(n), submit=np.array(submit, float), duration=np.array(duration, float),
        req=np.column_stack([cpu, cpu, np.zeros(n)]), used=np.full((n, 2), np.nan),
        user=np.zeros(n, np.int32), queue=np.zeros(n, np.int32), job=np.zeros(n, np.int32),
        priority=np.zeros(n, np.int32), **sparse)


def run(clu, batches, policy="yarn-uniform", **options) -> tuple[dict[int, dict], Simulation]:
    chunks: list[RecordChunk] = []
    pol = make_policy(policy) if isinstance(policy, str) else policy
    sim = Simulation(clu, pol, batches, chunks.append, options=SimOptions(**options),
                     dep_refs=_refs(batches))
    sim.run()
    out = {}
    for c in chunks:
        for i in range(len(c.row)):
            rec = {k: getattr(c, k)[i] for k in c.__dataclass_fields__}
            rec["outcome"] = OUTCOMES[rec["outcome"]]
            rec["locality"] = LOCALITIES[rec["locality"]] if rec["locality"] >= 0 else None
            assert int(rec["row"]) not in out
            out[int(rec["row"])] = rec
    return out, sim


def _refs(batches) -> dict[str, int]:
    refs: dict[str, int] = {}
    for b in batches:
        for parents in b.deps.values():
            for p in parents:
                refs[p] = refs.get(p, 0) + 1
    return refs


def test_tasks_start_at_scheduling_points_and_end_exactly() -> None:
    recs, _ = run(cluster(), [batch([0.3, 1.2], [10.0, 5.5])], sched_interval_s=1.0)
    assert recs[0]["start"] == 1.0 and recs[0]["end"] == 11.0
    assert recs[1]["start"] == 2.0 and recs[1]["end"] == 7.5
    recs, _ = run(cluster(), [batch([0.3, 1.2], [10.0, 5.5])], sched_interval_s=0.0)
    assert recs[0]["start"] == 0.3 and recs[1]["start"] == 1.2


def test_queueing_when_full_and_wait() -> None:
    recs, sim = run(cluster(n=1, cpu=2.0, mem=2.0), [batch([0, 0, 0], [10, 10, 10])])
    starts = sorted(r["start"] for r in recs.values())
    assert starts == [0.0, 0.0, 10.0] and sim.last_s == 20.0


def test_unschedulable_is_reported_and_does_not_block() -> None:
    recs, _ = run(cluster(), [batch([0, 0, 1], [5, 5, 5], cpu=[9.0, 1.0, 1.0])])
    assert recs[0]["outcome"] == "unschedulable" and np.isnan(recs[0]["start"])
    assert recs[1]["start"] == 0.0 and recs[2]["start"] == 1.0


def test_dependencies_wait_for_parents_and_blocked_children_are_unfinished() -> None:
    b = batch([0, 0, 0, 0, 1], [10, 5, 5, 5, 5], cpu=[1, 1, 9, 1, 1],
              task_id={0: "a", 2: "big"},
              deps={1: ["a"], 3: ["big"], 4: ["never-seen"]})
    recs, _ = run(cluster(), [b])
    assert recs[1]["ready"] == 10.0 and recs[1]["start"] == 10.0
    assert recs[2]["outcome"] == "unschedulable"
    for row in (3, 4):
        assert recs[row]["outcome"] == "unfinished" and np.isnan(recs[row]["ready"])


def test_parent_submitted_after_child() -> None:
    b = batch([0, 5], [3, 4], task_id={1: "late-parent"}, deps={0: ["late-parent"]})
    recs, _ = run(cluster(), [b])
    assert recs[1]["end"] == 9.0 and recs[0]["start"] == 9.0


def test_horizon_leaves_unfinished_tasks() -> None:
    recs, sim = run(cluster(n=1, cpu=1.0, mem=1.0), [batch([0, 0, 50], [30, 30, 1])],
                    horizon_s=40.0)
    assert recs[0]["outcome"] == "finished"
    assert recs[1]["outcome"] == "unfinished" and recs[1]["start"] == 30.0
    assert np.isnan(recs[1]["end"])
    assert recs[2]["outcome"] == "unfinished" and np.isnan(recs[2]["ready"])
    assert sim.cluster.intervals.rows[0][3] == 40.0


def test_horizon_bills_the_fixed_cluster_for_exactly_the_window() -> None:
    """Machines are billed to the window's end, minus their downtime, however early the
    tasks finish: the same node-hours for every policy."""
    clu = cluster(n=2, periods=[(0, 0.0, np.inf), (1, 0.0, 40.0), (1, 60.0, np.inf)])
    recs, _ = run(clu, [batch([0, 0], [10, 10])], horizon_s=100.0)
    assert all(r["outcome"] == "finished" for r in recs.values())
    spans = sorted((row[1], row[3]) for row in clu.intervals.rows)
    assert spans == [(0.0, 40.0), (0.0, 100.0), (60.0, 100.0)]


def test_running_tasks_report_the_work_left_at_the_horizon() -> None:
    recs, _ = run(cluster(n=1, cpu=1.0, mem=1.0), [batch([0, 0], [150, 30])], horizon_s=100.0)
    running = next(r for r in recs.values() if r["start"] == 0.0)
    waiting = next(r for r in recs.values() if np.isnan(r["start"]))
    assert running["outcome"] == "unfinished" and running["remaining"] == 50.0
    assert waiting["outcome"] == "unfinished" and waiting["remaining"] in (150.0, 30.0)


def test_censored_tasks_run_until_the_window_end() -> None:
    """A task the trace saw running at its window's end runs to the window's end whatever
    its recorded duration, even when it started late or was evicted and restarted."""
    clu = cluster(n=2, cpu=1.0, mem=1.0,
                  periods=[(0, 0.0, np.inf), (1, 0.0, 40.0), (1, 50.0, np.inf)])
    b = batch([0, 0, 10], [20, 100, 5], censored=np.array([True, True, False]))
    recs, _ = run(clu, [b], horizon_s=100.0, censor_at_s=100.0)
    assert recs[0]["outcome"] == recs[1]["outcome"] == "unfinished"
    evicted = next(r for r in recs.values() if r["evictions"])
    # m1 is back at 50: the short task waiting since 10 runs first, then the restart
    assert recs[2]["outcome"] == "finished" and recs[2]["end"] == 55.0
    assert evicted["wasted"] == 40.0 and evicted["start"] == 55.0


def test_drain_stops_censored_tasks_at_the_window_end() -> None:
    """Draining, other tasks run on, censored ones stop at the window's end (``end`` set,
    unfinished) and those still waiting then never start."""
    clu = cluster(n=1, cpu=1.0, mem=1.0)
    b = batch([0, 5, 95], [30, 40, 50], censored=np.array([True, True, False]))
    recs, sim = run(clu, [b], censor_at_s=100.0)
    assert recs[0]["outcome"] == "unfinished" and recs[0]["end"] == 100.0
    assert recs[0]["remaining"] == 0.0  # it ran its whole recorded 30 s and more
    assert recs[1]["outcome"] == "unfinished" and np.isnan(recs[1]["start"])
    assert recs[1]["remaining"] == 40.0
    assert recs[2]["outcome"] == "finished" and recs[2]["start"] == 100.0
    assert recs[2]["end"] == 150.0 and sim.last_s == 150.0


def test_elastic_nodes_are_released_before_the_horizon() -> None:
    spec = ClusterSpec(kind="elastic", node_cpu=4.0, node_mem=4.0, min_nodes=1, max_nodes=3,
                       initial_nodes=3, idle_s=10.0)
    clu = ElasticCluster(spec)
    run(clu, [batch([0, 0, 0], [10, 10, 10], cpu=[3.0] * 3)], horizon_s=100.0)
    downs = sorted(row[3] for row in clu.intervals.rows)
    assert downs == [20.0, 20.0, 100.0]  # idle ones released, the minimum kept to the end


def test_node_down_evicts_and_requeues() -> None:
    clu = cluster(n=1, periods=[(0, 0.0, 10.0), (0, 20.0, np.inf)])
    recs, _ = run(clu, [batch([0], [15])])
    r = recs[0]
    assert r["outcome"] == "finished" and r["evictions"] == 1 and r["attempts"] == 2
    assert r["wasted"] == 10.0 and r["first_start"] == 0.0 and r["start"] == 20.0
    assert [row[1:] for row in clu.intervals.rows] == [[0.0, 0.0, 10.0], [20.0, 20.0, 35.0]]


def test_speed_scales_duration_and_inputs_give_locality() -> None:
    clu = cluster(n=2)
    clu.nodes.speed[:] = [2.0, 2.0]
    clu.nodes.rack[:] = [0, 0]
    b = batch([0, 0], [10, 10], inputs=_inputs([[0], [1]]), has_inputs=np.ones(2, bool))
    recs, _ = run(clu, [b])
    assert recs[0]["end"] == 5.0
    assert {recs[0]["locality"], recs[1]["locality"]} <= {"node", "rack"}


def _inputs(rows: list[list[int]]) -> np.ndarray:
    out = np.full((len(rows), INPUT_WIDTH), -1, np.int32)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def test_reading_input_takes_longer_the_farther_the_data() -> None:
    """duration_s holds a node-local read; a rack-local or off-rack read adds the difference
    at the rates given (compute scales with speed, reading does not), and the MiB read
    through the rack switch or the core are counted."""
    clu = cluster(n=3)
    clu.nodes.rack[:] = [0, 0, 1]
    clu.nodes.speed[:] = [1.0, 1.0, 2.0]
    # one task per node (cpu 4 fills a node): inputs on node 0 only, 128 MiB each
    b = batch([0, 0, 0], [10, 10, 10], cpu=[4.0] * 3, inputs=_inputs([[0], [0], [0]]),
              has_inputs=np.ones(3, bool), input_mb=np.full(3, 128.0))
    recs, _ = run(clu, [b], read_mb_s=(128.0, 64.0, 32.0))
    by_loc = {r["locality"]: r for r in recs.values()}
    assert by_loc["node"]["end"] == 10.0
    assert by_loc["rack"]["end"] == 9.0 + 2.0  # 9 s compute + 128/64
    assert by_loc["any"]["end"] == 9.0 / 2.0 + 4.0  # compute at speed 2, read 128/32
    assert list(by_loc["node"]["read"]) == [0.0, 0.0]
    assert list(by_loc["rack"]["read"]) == [128.0, 0.0]
    assert list(by_loc["any"]["read"]) == [0.0, 128.0]


def test_input_on_no_node_here_is_read_remotely() -> None:
    """Elastic clusters: the data is on none of the nodes (-1 only), so the read is remote."""
    clu = cluster(n=1)
    b = batch([0], [10], inputs=_inputs([[]]), has_inputs=np.ones(1, bool),
              input_mb=np.array([64.0]))
    recs, _ = run(clu, [b], read_mb_s=(64.0, 32.0, 16.0))
    assert recs[0]["locality"] == "any" and recs[0]["end"] == 9.0 + 4.0


def test_elastic_upscales_after_wait_and_releases_idle_nodes() -> None:
    spec = ClusterSpec(kind="elastic", node_cpu=4.0, node_mem=4.0, min_nodes=0, max_nodes=3,
                       initial_nodes=0, boot_delay_s=120.0, upscale_wait_s=180.0, idle_s=60.0)
    clu = ElasticCluster(spec)
    recs, sim = run(clu, [batch([0, 0, 0, 0, 0], [100] * 5, cpu=[3.0] * 5)])
    assert sorted(r["start"] for r in recs.values())[:3] == [300.0] * 3
    assert sim.cluster.machine_ids == ["elastic-000000", "elastic-000001", "elastic-000002"]
    up = sorted(row[1] for row in clu.intervals.rows)
    assert up == [180.0] * 3  # billed from the request


def test_elastic_never_below_min_nodes() -> None:
    spec = ClusterSpec(kind="elastic", node_cpu=4.0, node_mem=4.0, min_nodes=2, max_nodes=4,
                       initial_nodes=4, idle_s=0.0)
    clu = ElasticCluster(spec)
    run(clu, [batch([0, 50], [10, 10])])
    downs = sorted(row[3] for row in clu.intervals.rows)
    assert downs[:2] == [0.0, 0.0] and downs[2:] == [60.0, 60.0]


def test_memory_grows_with_tasks_in_flight_not_trace_length() -> None:
    n = 3_000
    b = batch(list(np.arange(n) * 1.0), [1.5] * n)
    _, sim = run(cluster(n=1), [b])
    assert sim.tasks.capacity <= 1024


class Overcommit:
    name = "overcommit"

    def setup(self, cluster, rng) -> Needs:
        return Needs()

    def decide(self, view: SchedView) -> Decisions:
        m = len(view.pending)
        return Decisions(place_req=np.arange(m), place_node=np.zeros(m, np.int64))


class PreemptThenKill:
    """Places everything, preempts at t=5, kills at t=12 (whatever then runs)."""

    name = "preempt-kill"

    def setup(self, cluster, rng) -> Needs:
        return Needs(running=True)

    def decide(self, view: SchedView) -> Decisions:
        m = len(view.pending)
        place = Decisions(place_req=np.arange(m), place_node=np.zeros(m, np.int64))
        running = np.arange(len(view.running.node))
        if view.now == 5.0:
            return Decisions(preempt=running, wake_at_s=6.0)
        if view.now == 12.0:
            return Decisions(kill=running)
        if view.now == 6.0:
            return Decisions(place_req=place.place_req, place_node=place.place_node,
                             wake_at_s=12.0)
        return Decisions(place_req=place.place_req, place_node=place.place_node, wake_at_s=5.0)


def test_overcommit_is_rejected_naming_the_policy() -> None:
    with pytest.raises(PolicyError, match=r"policy 'overcommit'.*does not fit"):
        run(cluster(n=1, cpu=2.0, mem=2.0), [batch([0, 0, 0], [5, 5, 5])], policy=Overcommit())


def test_preemption_requeues_and_kill_ends_a_task() -> None:
    b = batch([0], [100], task_id={0: "p"})
    b2 = batch([1], [1])
    b2.row = np.array([1])
    b2.deps = {0: ["p"]}
    recs, _ = run(cluster(n=1), [b, b2], policy=PreemptThenKill())
    r = recs[0]
    assert r["outcome"] == "killed" and r["preemptions"] == 1 and r["attempts"] == 2
    assert r["wasted"] == 5.0 and r["start"] == 6.0 and r["end"] == 12.0
    assert recs[1]["outcome"] == "unfinished"  # its parent was killed


def test_unsupported_decisions_are_refused() -> None:
    class Opportunistic(Overcommit):
        name = "opp"

        def decide(self, view: SchedView) -> Decisions:
            return Decisions(opp_req=np.array([0]), opp_node=np.array([0]))

    with pytest.raises(PolicyError, match=r"policy 'opp'.*opportunistic"):
        run(cluster(), [batch([0], [5])], policy=Opportunistic())


def test_idle_nodes_are_released_on_time_while_others_work() -> None:
    spec = ClusterSpec(kind="elastic", node_cpu=1.0, node_mem=1.0, min_nodes=0, max_nodes=2,
                       initial_nodes=2, idle_s=30.0)
    clu = ElasticCluster(spec)
    run(clu, [batch([0, 0], [10, 500])])
    assert sorted(row[3] for row in clu.intervals.rows) == [40.0, 500.0]


def test_elastic_without_boot_delay_schedules_on_the_new_node() -> None:
    spec = ClusterSpec(kind="elastic", node_cpu=4.0, node_mem=4.0, min_nodes=0, max_nodes=1,
                       initial_nodes=0, boot_delay_s=0.0, upscale_wait_s=0.0, idle_s=0.0)
    recs, _ = run(ElasticCluster(spec), [batch([0.5], [10])], sched_interval_s=0.0)
    assert recs[0]["outcome"] == "finished" and recs[0]["start"] == 0.5


class Heartbeating(Overcommit):
    """Places nothing; reads the node heartbeats at every other call only, and asks to be
    woken every 0.5 s."""

    name = "heartbeating"

    def setup(self, cluster, rng) -> Needs:
        return Needs(heartbeat_s=1.0)

    def __init__(self) -> None:
        self.seen: list[tuple[float, np.ndarray]] = []
        self.calls = 0

    def decide(self, view: SchedView) -> Decisions:
        self.calls += 1
        if self.calls % 2 == 0:
            nodes, times = view.offers
            assert view.offers is view.offers and len(nodes) == len(times)  # computed once
            self.seen.append((view.now, times))
        return Decisions(wake_at_s=view.now + 0.5 if view.now < 4 else None)


def test_heartbeats_are_computed_when_read_and_their_window_moves_at_every_call() -> None:
    """Offers are computed only when a policy reads them, yet a call that does not read
    them still consumes its window: the reports a policy sees are those since its previous
    call, whether or not it looked at that call's."""
    pol = Heartbeating()
    run(cluster(n=4), [batch([0], [100])], policy=pol, sched_interval_s=0.0)
    assert len(pol.seen) >= 3
    for now, times in pol.seen:
        assert len(times) and (times > now - 0.5).all() and (times <= now).all()
        assert len(times) == 2  # 4 nodes a second, half a second since the previous call
