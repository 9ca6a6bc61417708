"""The core's declared shape (pipeline.sim.context) is honest both ways: the core has every
member it declares, each port's methods are there on the component behind it, and every
member is one a component uses (no leftovers from a mixin)."""

from __future__ import annotations

import inspect

import pytest

from pipeline.sim import admission, contention, decisions, nodemanager, runs, speculation, views
from pipeline.sim.context import RunsPort, SimContext, SpeculationPort, ViewsPort
from pipeline.sim.core import Simulation
from tests.sim.test_core import batch, cluster, run

pytestmark = pytest.mark.nojit

COMPONENTS = (admission, contention, decisions, nodemanager, runs, speculation, views)


def _members(proto: type) -> set[str]:
    """The attributes and methods a Protocol declares."""
    own = set(vars(proto).get("__annotations__", {}))
    own |= {n for n, v in vars(proto).items() if inspect.isfunction(v)}
    return {n for n in own if not n.startswith("__")}  # (Protocol's own __init__ and so on)


@pytest.fixture(scope="module")
def sim() -> Simulation:
    """A core after a short replay (the NodeManagers and job statistics not asked for)."""
    return run(cluster(2), [batch([0.0], [5.0])])[1]


def test_the_core_has_every_declared_member(sim: Simulation) -> None:
    # (nm and job_stats are None here but set: hasattr holds)
    assert not sorted(n for n in _members(SimContext) if not hasattr(sim, n))


@pytest.mark.parametrize(("attr", "port"), [("views", ViewsPort), ("runs", RunsPort),
                                            ("speculation", SpeculationPort)])
def test_each_component_offers_its_port(sim: Simulation, attr: str, port: type) -> None:
    component = getattr(sim, attr)
    assert not sorted(n for n in _members(port) if not hasattr(component, n))


def test_every_declared_member_is_used_by_a_component() -> None:
    source = "".join(inspect.getsource(m) for m in COMPONENTS)
    assert not sorted(n for n in _members(SimContext) if f"sim.{n}" not in source)


def test_the_core_mixes_nothing_in() -> None:
    assert Simulation.__bases__ == (object,)
