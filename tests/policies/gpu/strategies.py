"""Hypothesis strategies: small GPU clusters in arbitrary states, pods and typical pods."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from pipeline.policies.gpu.devices import MILLI, GpuNodes, Pod
from pipeline.policies.gpu.typical import TypicalPods

SHARES = [100, 250, 300, 500, 600, 700, 1000]
MODELS = ("A", "B", "C")


@st.composite
def clusters(draw: st.DrawFn, max_nodes: int = 6, max_devices: int = 8) -> GpuNodes:
    """A cluster with CPU-only and GPU nodes of up to three models, devices partly used."""
    n = draw(st.integers(1, max_nodes))
    counts = draw(st.lists(st.integers(0, max_devices), min_size=n, max_size=n))
    names = [draw(st.sampled_from(MODELS)) if c else None for c in counts]
    cpu = draw(st.lists(st.sampled_from([0, 2000, 8000, 32000, 96000]), min_size=n, max_size=n))
    mem = draw(st.lists(st.sampled_from([0, 4096, 262144]), min_size=n, max_size=n))
    nodes = GpuNodes.build(cpu, mem, counts, names)
    for i, c in enumerate(counts):
        for d in range(c):
            nodes.gpu_free[i, d] = draw(st.sampled_from([0, 100, 300, 400, 500, 700, MILLI,
                                                         MILLI, MILLI]))
    return nodes


@st.composite
def pods(draw: st.DrawFn, n_models: int = len(MODELS)) -> Pod:
    """A CPU-only, sharing or whole-GPU pod, possibly limited to some model codes."""
    kind = draw(st.sampled_from(["cpu", "share", "whole"]))
    cpu = float(draw(st.sampled_from([0, 1000, 4000, 16000])))
    mem = float(draw(st.sampled_from([0, 1024, 8192])))
    models = draw(st.none() | st.frozensets(st.integers(0, n_models), min_size=1, max_size=2))
    if kind == "cpu":
        return Pod(cpu, mem)
    if kind == "share":
        return Pod(cpu, mem, 1, draw(st.sampled_from(SHARES[:-1])), models)
    return Pod(cpu, mem, draw(st.sampled_from([1, 2, 4, 8])), MILLI, models)


@st.composite
def typicals(draw: st.DrawFn, n_models: int) -> TypicalPods:
    """A handful of typical pods with popularities summing to 1."""
    k = draw(st.integers(1, 6))
    num = np.array(draw(st.lists(st.sampled_from([0, 1, 1, 2, 4]), min_size=k, max_size=k)))
    milli = np.array([0 if g == 0 else (draw(st.sampled_from(SHARES)) if g == 1 else MILLI)
                      for g in num])
    cpu = np.array(draw(st.lists(st.sampled_from([0, 1000, 6000, 40000]), min_size=k,
                                 max_size=k)), dtype=float)
    raw = np.array(draw(st.lists(st.integers(1, 20), min_size=k, max_size=k)), dtype=float)
    width = max(n_models, 1)
    masks = np.array([draw(st.lists(st.booleans(), min_size=width, max_size=width))
                      for _ in range(k)], dtype=bool).reshape(k, width)
    masks[~masks.any(axis=1)] = True
    return TypicalPods(cpu, num, milli, raw / raw.sum(), masks)
