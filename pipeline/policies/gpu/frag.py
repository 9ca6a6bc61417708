"""GPU fragmentation (Weng et al., ATC'23, section 3) and FGD's per-node score, compiled.

Fragmentation of a node for typical pod t, with G the node's idle milli-GPU (semantics §6;
``GetNodePodFrag`` and ``NodeGpuShareFragAmount`` in the simulator's ``pkg/utils/frag.go``):
t CPU-only, t's model not allowed, t's GPUs not fitting, or CPU lacking: all of G; else the
free share of the devices whose free share is below t's.  The node's fragmentation is the
popularity-weighted sum over typical pods.

The simulator accumulates the weighted terms in per-category buckets (lack-both, lack-GPU,
lack-CPU, CPU-pod fits, CPU-pod lacks CPU, no access) and then sums the buckets; the kernels
do the same additions in the same order, so equal fragmentations compare equal as in Go
and FGD's truncated scores tie exactly where the simulator's do.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.policies.gpu.devices import GpuNodes, Pod
from pipeline.policies.gpu.typical import TypicalPods


@njit(cache=True)
def _node_stats(row, levels, fit_count, small):
    """Idle share of one node; per share level, devices fitting it and idle share of the rest.

    Typical pods sharing a per-GPU share share a level, so this is O(devices x levels).
    """
    total = 0
    for u in range(len(levels)):
        fit_count[u] = 0
        small[u] = 0
    for d in range(len(row)):
        free = row[d]
        if free < 0:
            continue
        total += free
        for u in range(len(levels)):
            if free >= levels[u]:
                fit_count[u] += 1
            else:
                small[u] += free
    return total


@njit(cache=True)
def _frag_sum(cpu, total, fit_count, small, model, typ):
    """Weighted fragment of one node from its stats, bucketed and summed as frag.go does."""
    t_cpu, t_num, t_milli, t_w, t_any, t_models, t_level, _ = typ
    q1 = q2 = q4 = xl = xr = na = 0.0
    g = float(total)
    for t in range(len(t_w)):
        w = t_w[t]
        cpu_ok = cpu >= t_cpu[t]
        if t_milli[t] == 0:
            if cpu_ok:
                xl += w * g
            else:
                xr += w * g
        elif not (t_any[t] or (model >= 0 and t_models[t, model])):
            na += w * g
        elif fit_count[t_level[t]] >= t_num[t]:
            if cpu_ok:
                q2 += w * float(small[t_level[t]])
            else:
                q4 += w * g
        elif cpu_ok:
            q2 += w * g
        else:
            q1 += w * g
    out = 0.0
    out += q1
    out += q2
    out += q4
    out += xl
    out += xr
    out += na
    return out


@njit(cache=True)
def _frag_nodes(cpu_free, gpu_free, model, idx, typ):
    """Fragmentation of the nodes ``idx``."""
    levels = typ[7]
    fit_count = np.empty(len(levels), np.int64)
    small = np.empty(len(levels), np.int64)
    out = np.empty(len(idx), np.float64)
    for j in range(len(idx)):
        i = idx[j]
        total = _node_stats(gpu_free[i], levels, fit_count, small)
        out[j] = _frag_sum(cpu_free[i], total, fit_count, small, model[i], typ)
    return out


@njit(cache=True)
def _score(before, after):
    """FGD's node score: sigmoid of the fragment drop in GPUs, times 100, truncated."""
    x = (before - after) / 1000.0
    return np.int64(1.0 / (1.0 + np.exp(-x)) * 100.0)


@njit(cache=True)
def _share_after(cpu, total, fit_count, small, free, share, fc2, sm2, model, typ):
    """Fragment after taking ``share`` from one device with ``free`` (stats updated, not redone)."""
    levels = typ[7]
    left = free - share
    for u in range(len(levels)):
        m = levels[u]
        fc2[u] = fit_count[u] - (1 if free >= m else 0) + (1 if left >= m else 0)
        sm2[u] = small[u] - (free if free < m else 0) + (left if left < m else 0)
    return _frag_sum(cpu, total - share, fc2, sm2, model, typ)


@njit(cache=True)
def _fgd_scores(cpu_free, gpu_free, model, ok, pod_cpu, pod_num, pod_milli, typ):
    """Per node: FGD score (-1 where not ``ok``) and, for a sharing pod, the best device.

    A sharing pod is tried on every device that fits it; the device with the highest
    truncated score wins, ties to the lowest index (fgd_score.go).  Devices with equal free
    share give equal scores, so only the first of each is evaluated.
    """
    n, width = gpu_free.shape
    u_n = len(typ[7])
    fc = np.empty(u_n, np.int64)
    sm = np.empty(u_n, np.int64)
    fc2 = np.empty(u_n, np.int64)
    sm2 = np.empty(u_n, np.int64)
    scores = np.full(n, -1, np.int64)
    devices = np.full(n, -1, np.int64)
    sharing = pod_num == 1 and pod_milli < 1000
    for i in range(n):
        if not ok[i]:
            continue
        row = gpu_free[i]
        total = _node_stats(row, typ[7], fc, sm)
        before = _frag_sum(cpu_free[i], total, fc, sm, model[i], typ)
        cpu_after = cpu_free[i] - pod_cpu
        if pod_num == 0:
            scores[i] = _score(before, _frag_sum(cpu_after, total, fc, sm, model[i], typ))
        elif not sharing:  # whole GPUs: fully free devices become empty
            for u in range(u_n):
                fc2[u] = fc[u] - pod_num
            after = _frag_sum(cpu_after, total - pod_num * 1000, fc2, sm, model[i], typ)
            scores[i] = _score(before, after)
        else:
            for d in range(width):
                free = row[d]
                if free < pod_milli:
                    continue
                seen = False
                for e in range(d):
                    if row[e] == free:
                        seen = True
                        break
                if seen:
                    continue
                after = _share_after(cpu_after, total, fc, sm, free, pod_milli, fc2, sm2,
                                     model[i], typ)
                s = _score(before, after)
                if devices[i] < 0 or s > scores[i]:
                    scores[i] = s
                    devices[i] = d
    return scores, devices


def _typical_args(nodes: GpuNodes, typical: TypicalPods) -> tuple:
    """Typical-pod arrays for the kernels, checked against the cluster's model codes.

    Adds the distinct per-GPU shares (``levels``) and each typical pod's level index.
    """
    any_model = typical.any_model
    if typical.models.shape[1] != len(nodes.models) and not any_model.all():
        raise ValueError(f"typical pods have {typical.models.shape[1]} model columns, the "
                         f"cluster {len(nodes.models)} models {nodes.models}")
    levels = np.unique(typical.gpu_milli).astype(np.int64)
    t_level = np.searchsorted(levels, typical.gpu_milli).astype(np.int64)
    return (typical.cpu, typical.num_gpu, typical.gpu_milli, typical.weight, any_model,
            typical.models, t_level, levels)


def node_fragmentation(nodes: GpuNodes, typical: TypicalPods,
                       idx: np.ndarray | None = None) -> np.ndarray:
    """Fragmentation (milli-GPU) of each node, or of the nodes ``idx``."""
    sel = np.arange(nodes.n) if idx is None else np.asarray(idx, dtype=np.int64)
    return _frag_nodes(nodes.cpu_free, nodes.gpu_free, nodes.model, sel,
                       _typical_args(nodes, typical))


def cluster_fragmentation(nodes: GpuNodes, typical: TypicalPods) -> float:
    """Fragmentation of the cluster (milli-GPU): the sum over nodes."""
    return float(node_fragmentation(nodes, typical).sum())


def fragmentation_ratio(nodes: GpuNodes, typical: TypicalPods) -> float:
    """Cluster fragmentation over idle milli-GPU (0 when nothing is idle).

    The simulator divides by the sum of all seven buckets, which is the idle share since
    the popularities sum to 1; the exact integer idle share is used here.
    """
    idle = nodes.gpu_idle
    return cluster_fragmentation(nodes, typical) / idle if idle > 0 else 0.0


def fgd_scores(nodes: GpuNodes, pod: Pod, typical: TypicalPods,
               ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FGD's score per node (-1 where ``ok`` is False) and the sharing pod's best device."""
    return _fgd_scores(nodes.cpu_free, nodes.gpu_free, nodes.model,
                       np.ascontiguousarray(ok, dtype=np.bool_), int(pod.cpu),
                       int(pod.num_gpu), int(pod.gpu_milli), _typical_args(nodes, typical))


__all__ = ["cluster_fragmentation", "fgd_scores", "fragmentation_ratio", "node_fragmentation"]
