"""A synthetic Alibaba GPU 2023 ("openb") trace in the published CSV layout.

Shaped on the published trace's characteristics (alibaba/clusterdata
``cluster-trace-gpu-v2023`` and Weng et al., USENIX ATC'23): node models and shapes in the
proportions of the 1,523-node cluster (a fifth CPU-only; most GPU nodes 8 x G2 or 2 x T4), and
pods in its mix of request kinds (about 13 % CPU-only, 38 % sharing a fraction of one GPU,
48 % one whole GPU, 1-2 % 2, 4 or 8 GPUs), with the common GPU shares of the sharing pods.
Pods are created over ``hours`` and deleted after a heavy-tailed life; total GPU requests are
``load`` times the GPU capacity (0.98 in the published trace), so the FGD paper's workload
inflation has room to add copies up to 130 %.  Deterministic in its arguments.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

# (model, gpus, cpu_milli, memory_mib, weight): the published cluster's common node shapes
NODE_SHAPES = (
    (None, 0, 32_000, 262_144, 0.13), (None, 0, 96_000, 524_288, 0.07),
    ("G2", 8, 96_000, 393_216, 0.36), ("T4", 2, 104_000, 524_288, 0.26),
    ("P100", 2, 16_000, 122_880, 0.09), ("V100M16", 4, 32_000, 131_072, 0.04),
    ("G3", 8, 96_000, 786_432, 0.025), ("V100M32", 8, 96_000, 786_432, 0.025),
)
# (num_gpu, weight, median cpu_milli, median memory_mib) per request kind
POD_KINDS = ((0, 0.133, 12_500, 51_200), (-1, 0.378, 4_000, 15_258),
             (1, 0.480, 11_400, 48_128), (2, 0.002, 16_200, 66_560),
             (4, 0.002, 32_200, 132_096), (8, 0.005, 88_000, 327_680))
# the sharing pods' common GPU shares (milli) and their weights
SHARES = ((810, 0.35), (470, 0.25), (320, 0.11), (650, 0.08), (230, 0.05), (460, 0.04),
          (590, 0.025), (160, 0.025), (500, 0.05), (250, 0.02))
QOS = (("LS", 0.57), ("BE", 0.417), ("Burstable", 0.012), ("Guaranteed", 0.001))


def generate_openb(out: Path, machines: int, hours: float, seed: int,
                   load: float = 0.98) -> dict:
    """Write ``openb_node_list_all_node.csv`` and ``openb_pod_list_default.csv`` into ``out``."""
    rng = np.random.default_rng([seed, 2023])
    nodes = _nodes(machines, rng)
    nodes.write_csv(out / "openb_node_list_all_node.csv")
    capacity = int(nodes["gpu"].sum()) * 1000
    pods = _pods(capacity * load, hours * 3600.0, rng)
    pods.write_csv(out / "openb_pod_list_default.csv")
    return {"rows": {"node_list": nodes.height, "pod_list": pods.height},
            "gpus": capacity // 1000, "gpu_requested_share": float(
                (pods["num_gpu"] * pods["gpu_milli"]).sum() / max(capacity, 1))}


def _nodes(n: int, rng: np.random.Generator) -> pl.DataFrame:
    weights = np.array([s[4] for s in NODE_SHAPES])
    kind = rng.choice(len(NODE_SHAPES), size=n, p=weights / weights.sum())
    if not any(NODE_SHAPES[k][1] for k in kind):  # at least one GPU node
        kind[0] = 2
    return pl.DataFrame({
        "sn": [f"openb-node-{i:04d}" for i in range(n)],
        "cpu_milli": [NODE_SHAPES[k][2] for k in kind],
        "memory_mib": [NODE_SHAPES[k][3] for k in kind],
        "gpu": [NODE_SHAPES[k][1] for k in kind],
        "model": [NODE_SHAPES[k][0] for k in kind],
    })


def _pods(gpu_milli_target: float, span_s: float, rng: np.random.Generator) -> pl.DataFrame:
    """Pods drawn until their GPU requests reach ``gpu_milli_target``."""
    kinds = np.array([k[1] for k in POD_KINDS])
    rows: list[tuple] = []
    total = 0.0
    while total < gpu_milli_target:
        k = POD_KINDS[rng.choice(len(POD_KINDS), p=kinds / kinds.sum())]
        num, milli = (1, _share(rng)) if k[0] < 0 else (k[0], 1000 if k[0] else 0)
        cpu = max(1000, int(round(k[2] * rng.lognormal(0, 0.4), -2)))
        mem = max(1024, int(k[3] * rng.lognormal(0, 0.4)))
        rows.append((num, milli, cpu, mem))
        total += num * milli
    n = len(rows)
    created = np.sort(rng.uniform(0, span_s, n)).round()
    life = (rng.pareto(1.2, n) * 600 + 60).round()
    deleted = np.minimum(created + life, span_s)  # alive at the end: deleted there (censored)
    phase = rng.choice(["Running", "Succeeded", "Failed", "Pending"], n,
                       p=[0.64, 0.02, 0.23, 0.11])
    pending = phase == "Pending"
    starts = np.minimum(created + rng.integers(0, 30, n), deleted).astype(np.int64)
    scheduled = [None if p else int(s) for p, s in zip(pending, starts, strict=True)]
    qos = [q for q, _ in QOS]
    return pl.DataFrame({
        "name": [f"openb-pod-{i:04d}" for i in range(n)],
        "cpu_milli": [r[2] for r in rows], "memory_mib": [r[3] for r in rows],
        "num_gpu": [r[0] for r in rows], "gpu_milli": [r[1] for r in rows],
        "gpu_spec": [None] * n,
        "qos": rng.choice(qos, n, p=[w for _, w in QOS]),
        "pod_phase": phase, "creation_time": created.astype(np.int64),
        "deletion_time": deleted.astype(np.int64),
        "scheduled_time": pl.Series(scheduled, dtype=pl.Int64),
    })


def _share(rng: np.random.Generator) -> int:
    weights = np.array([w for _, w in SHARES])
    return SHARES[rng.choice(len(SHARES), p=weights / weights.sum())][0]
