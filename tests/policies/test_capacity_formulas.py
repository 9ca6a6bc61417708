"""CapacityScheduler formulas: user limit, normalisation, limits, preemption, XML config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import UsageError
from pipeline.policies.capacity import formulas as f
from pipeline.policies.capacity import vectors
from pipeline.policies.capacity.config import from_xml
from pipeline.policies.capacity.ideal import Calculator, ideal_assignment, to_obtain
from pipeline.policies.capacity.preemption import (
    PreemptionSettings,
    PreemptionTimer,
    select,
)
from pipeline.policies.queues import parse_inline

pytestmark = pytest.mark.nojit  # also run with NUMBA_DISABLE_JIT=1 (.ci/run)

GB = np.array([1.0, 1.0, 0.0])  # minimum allocation: 1 vcore, 1 GiB
CLUSTER = np.array([100.0, 100.0, 0.0])
QUEUE = np.array([100.0, 100.0, 0.0])


def _mem(x: float) -> np.ndarray:
    return np.array([0.0, x, 0.0])


@pytest.mark.parametrize(("used", "limit"), [((60, 20), 41.0), ((60, 40), 51.0)])
def test_user_limit_golden(used: tuple[int, int], limit: float) -> None:
    """100 GB queue, MULP 25, ULF 1, two active users (UsersManager.computeUserLimit)."""
    total = _mem(sum(used))
    got = vectors.user_limit(QUEUE, total, total, 2.0, 25.0, 1.0, QUEUE, GB, CLUSTER, 0)
    assert got[1] == limit


def test_user_limit_mulp_floor_factor_cap_and_weight() -> None:
    one = vectors.user_limit(QUEUE, _mem(10), _mem(10), 4.0, 25.0, 1.0, QUEUE, GB, CLUSTER, 0)
    assert one[1] == 25.0  # MULP floor: 25% of the queue's capacity
    capped = vectors.user_limit(_mem(20), _mem(30), _mem(30), 1.0, 100.0, 1.0, QUEUE, GB,
                               CLUSTER, 0)
    assert capped[1] == 20.0  # user-limit-factor 1 caps at the queue's capacity
    off = vectors.user_limit(_mem(20), _mem(30), _mem(30), 1.0, 100.0, -1.0, QUEUE, GB,
                           CLUSTER, 0)
    assert off[1] == 31.0  # ULF -1: capped by the queue's maximum instead
    assert f.user_specific_limit(_mem(41), 1.5, GB)[1] == 61.0  # floor(61.5)


@pytest.mark.parametrize(("mb", "expected_mb"), [(4608, 5120), (1025, 2048), (100, 1024),
                                                 (2048, 2048)])
def test_normalisation_to_minimum_allocation(mb: int, expected_mb: int) -> None:
    req = np.array([[1.0, mb / 1024, 0.0]])
    assert f.normalize(req, GB)[0, 1] * 1024 == pytest.approx(expected_mb)
    assert f.normalize(req[0], GB)[1] * 1024 == pytest.approx(expected_mb)
    drc = f.normalize(np.array([[1.5, mb / 1024, 0.0]]), GB, f.DOMINANT)
    assert drc[0, 0] == 2.0 and drc[0, 1] * 1024 == pytest.approx(expected_mb)


def test_dominant_compare_and_ratio() -> None:
    a, b = np.array([50.0, 10.0, 0.0]), np.array([10.0, 40.0, 0.0])
    assert f.greater(a, b, CLUSTER, f.DOMINANT) and not f.greater(a, b, CLUSTER, f.DEFAULT)
    assert vectors.greater(a, b, CLUSTER, 1) and not vectors.greater(a, b, CLUSTER, 0)
    assert vectors.ratio(a, b, CLUSTER, 1) == pytest.approx(50 / 40)


def test_application_and_am_limits() -> None:
    assert f.max_applications(10000, 0.3, 25, 1) == (3000, 750)
    assert f.am_limit(_mem(100), 0.1, GB)[1] == 10.0
    assert f.am_limit(_mem(15), 0.1, GB)[1] == 2.0  # normalised up


def _mems(*values: float) -> np.ndarray:
    return np.array([_mem(v) for v in values])


MEM_CLUSTER = _mem(100)
ON = PreemptionSettings(enabled=True)


def test_preemption_golden_two_gb() -> None:
    """A 90 / B 10 + 40 pending, both 50% (max 100%), defaults: one round asks 2 GB of A."""
    tree = parse_inline("a:50,b:50")
    amount = to_obtain(tree, MEM_CLUSTER, _mems(100, 90, 10), _mems(40, 0, 40), ON)
    assert amount[:, 1].tolist() == pytest.approx([0.0, 2.0, 0.0])
    ideal = ideal_assignment(MEM_CLUSTER, _mems(50, 50), _mems(100, 100), _mems(90, 10),
                             _mems(0, 40), np.array([True, True]))
    assert ideal[:, 1].tolist() == pytest.approx([50.0, 50.0])  # B gets all that is left


def test_preemption_dead_zone() -> None:
    tree = parse_inline("a:50,b:50")
    amount = to_obtain(tree, MEM_CLUSTER, _mems(100, 54, 46), _mems(10, 0, 10), ON)
    assert amount.sum() == 0.0  # 54 <= 50 * 1.1


def test_dominant_preemption_adds_resources_not_shares() -> None:
    """A full 100-cpu/100-GB cluster: A runs cpu-heavy (1 cpu, 0.25 GB) and memory-heavy
    (0.25 cpu, 1 GB) containers, 40 of each, 50 cpu / 50 GB in all, at its 50% guarantee;
    B runs the same, and only A asks for more.  Nobody is below its guarantee, so nothing
    is preempted.  Adding up per-container dominant shares (1% each) would count 80% for
    each queue and 160% for the cluster, and ask both to give some back."""
    tree = parse_inline("a:50,b:50")
    cluster = np.array([100.0, 100.0, 0.0])
    half = np.array([50.0, 50.0, 0.0])
    used = np.array([cluster, half, half])
    pending = np.array([[10.0, 2.5, 0.0], [10.0, 2.5, 0.0], [0.0, 0.0, 0.0]])
    amount = to_obtain(tree, cluster, used, pending, ON, dominant=True)
    assert not amount.any()


def test_dominant_preemption_golden_in_proportion() -> None:
    """Cpu and memory in proportion: A is 30 over its ideal, the round allows 10 (0.1 of
    the cluster), scaled 10/30, times 0.2: 2 of each resource."""
    tree = parse_inline("a:50,b:50")
    cluster = np.array([100.0, 100.0, 0.0])
    used = np.array([[90.0, 90.0, 0.0], [80.0, 80.0, 0.0], [10.0, 10.0, 0.0]])
    pending = np.array([[40.0, 40.0, 0.0], [0.0, 0.0, 0.0], [40.0, 40.0, 0.0]])
    amount = to_obtain(tree, cluster, used, pending, ON, dominant=True)
    assert amount[1].tolist() == pytest.approx([2.0, 2.0, 0.0])
    assert amount[[0, 2]].tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def _rc(dominant: bool = False) -> Calculator:
    return Calculator(dominant, np.array([100.0, 100.0, 0.0]))


def test_selection_takes_newest_first_until_covered_and_skips_am() -> None:
    order = np.array([3, 2, 1, 0])
    size = np.tile(_mem(1.0), (4, 1))
    is_am = np.array([True, False, False, False])
    budget = _mem(10.0)
    assert select(_mem(2.0), order, size, is_am, budget, _rc()) == [3, 2]
    assert budget[1] == 8.0  # the round's allowance shrinks with what is taken
    assert select(_mem(9.0), order, size, is_am, _mem(10.0), _rc()) == [3, 2, 1]  # no AM
    assert select(_mem(1.5), order, size, is_am, _mem(10.0), _rc()) == [3, 2]  # overshoot


def test_selection_respects_the_round_allowance() -> None:
    order = np.array([0, 1])
    size = np.array([_mem(3.0), _mem(1.0)])
    no_am = np.zeros(2, dtype=bool)
    assert select(_mem(4.0), order, size, no_am, _mem(2.0), _rc()) == [1]  # 3 GB > 2 left


def test_dominant_selection_needs_a_positive_contribution() -> None:
    """Only cpu is to be obtained: a memory-only container lowers no resource still to
    obtain and is skipped (tryPreemptContainerAndDeductResToObtain after YARN-8292 compares
    componentwiseMax(toObtain, 0) before and after)."""
    order = np.array([0, 1])
    size = np.array([_mem(5.0), np.array([2.0, 0.0, 0.0])])
    no_am = np.zeros(2, dtype=bool)
    got = select(np.array([2.0, 0.0, 0.0]), order, size, no_am, np.full(3, 50.0), _rc(True))
    assert got == [1]


def test_containers_larger_than_the_round_allowance_are_never_taken() -> None:
    """Dominant calculator: fitsIn(container, total_preemption_per_round x cluster) must
    hold in every resource (10 cpu = 10% of the cluster; the 12-cpu container is left)."""
    order = np.array([0, 1])
    size = np.array([[12.0, 1.0, 0.0], [4.0, 1.0, 0.0]])
    no_am = np.zeros(2, dtype=bool)
    budget = np.array([10.0, 10.0, 0.0])
    assert select(np.array([3.0, 0.5, 0.0]), order, size, no_am, budget, _rc(True)) == [1]


def test_marks_kill_after_the_wait_and_expire_after_twice_the_wait() -> None:
    """preemptOrkillSelectedContainerAfterWait / cleanupStaledPreemptionCandidates."""
    timer = PreemptionTimer(parse_inline("a:50,b:50"), PreemptionSettings(enabled=True))
    rows, start = np.array([7, 8]), np.array([0.0, 0.0])
    assert timer._mark_or_kill(3.0, rows, start, [0, 1]).tolist() == []
    assert timer._mark_or_kill(15.0, rows, start, [0]).tolist() == []  # 3 + 15 > 15
    assert timer._mark_or_kill(18.0, rows, start, [0]).tolist() == [0]
    assert 8 in timer.marked  # not selected since 3 s, kept until 3 + 2 x 15
    assert timer._mark_or_kill(34.0, rows, start, []).tolist() == [] and not timer.marked
    # a re-placed task is a new container: an old mark of its row does not count
    timer._mark_or_kill(40.0, rows, start, [0])
    assert timer._mark_or_kill(55.0, rows, np.array([50.0, 0.0]), [0]).tolist() == []


def _xml(tmp_path: Path, props: dict[str, str]) -> Path:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>"
                   for k, v in props.items())
    path = tmp_path / "capacity-scheduler.xml"
    path.write_text(f"<configuration>{body}</configuration>")
    return path


P = "yarn.scheduler.capacity."


def test_xml_config_reads_queues_and_settings(tmp_path: Path) -> None:
    conf = from_xml(_xml(tmp_path, {
        P + "root.queues": "a,b", P + "root.a.capacity": "2w", P + "root.b.capacity": "2w",
        P + "root.a.maximum-capacity": "-1", P + "root.a.user-limit-factor": "3",
        P + "root.b.ordering-policy": "fair", P + "root.b.user-settings.alice.weight": "1.5",
        P + "resource-calculator":
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill": "5000",
    }))
    t = conf.tree
    assert t.abs_cap[t.leaves].tolist() == [0.5, 0.5] and conf.calculator == f.DOMINANT
    assert t.leaf_prop("user_limit_factor") == [3.0, 1.0]
    assert t.leaf_prop("ordering") == ["fifo", "fair"]
    assert t.leaf_prop("user_weights")[1] == {"alice": 1.5}
    assert conf.preemption.wait_before_kill_s == 5.0 and not conf.preemption.enabled


@pytest.mark.parametrize(("props", "message"), [
    ({P + "root.queues": "a,b", P + "root.a.capacity": "60", P + "root.b.capacity": "30"},
     "add up to 90"),
    ({P + "root.queues": "a", P + "root.a.capacity": "abc"}, "root.a.capacity"),
    ({P + "root.queues": "a", P + "root.a.capacity": "100",
      P + "root.a.user-limit-factor": "x"}, "user-limit-factor"),
    ({P + "root.queues": "a", P + "root.a.capacity": "100",
      P + "queue-mappings": "u:bob:nope"}, "'nope' is not a leaf"),
    ({P + "root.queues": "a", P + "root.a.capacity": "100",
      P + "root.a.accessible-node-labels.x.capacity": "100"}, "node-label"),
    ({P + "root.queues": "a"}, "root.a.capacity"),
])
def test_xml_config_errors_name_file_and_property(tmp_path: Path, props: dict[str, str],
                                                  message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        from_xml(_xml(tmp_path, props))
    assert "capacity-scheduler.xml" in str(info.value)


def test_shipped_example_configs_parse() -> None:
    root = Path(__file__).parents[2] / "configs"
    assert from_xml(root / "capacity-scheduler.xml").tree.n_leaves == 4
    assert from_xml(root / "capacity-scheduler-weights.xml").tree.n_leaves == 3


def test_minimum_allocation_follows_the_trace_units() -> None:
    from pipeline.policies.capacity.formulas import minimum_allocation

    assert minimum_allocation({"cpu": "cores", "mem": "GiB"}, None, None) == (1.0, 1.0)
    assert minimum_allocation({"cpu": "cores", "mem": "MiB"}, None, None) == (1.0, 1024.0)
    normalized = {"cpu": "normalized: 1.0 = largest", "mem": "normalized: 1.0 = largest"}
    assert minimum_allocation(normalized, None, None) == (0.0, 0.0)
    assert minimum_allocation(normalized, 0.01, 0.02) == (0.01, 0.02)
