"""The compiled locality gate against its plain-Python reference
(:mod:`pipeline.policies.locality.gate_reference`): on small random clusters, requests,
rules and offer sequences, both must take the same asks with the same types, count the same
offers, and leave the same missed counts, levels, times and free room."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.policies.locality.gate import (
    CS,
    FS_COUNT,
    FS_TIME,
    NO_DELAY,
    Candidates,
    LocalityRule,
    LocalityState,
    at_offer,
    pick,
    refresh_local,
    taken,
)
from pipeline.policies.locality.gate_reference import (
    PASS,
    Ask,
    Memory,
    Offer,
    book,
    data_racks,
    decide,
    locations,
)
from pipeline.policies.models import NO_BITS, NO_MASK

WIDTH = 3  # data locations per request
SETTINGS = {  # per rule: node and rack settings (-1: no delay), as missed counts, or
    CS: [-1.0, 0.0, 1.0, 2.0, 4.0, 7.0],  # fractions of the nodes, or seconds
    FS_COUNT: [-1.0, 0.0, 0.25, 0.5, 1.0, 2.0],
    FS_TIME: [-1.0, 0.0, 0.5, 1.0, 3.0],
    NO_DELAY: [-1.0, 1.0],
}


@dataclass
class Scenario:
    """One scheduling call: nodes, requests, the rule, per-job memory and the offers."""

    rack_of: list[int]
    free: list[list[float]]
    model_bits: list[int] | None  # None: no GPU model constraints
    app_of: list[int]  # per request (-1: of no application here)
    hosts: list[list[int]]
    ready: list[float]
    need: list[list[float]]
    masks: list[int]
    queue: list[list[int]]  # per application, its requests in queue order
    app_job: list[int]
    rule: LocalityRule
    n_up: int  # N
    memory: list[tuple[int, int, float]]  # per job code: missed, level, since
    offers: list[tuple[int, float, list[int]]]  # node, time, applications in turn


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n_nodes = draw(st.integers(1, 6))
    nodes = st.integers(0, n_nodes - 1)
    n_apps = draw(st.integers(1, 3))
    n_req = draw(st.integers(n_apps, 12))
    room = st.sampled_from([2.0, 3.0, 4.0, 6.0])
    node_room = st.tuples(room, room, st.sampled_from([0.0, 1.0])).map(list)
    size = st.sampled_from([0.0, 1.0, 1.0, 2.0])
    gpus = st.sampled_from([0.0, 0.0, 0.0, 1.0])
    kind = draw(st.sampled_from([NO_DELAY, CS, FS_COUNT, FS_TIME]))
    setting = st.sampled_from(SETTINGS[kind])
    # every application has a request; the others' may be of none here (-1)
    app_of = list(range(n_apps)) + draw(st.lists(st.integers(-1, n_apps - 1),
                                                 min_size=n_req - n_apps,
                                                 max_size=n_req - n_apps))
    queue = [[i for i in range(n_req) if app_of[i] == a] for a in range(n_apps)]
    models = draw(st.booleans())
    n_jobs = n_apps + draw(st.integers(0, 2))
    memory = st.tuples(st.integers(0, 6), st.integers(0, 2),
                       st.sampled_from([float("nan"), 0.0, 1.5, 4.0]))
    offer = st.tuples(nodes, st.sampled_from([0.5 * k for k in range(21)]),
                      st.lists(st.integers(0, n_apps - 1), min_size=1, max_size=2))
    with_data = st.lists(nodes, min_size=1, max_size=WIDTH)
    hosts = st.one_of(with_data, with_data, with_data, st.just([]))
    return Scenario(
        rack_of=draw(st.lists(st.sampled_from([-1, 0, 0, 1, 1, 2]), min_size=n_nodes,
                              max_size=n_nodes)),
        free=draw(st.lists(node_room, min_size=n_nodes, max_size=n_nodes)),
        model_bits=draw(st.lists(st.sampled_from([1, 2]), min_size=n_nodes,
                                 max_size=n_nodes)) if models else None,
        app_of=app_of,
        hosts=draw(st.lists(hosts, min_size=n_req, max_size=n_req)),
        ready=draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.5, 6.0]), min_size=n_req,
                            max_size=n_req)),
        need=draw(st.lists(st.tuples(size, size, gpus).map(list), min_size=n_req,
                           max_size=n_req)),
        masks=draw(st.lists(st.integers(0, 3), min_size=n_req, max_size=n_req)),
        queue=[draw(st.permutations(q)) for q in queue],
        app_job=draw(st.permutations(list(range(n_jobs))))[:n_apps],
        rule=LocalityRule(kind, draw(setting), draw(setting), draw(st.booleans())),
        n_up=draw(st.integers(0, 8)),
        memory=draw(st.lists(memory, min_size=n_jobs, max_size=n_jobs)),
        offers=sorted(draw(st.lists(offer, min_size=1, max_size=16)), key=lambda o: o[1]),
    )


def _kernel(sc: Scenario) -> tuple[list[tuple[int, int, bool]], dict]:
    """Drive the compiled gate as ``allocate`` does on each offer: refresh the node-local
    candidates, pick for each application in turn, book what it takes."""
    inputs = np.full((len(sc.app_of), WIDTH), -1, np.int64)
    for i, hosts in enumerate(sc.hosts):
        inputs[i, :len(hosts)] = hosts
    models = (NO_MASK, NO_BITS) if sc.model_bits is None else (
        np.array(sc.masks, np.int64), np.array(sc.model_bits, np.int64))
    n_apps = len(sc.queue)
    cands = Candidates(inputs, np.array(sc.rack_of, np.int64), np.array(sc.app_of, np.int64),
                       n_apps, np.array(sc.ready), models)
    state = LocalityState()
    state.grow(len(sc.memory))
    for j, (missed, level, since) in enumerate(sc.memory):
        state.miss[j], state.level[j], state.since[j] = missed, level, since
    lst = np.array([i for q in sc.queue for i in q], np.int64)
    hi = np.cumsum([len(q) for q in sc.queue]).astype(np.int64)
    lo = hi - np.array([len(q) for q in sc.queue], np.int64)
    free = np.array(sc.free, np.float64)
    need = np.array(sc.need, np.float64)
    gate = cands.gate_state(sc.rule, sc.n_up, free, need, lo.copy(),
                            np.array(sc.app_job, np.int64), state)
    decisions = []
    for nd, now, apps in sc.offers:
        g = at_offer(gate, nd, now)
        best = np.full(n_apps, -1, np.int64)
        touched = np.empty(n_apps, np.int64)
        n_touched = refresh_local(g, best, touched, 0)
        for a in apps:
            before = int(g.visits[0])
            i, typ = pick(g, a, best[a], lst, lo[a], hi[a])
            decisions.append((int(i), int(typ), int(g.visits[0]) != before))
            if i >= 0:
                taken(g, i, typ, a)
                free[nd] -= need[i]
                n_touched = refresh_local(g, best, touched, n_touched)
    mine = np.array(sc.app_of) >= 0
    return decisions, {"missed": state.miss.tolist(), "level": state.level.tolist(),
                       "since": state.since.tolist(), "free": free.tolist(),
                       "done": cands.done[mine].tolist()}


def _reference(sc: Scenario) -> tuple[list[tuple[int, int, bool]], dict]:
    """The same scheduling call through :mod:`~pipeline.policies.locality.gate_reference`."""
    asks = [Ask(i, sc.ready[i], (sc.need[i][0], sc.need[i][1], sc.need[i][2]),
                tuple(sc.hosts[i]), data_racks(tuple(sc.hosts[i]), sc.rack_of),
                sc.masks[i] if sc.model_bits is not None else 0)
            for i in range(len(sc.app_of))]
    queues = [[asks[i] for i in q] for q in sc.queue]
    n_locations = [locations(q) for q in queues]
    memory = [Memory(missed, level, since) for missed, level, since in sc.memory]
    free = [[float(x) for x in row] for row in sc.free]
    decisions = []
    for nd, now, apps in sc.offers:
        offer = Offer(nd, sc.rack_of[nd], now, free[nd],
                      sc.model_bits[nd] if sc.model_bits is not None else 0)
        for a in apps:
            mem = memory[sc.app_job[a]]
            d = decide(queues[a], offer, sc.rule, mem, sc.n_up, n_locations[a])
            decisions.append((d.index, d.type, d.counted))
            if d.index != PASS:
                book(asks[d.index], d.type, offer, sc.rule, mem)
    return decisions, {"missed": [m.missed for m in memory],
                       "level": [m.level for m in memory],
                       "since": [m.since_s for m in memory], "free": free,
                       "done": [ask.done for ask, a in zip(asks, sc.app_of, strict=True)
                                if a >= 0]}


def _same(x: object, y: object) -> bool:
    """Exact equality, NaN equal to NaN (a job code never offered)."""
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, float) and isinstance(y, float) and x != x:
        return y != y
    return x == y


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_the_compiled_gate_decides_as_the_reference(sc: Scenario) -> None:
    got_decisions, got_state = _kernel(sc)
    want_decisions, want_state = _reference(sc)
    assert got_decisions == want_decisions
    for key, want in want_state.items():
        assert _same(got_state[key], want), key
