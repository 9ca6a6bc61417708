"""Delay scheduling in the queue schedulers, through replay: the CapacityScheduler's missed
opportunities (node-locality-delay, rack-locality-additional-delay, the L*C/N rule) and the
FairScheduler's thresholds (fractions of the cluster) and time delays.

The cases make every heartbeat countable: a job of ten one-slot tasks whose data is on
small hosts that cannot run them (no node-local launch is possible), every other node with
room for one task, and a heartbeat interval of N seconds on N nodes, so one node reports
per second (report ``i`` of a period at ``i + 0.5`` s).  The k-th report from a node with
room therefore comes between ``k - 0.5`` s and ``k - 0.5 + (hosts)`` s, and a launch lands
at the next policy call (within 1 s).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.bench.workload import write_trace
from pipeline.policies.locality.candidates import ANY, NODE, RACK
from pipeline.policies.locality.gate import (
    CS,
    FS_COUNT,
    OFF_ONLY,
    allowed,
    assigned,
    no_offer,
)
from pipeline.replay import replay
from pipeline.sim.interface import ClusterInfo

TASKS = 10


def _replay(tmp: Path, policy: str, params: dict, n: int, hosts: tuple[str, ...],
            rack_of: Callable[[int], str]) -> pl.DataFrame:
    machines = [{"machine_id": f"n{i:03d}", "cpu": 1.0,
                 "mem": 0.5 if f"n{i:03d}" in hosts else 1.0, "rack": rack_of(i)}
                for i in range(n)]
    tasks = [{"task_id": f"t{k}", "job_id": "j", "submit_s": 0.0, "duration_s": 5000.0,
              "cpu": 1.0, "mem": 1.0, "inputs": list(hosts)} for k in range(TASKS)]
    trace = write_trace(tmp / "trace", machines, tasks,
                        [{"job_id": "j", "user": "u", "submit_s": 0.0}], window_end_s=6000.0)
    replay(trace, policy, {"heartbeat_s": float(n), **params}, 0, tmp / "run")
    tr = pl.read_parquet(tmp / "run" / "task_runs.parquet").sort("start_s")
    assert tr["start_s"].null_count() == 0 and tr.height == TASKS
    return tr


# CapacityScheduler.md's case: 100 nodes, a request for 10 containers naming 3 hosts in 2
# racks; L = 3 hosts + 2 racks = 5, C = 10, so L*C/N = 0.5
CS_HOSTS = ("n000", "n001", "n025")


def _cs(tmp: Path, params: dict, rack_of: Callable[[int], str]) -> pl.DataFrame:
    return _replay(tmp, "capacity-scheduler", params, 100, CS_HOSTS, rack_of)


def test_cs_default_goes_off_switch_at_the_first_missed_opportunity(tmp_path: Path) -> None:
    """node-locality-delay 40, additional delay -1: off-switch is allowed once
    min(N, C*L/N) = 0.5 < missed, i.e. at the first offer, and an off-switch assignment
    does not reset the count: the ten tasks launch at the first ten offers."""
    tr = _cs(tmp_path, {}, lambda i: f"r{i // 25}")
    assert tr["start_s"].max() <= TASKS - 0.5 + len(CS_HOSTS) + 1.0
    assert (tr["locality"] != "node").all()


def test_cs_rack_local_from_the_41st_missed_opportunity(tmp_path: Path) -> None:
    """Every node with room is in the data's racks: the first launch is rack-local at the
    41st offer (missed > node-locality-delay = 40); rack-locality-full-reset (default)
    restarts the count, so the next one waits 41 offers again.  With the additional
    delay at 20 the L*C/N rule is off, so nothing launches earlier."""
    tr = _cs(tmp_path, {"rack_locality_additional_delay": 20},
             lambda i: "r0" if i < 50 else "r1")
    first, second = tr["start_s"][0], tr["start_s"][1]
    assert 40.5 <= first <= 40.5 + len(CS_HOSTS) + 1.0
    assert tr["locality"][0] == "rack"
    assert second - first >= 40.0 - 1.0


def test_cs_off_switch_from_the_61st_with_additional_delay_20(tmp_path: Path) -> None:
    """The data's racks hold only the small hosts: no rack-local launch is possible, and
    off-switch comes once missed > 40 + 20; it does not reset the count, so the other
    nine follow at the next offers."""
    tr = _cs(tmp_path, {"rack_locality_additional_delay": 20},
             lambda i: "r0" if i in (0, 1) else ("r1" if i == 25 else "r2"))
    first = tr["start_s"][0]
    assert 60.5 <= first <= 60.5 + len(CS_HOSTS) + 1.0
    assert (tr["locality"] == "any").all()
    assert tr["start_s"].max() <= first + TASKS + len(CS_HOSTS)


def test_cs_delay_from_capacity_scheduler_xml(tmp_path: Path) -> None:
    """The same thresholds read from the user's capacity-scheduler.xml."""
    conf = tmp_path / "capacity-scheduler.xml"
    conf.write_text(
        "<configuration>"
        "<property><name>yarn.scheduler.capacity.root.queues</name><value>default</value>"
        "</property><property><name>yarn.scheduler.capacity.root.default.capacity</name>"
        "<value>100</value></property>"
        "<property><name>yarn.scheduler.capacity.node-locality-delay</name><value>40</value>"
        "</property><property><name>yarn.scheduler.capacity.rack-locality-additional-delay"
        "</name><value>20</value></property></configuration>")
    tr = _cs(tmp_path, {"config": str(conf)},
             lambda i: "r0" if i in (0, 1) else ("r1" if i == 25 else "r2"))
    assert 60.5 <= tr["start_s"][0] <= 60.5 + len(CS_HOSTS) + 1.0


def test_cs_delay_refused_alike_inline_and_in_the_xml(tmp_path: Path) -> None:
    """A node-locality-delay of 40.5 is no whole number of heartbeats: refused, naming the
    setting, from --set and from capacity-scheduler.xml alike (the file's was cut to 40)."""
    from pipeline.errors import UsageError
    from pipeline.policies import make_policy

    conf = tmp_path / "capacity-scheduler.xml"
    conf.write_text(
        "<configuration><property><name>yarn.scheduler.capacity.root.queues</name>"
        "<value>default</value></property><property><name>yarn.scheduler.capacity.root."
        "default.capacity</name><value>100</value></property><property><name>yarn."
        "scheduler.capacity.node-locality-delay</name><value>40.5</value></property>"
        "</configuration>")
    with pytest.raises(UsageError, match="node_locality_delay"):
        make_policy("capacity-scheduler", {"node_locality_delay": 40.5})
    cluster = ClusterInfo("fixed", 1, None, None, 1, ("u",), ("default",))
    with pytest.raises(UsageError, match=r"node-locality-delay.*whole number"):
        make_policy("capacity-scheduler", {"config": str(conf)}).setup(
            cluster, np.random.default_rng(0))


def test_cs_node_locality_delay_off_ignores_locality(tmp_path: Path) -> None:
    """node-locality-delay -1: containers are placed at once, as without data."""
    tr = _cs(tmp_path, {"node_locality_delay": -1, "rack_locality_additional_delay": 20},
             lambda i: "r0" if i in (0, 1) else ("r1" if i == 25 else "r2"))
    assert tr["start_s"].max() <= 1.0


# FairScheduler.md: 50 nodes, locality.threshold.node 0.1 (5 opportunities), .rack 0.2 (10)
FS_HOSTS = ("n000", "n001")
FS_COUNTS = {"locality_threshold_node": 0.1, "locality_threshold_rack": 0.2}


def _fs(tmp: Path, params: dict, rack_of: Callable[[int], str]) -> pl.DataFrame:
    return _replay(tmp, "fair-scheduler", params, 50, FS_HOSTS, rack_of)


def test_fs_thresholds_rack_at_the_6th_offer(tmp_path: Path) -> None:
    """Offers 1-5 after the last assignment allow node-local only; the 6th (6 > 50*0.1)
    relaxes to rack-local and resets the count; after a rack-local assignment the level
    stays rack, so the others follow at the next offers."""
    tr = _fs(tmp_path, FS_COUNTS, lambda i: "r0")
    first = tr["start_s"][0]
    assert 5.5 <= first <= 5.5 + len(FS_HOSTS) + 1.0
    assert (tr["locality"] == "rack").all()
    assert tr["start_s"].max() <= first + TASKS + len(FS_HOSTS)


def test_fs_thresholds_off_switch_after_11_more(tmp_path: Path) -> None:
    """No node shares a rack with the data: after the relaxation at the 6th offer, 11 more
    offers (11 > 50*0.2) allow off-switch: the 17th."""
    tr = _fs(tmp_path, FS_COUNTS, lambda i: "r0" if i < 2 else "r1")
    assert 16.5 <= tr["start_s"][0] <= 16.5 + len(FS_HOSTS) + 1.0
    assert (tr["locality"] == "any").all()


def test_fs_thresholds_from_yarn_site(tmp_path: Path) -> None:
    site = tmp_path / "yarn-site.xml"
    site.write_text(
        "<configuration><property><name>yarn.scheduler.fair.locality.threshold.node</name>"
        "<value>0.1</value></property><property><name>yarn.scheduler.fair.locality."
        "threshold.rack</name><value>0.2</value></property></configuration>")
    tr = _fs(tmp_path, {"site_file": str(site)}, lambda i: "r0" if i < 2 else "r1")
    assert 16.5 <= tr["start_s"][0] <= 16.5 + len(FS_HOSTS) + 1.0


@pytest.mark.parametrize(("value", "used"), [(2.0, 1.0), (-5.0, -1.0), (0.3, 0.3)])
def test_fs_thresholds_read_alike_inline_and_from_yarn_site(tmp_path: Path, value: float,
                                                            used: float) -> None:
    """FSAppAttempt caps a threshold above 1 at 1 and reads one below 0 as no delay: the
    same whether it comes from --set or from yarn-site.xml (before, --set refused 2.0 and
    -5 while the file capped 2.0 and passed -5 through)."""
    from pipeline.policies import make_policy

    site = tmp_path / "yarn-site.xml"
    site.write_text(
        "<configuration><property><name>yarn.scheduler.fair.locality.threshold.node</name>"
        f"<value>{value}</value></property><property><name>yarn.scheduler.fair.locality."
        f"threshold.rack</name><value>{value}</value></property></configuration>")
    inline = make_policy("fair-scheduler", {"locality_threshold_node": value,
                                            "locality_threshold_rack": value})
    from_file = make_policy("fair-scheduler", {"site_file": str(site)})
    for policy in (inline, from_file):
        settings = policy.locality_settings()
        assert settings["locality_threshold_node"] == settings["locality_threshold_rack"] == used
    noted = inline.effective_settings({"locality_threshold_node"})["locality_threshold_node"]
    assert noted["value"] == used and ("capped" in noted["source"]) == (value != used)


def test_fs_time_based_delays(tmp_path: Path) -> None:
    """Continuous scheduling: rack-local once the application waited more than
    locality-delay-node-ms since its first offer, off-switch after locality-delay-rack-ms
    more (both 8 s here)."""
    params = {"continuous_scheduling": True, "locality_delay_node_ms": 8000.0,
              "locality_delay_rack_ms": 8000.0}
    rack = _fs(tmp_path / "rack", params, lambda i: "r0")
    assert 8.5 < rack["start_s"][0] <= 8.5 + len(FS_HOSTS) + 2.0
    assert rack["locality"][0] == "rack"
    off = _fs(tmp_path / "off", params, lambda i: "r0" if i < 2 else "r1")
    assert 16.5 < off["start_s"][0] <= 16.5 + len(FS_HOSTS) + 3.0
    assert off["locality"][0] == "any"


def test_fs_defaults_do_not_delay(tmp_path: Path) -> None:
    """Hadoop's default thresholds (-1) pass up no opportunity."""
    tr = _fs(tmp_path, {}, lambda i: "r0" if i < 2 else "r1")
    assert tr["start_s"].max() <= 1.0


def test_fs_first_call_is_node_local_before_any_threshold(tmp_path: Path) -> None:
    """``FSAppAttempt.getAllowedLocalityLevel`` (Hadoop 3.3): the first call for a priority
    returns NODE_LOCAL before any threshold is checked.  Four nodes, thresholds 0.2 (4 x 0.2
    = 0.8 opportunities); only n1 (in the data's rack) can run the task, and it reports once
    per 4-s heartbeat.  Its first offer counts but allows node-local only; the second
    (2 > 0.8) relaxes to rack-local, so the task starts in the second heartbeat period
    (4.5 s at the earliest), not at the first offer (by 3.5 s).  (The other three nodes are
    too small for it; they give the queue room enough for its AM under maxAMShare.)"""
    machines = [{"machine_id": f"n{i}", "cpu": 1.0, "mem": 1.0 if i == 1 else 0.5,
                 "rack": "r0" if i < 2 else "r1"} for i in range(4)]
    tasks = [{"task_id": "t", "job_id": "j", "submit_s": 0.0, "duration_s": 10.0,
              "cpu": 1.0, "mem": 1.0, "inputs": ["n0"]}]
    trace = write_trace(tmp_path / "trace", machines, tasks, window_end_s=100.0)
    replay(trace, "fair-scheduler", {"heartbeat_s": 4.0, "locality_threshold_node": 0.2,
                                     "locality_threshold_rack": 0.2}, 0, tmp_path / "run")
    t = pl.read_parquet(tmp_path / "run" / "task_runs.parquet").row(0, named=True)
    assert t["machine_id"] == "n1" and t["locality"] == "rack"
    assert 4.5 <= t["start_s"] <= 8.5


# The rules themselves, counted offer by offer
def _levels(kind: int, p0: float, p1: float, n: int, c: int, n_loc: int,
            offers: int) -> list[int]:
    gate = no_offer()._replace(
        kind=kind, p0=float(p0), p1=float(p1), n_nodes=n, c_out=np.array([c]),
        n_loc=np.array([n_loc]), miss=np.zeros(1, np.int64), level=np.zeros(1, np.int8),
        since=np.full(1, np.nan))
    return [int(allowed(gate, 0, 0)) for _ in range(offers)]


def test_cs_rule_counts() -> None:
    default = _levels(CS, 40, -1, 100, 10, 5, 41)
    assert default[:40] == [OFF_ONLY] * 40 and default[40] == ANY
    extra = _levels(CS, 40, 20, 100, 10, 5, 61)
    assert extra[:40] == [NODE] * 40 and extra[40:60] == [RACK] * 20 and extra[60] == ANY
    # N caps both thresholds: on 30 nodes rack-local comes at the 31st offer
    small = _levels(CS, 40, 20, 30, 10, 5, 31)
    assert small[29] == NODE and small[30] == ANY


def test_fs_rule_counts() -> None:
    levels = _levels(FS_COUNT, 0.1, 0.2, 50, 10, 5, 17)
    assert levels[:5] == [NODE] * 5 and levels[5:16] == [RACK] * 11 and levels[16] == ANY
    # N x threshold below one: the first call is still node-local (it only counts)
    few = _levels(FS_COUNT, 0.1, 0.1, 5, 10, 5, 3)
    assert few == [NODE, RACK, ANY]


@pytest.mark.parametrize(("typ", "full_reset", "left"), [
    (NODE, True, 0), (RACK, True, 0), (RACK, False, 40), (ANY, True, 55)])
def test_cs_resets(typ: int, full_reset: bool, left: int) -> None:
    """A node-local assignment resets the count, a rack-local one too (or to the node delay
    without rack-locality-full-reset), an off-switch one never."""
    gate = no_offer()._replace(kind=CS, p0=40.0, full_reset=full_reset, miss=np.array([55]),
                               level=np.zeros(1, np.int8), since=np.zeros(1))
    assigned(gate, 0, typ)
    assert gate.miss[0] == left


@pytest.mark.parametrize(("delay_ms", "expected"), [(6.0, "n1"), (-1.0, "n0")])
def test_packing_tries_medium_nodes_holding_the_data_first(tmp_path: Path, delay_ms: float,
                                                           expected: str) -> None:
    """Qubole's locality-delay-node-ms: a request with data on Medium node n1 goes there
    although n0 is the fuller Medium node (which packing alone picks)."""
    machines = [{"machine_id": f"n{i}", "cpu": c, "mem": 10.0, "rack": "r0"}
                for i, c in enumerate((4.0, 2.0, 1.0))]
    tasks = [  # f1 fits only n0 (cpu), f2 then only n1: n0 30% used, n1 10%
        {"task_id": "f1", "job_id": "f", "submit_s": 0.0, "duration_s": 100.0, "cpu": 4.0,
         "mem": 3.0},
        {"task_id": "f2", "job_id": "f", "submit_s": 1.0, "duration_s": 100.0, "cpu": 2.0,
         "mem": 1.0},
        {"task_id": "p", "job_id": "p", "submit_s": 2.0, "duration_s": 10.0, "cpu": 0.0,
         "mem": 1.0, "inputs": ["n1"]}]
    jobs = [{"job_id": j, "user": "u", "submit_s": 0.0} for j in "fp"]
    trace = write_trace(tmp_path / "t", machines, tasks, jobs, window_end_s=200.0)
    replay(trace, "container-packing", {"packing_min_nodes": 0,
                                        "locality_delay_node_ms": delay_ms}, 0, tmp_path / "r")
    tr = {r["task_id"]: r for r in pl.read_parquet(tmp_path / "r" / "task_runs.parquet")
          .iter_rows(named=True)}
    assert (tr["f1"]["machine_id"], tr["f2"]["machine_id"]) == ("n0", "n1")
    assert tr["p"]["machine_id"] == expected


@pytest.mark.parametrize(("policy", "param", "text", "why"), [
    ("capacity-scheduler", "config",
     "<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>"
     "default</value></property><property><name>yarn.scheduler.capacity.root.default."
     "capacity</name><value>100</value></property><property><name>yarn.scheduler.capacity."
     "node-locality-delay</name><value>forty</value></property></configuration>",
     "node-locality-delay'.*not a number"),
    ("fair-scheduler", "site_file",
     "<configuration><property><name>yarn.scheduler.fair.locality-delay-node-ms</name>"
     "<value>-5</value></property></configuration>", "locality-delay-node-ms'.*outside"),
    ("fair-scheduler", "site_file", "<configuration><property>", "cannot read"),
])
def test_bad_delay_settings_name_file_and_property(tmp_path: Path, policy: str, param: str,
                                                   text: str, why: str) -> None:
    from pipeline.errors import UsageError

    conf = tmp_path / "conf.xml"
    conf.write_text(text)
    with pytest.raises(UsageError, match=why):
        _replay(tmp_path, policy, {param: str(conf)}, 4, ("n000",), lambda i: "r0")


def test_locations_count_each_host_and_rack_once_per_application() -> None:
    """L of the CS rule: distinct hosts plus racks an application's requests name, with
    the requests of several applications interleaved."""
    from pipeline.policies.locality.gate import locations

    n_rack = np.array([0, 0, 1, 1])
    inputs = np.array([[0, 2, -1], [1, -1, -1], [0, 1, -1], [0, -1, -1], [3, -1, -1]])
    app_of = np.array([0, 1, 0, 1, -1])
    # app 0: hosts 0, 2, 1 and racks 0, 1 -> 5; app 1: hosts 1, 0 and rack 0 -> 3
    assert locations(inputs, n_rack, app_of, 2).tolist() == [5, 3]
