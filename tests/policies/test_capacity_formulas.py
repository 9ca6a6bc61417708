"""CapacityScheduler formulas: user limit, normalisation, limits, preemption, XML config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import UsageError
from pipeline.policies.capacity import formulas as f
from pipeline.policies.capacity import kernel
from pipeline.policies.capacity.config import from_xml
from pipeline.policies.capacity.preemption import (
    PreemptionSettings,
    ideal_assignment,
    select,
    to_obtain,
)
from pipeline.policies.queues import parse_inline

GB = np.array([1.0, 1.0, 0.0])  # minimum allocation: 1 vcore, 1 GiB
CLUSTER = np.array([100.0, 100.0, 0.0])
QUEUE = np.array([100.0, 100.0, 0.0])


def _mem(x: float) -> np.ndarray:
    return np.array([0.0, x, 0.0])


@pytest.mark.parametrize(("used", "limit"), [((60, 20), 41.0), ((60, 40), 51.0)])
def test_user_limit_golden(used: tuple[int, int], limit: float) -> None:
    """100 GB queue, MULP 25, ULF 1, two active users (UsersManager.computeUserLimit)."""
    total = _mem(sum(used))
    got = f.user_limit(QUEUE, total, total, 2.0, 25, 1, QUEUE, GB, CLUSTER)
    assert got[1] == limit
    compiled = kernel.user_limit(QUEUE, total, total, 2.0, 25.0, 1.0, QUEUE, GB, CLUSTER, 0)
    assert compiled[1] == limit


def test_user_limit_mulp_floor_factor_cap_and_weight() -> None:
    one = f.user_limit(QUEUE, _mem(10), _mem(10), 4.0, 25, 1, QUEUE, GB, CLUSTER)
    assert one[1] == 25.0  # MULP floor: 25% of the queue's capacity
    capped = f.user_limit(_mem(20), _mem(30), _mem(30), 1.0, 100, 1, QUEUE, GB, CLUSTER)
    assert capped[1] == 20.0  # user-limit-factor 1 caps at the queue's capacity
    off = f.user_limit(_mem(20), _mem(30), _mem(30), 1.0, 100, -1, QUEUE, GB, CLUSTER)
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
    assert kernel.greater(a, b, CLUSTER, 1) and not kernel.greater(a, b, CLUSTER, 0)
    assert kernel.ratio(a, b, CLUSTER, 1) == pytest.approx(50 / 40)


def test_application_and_am_limits() -> None:
    assert f.max_applications(10000, 0.3, 25, 1) == (3000, 750)
    assert f.am_limit(_mem(100), 0.1, GB)[1] == 10.0
    assert f.am_limit(_mem(15), 0.1, GB)[1] == 2.0  # normalised up


def test_preemption_golden_two_gb() -> None:
    """A 90 / B 10 + 40 pending, both 50% (max 100%), defaults: one round asks 2 GB of A."""
    tree = parse_inline("a:50,b:50")
    used, pending = np.array([100.0, 90, 10]), np.array([40.0, 0, 40])
    amount = to_obtain(tree, 100.0, used, pending, PreemptionSettings(enabled=True))
    assert amount.tolist() == pytest.approx([0.0, 2.0, 0.0])
    ideal = ideal_assignment(100.0, np.array([50.0, 50]), np.array([100.0, 100]),
                             np.array([90.0, 10]), np.array([0.0, 40]), np.array([True, True]))
    assert ideal.tolist() == pytest.approx([50.0, 50.0])  # B is offered all that is left


def test_preemption_dead_zone() -> None:
    tree = parse_inline("a:50,b:50")
    amount = to_obtain(tree, 100.0, np.array([100.0, 54, 46]), np.array([10.0, 0, 10]),
                       PreemptionSettings(enabled=True))
    assert amount.sum() == 0.0  # 54 <= 50 * 1.1


def test_selection_counts_earlier_picks_and_skips_am() -> None:
    order = np.array([3, 2, 1, 0])
    size = np.ones(4)
    is_am = np.array([True, False, False, False])
    assert select(2.0, order, size, np.zeros(4, bool), is_am).tolist() == [3, 2]
    earlier = np.array([False, True, False, False])
    assert select(2.0, order, size, earlier, is_am).tolist() == [1, 3]
    assert select(9.0, order, size, np.zeros(4, bool), is_am).tolist() == [3, 2, 1]


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
