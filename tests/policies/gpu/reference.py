"""Plain-Python reference of the simulator's fragmentation and FGD score (``frag.go``,
``fgd_score.go``), one node at a time, for checking the compiled kernels."""

from __future__ import annotations

import math

from pipeline.policies.gpu.typical import TypicalPods

Q1, Q2, Q3, Q4, XL, XR, NA = range(7)


def node_frag_category(cpu: float, free: list[int], model: int, typical: TypicalPods,
                       t: int) -> int:
    """``GetNodePodFrag``: the fragment category of one node for typical pod ``t``."""
    cpu_ok = cpu >= typical.cpu[t]
    if typical.gpu_milli[t] == 0:
        return XL if cpu_ok else XR
    if not typical.models[t].all() and (model < 0 or not typical.models[t, model]):
        return NA
    fitting = sum(1 for f in free if f >= typical.gpu_milli[t])
    if fitting >= typical.num_gpu[t]:
        return Q3 if cpu_ok else Q4
    return Q2 if cpu_ok else Q1


def node_frag(cpu: float, free: list[int], model: int, typical: TypicalPods) -> float:
    """``NodeGpuShareFragAmountScore``: bucketed weighted fragment, summed except Q3."""
    buckets = [0.0] * 7
    idle = sum(free)
    for t in range(len(typical)):
        w = float(typical.weight[t])
        cat = node_frag_category(cpu, free, model, typical, t)
        if cat == Q3:
            small = sum(f for f in free if f < typical.gpu_milli[t])
            buckets[Q2] += w * float(small)
            buckets[Q3] += w * float(idle - small)
        else:
            buckets[cat] += w * float(idle)
    out = 0.0
    for i, b in enumerate(buckets):
        if i != Q3:
            out += b
    return out


def fgd_node_score(cpu: float, free: list[int], model: int, typical: TypicalPods,
                   pod_cpu: float, num_gpu: int, gpu_milli: int) -> tuple[int, int]:
    """``calculateGpuShareFragExtendScore``: (score, device; -1 unless sharing)."""
    before = node_frag(cpu, free, model, typical)

    def score(after: float) -> int:
        return int(1.0 / (1.0 + math.exp(-((before - after) / 1000.0))) * 100.0)

    if num_gpu == 1 and gpu_milli < 1000:
        best, device = 0, -1
        for d, f in enumerate(free):
            if f >= gpu_milli:
                new = list(free)
                new[d] -= gpu_milli
                s = score(node_frag(cpu - pod_cpu, new, model, typical))
                if device < 0 or s > best:
                    best, device = s, d
        return best, device
    new = list(free)
    need = num_gpu
    for d in sorted(range(len(new)), key=lambda i: new[i]):  # stable: least sufficient first
        if need and new[d] >= gpu_milli:
            new[d] -= gpu_milli
            need -= 1
    return score(node_frag(cpu - pod_cpu, new, model, typical)), -1
