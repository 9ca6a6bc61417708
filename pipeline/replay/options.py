"""Cluster options of a replay: names, defaults, checks, and defaults taken from the trace.

``fixed`` replays on the trace's machines.  ``elastic`` replays on identical template nodes
(``node_cpu``, ``node_mem``, ``node_gpu`` in the trace's own units) between ``min_nodes`` and
``max_nodes``.  Template defaults, in order: the most common machine shape in the trace's
``machines`` table; else, from ``manifest.units``: cpu in cores -> 4, in normalized units
(fraction of the largest machine) -> 1.0; memory in GiB/GB -> 16, MiB/MB -> 16384,
normalized -> 1.0; gpu -> 0 (an AWS m5.xlarge: 4 vCPU, 16 GiB, $0.192 per hour on demand in
us-east-1, the default ``price_per_hour``).  ``max_nodes`` defaults to the number of trace
machines (1000 when the trace has none).

Locality options (both kinds): ``dfs=hdfs`` lays out input data where the trace records
none (:mod:`pipeline.replay.locality`); ``node_mb_s``/``rack_mb_s``/``core_mb_s`` are the
rates a task reads its ``input_mb`` at, by locality (:func:`pipeline.sim.kernels.run_time`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.base import Param
from pipeline.sim.cluster import ClusterSpec
from pipeline.sim.core import READ_MB_S
from pipeline.sim.tasks import INPUT_WIDTH

CLUSTER_KINDS = ("fixed", "elastic", "cluster-autoscaler", "karpenter")
BILLING_S = {"second": 1.0, "hour": 3600.0}

CLUSTER_PARAMS: dict[str, Param] = {
    "price_per_hour": Param(0.192, "USD per provisioned node-hour (AWS m5.xlarge)", float, 0.0),
    "billing": Param("second", "billing granularity: per second, or per started hour", str,
                     choices=tuple(BILLING_S)),
    "node_cpu": Param(None, "elastic template cpu (trace units; default from the trace)",
                      float, 0.0),
    "node_mem": Param(None, "elastic template memory (trace units; default from the trace)",
                      float, 0.0),
    "node_gpu": Param(None, "elastic template gpus (default from the trace, else 0)",
                      float, 0.0),
    "min_nodes": Param(0, "elastic: never fewer nodes provisioned", int, 0),
    "max_nodes": Param(None, "elastic: never more nodes (default: trace machines, or 1000)",
                       int, 1),
    "initial_nodes": Param(None, "elastic: nodes up at time 0 (default min_nodes)", int, 0),
    "boot_delay_s": Param(120.0, "elastic: request to ready (billed meanwhile)", float, 0.0),
    "upscale_wait_s": Param(180.0, "elastic: a request pending this long triggers upscaling "
                            "(Qubole: three minutes)", float, 0.0),
    "idle_s": Param(60.0, "elastic: release a node after this long without containers "
                    "(0 = at once)", float, 0.0),
    "dfs": Param("off", "where input data lives when the trace does not say: off, or hdfs "
                 "(each job's input as HDFS blocks, rack-aware replicas)", str,
                 choices=("off", "hdfs")),
    "block_mb": Param(128.0, "dfs: HDFS block size in MiB (what a map reads when the trace "
                      "gives no input_mb)", float, 1e-3),
    "replication": Param(3, "dfs: replicas per block", int, 1, INPUT_WIDTH),
    "rack_size": Param(30, "machines per rack where the trace names no rack (Quincy: ~30)",
                       int, 1),
    "node_mb_s": Param(READ_MB_S[0], "MiB/s a task reads node-local input at", float, 1e-6),
    "rack_mb_s": Param(READ_MB_S[1], "MiB/s a task reads rack-local input at", float, 1e-6),
    "core_mb_s": Param(READ_MB_S[2], "MiB/s a task reads off-rack input at (through the "
                       "core)", float, 1e-6),
    "slow_fraction": Param(0.0, "share of machines slowed by slow_factor (chosen by the "
                           "seed, the same for every policy)", float, 0.0, 1.0),
    "slow_factor": Param(2.5, "how many times slower a slowed machine runs (LATE measured "
                         "about 2.5x on EC2)", float, 1.0),
    "platform_speed": Param("", "speeds by machine platform, PLATFORM=SPEED;... (fixed "
                            "cluster; the trace's platform column)", str),
    "contention_share": Param(0.0, "share of each machine's time in contention periods "
                              "that come and go (transient stragglers; 0: none)", float, 0.0,
                              0.99),
    "contention_factor": Param(2.5, "how many times slower a machine runs while contended",
                               float, 1.0),
    "contention_mean_s": Param(600.0, "mean length of a contention period (s)", float, 1.0),
    "catalog": Param("configs/instance-types-aws.csv", "cluster-autoscaler, karpenter: the priced "
                     "instance types (CSV or YAML, pipeline.replay.catalog)", str),
    "autoscaler_flags": Param("", "cluster-autoscaler: Cluster Autoscaler's flags, a file "
                              "or the flags themselves (--expander=least-waste ...)", str),
    "node_groups": Param("m5.xlarge", "cluster-autoscaler: node groups (catalog types, "
                         "comma-separated, each 0..max_nodes) when the flags give no --nodes",
                         str),
    "safe_to_evict": Param(True, "cluster-autoscaler: pods may be evicted to drain a node "
                           "(false: every pod annotated safe-to-evict: \"false\")", bool),
    "nodepool": Param("", "karpenter: a NodePool YAML (karpenter.sh/v1; default: every "
                      "catalog type, WhenEmptyOrUnderutilized, consolidateAfter 0s, budget "
                      "10%)", str),
    "vcpu_per_unit": Param(None, "cluster-autoscaler, karpenter: vCPUs in one trace cpu "
                           "unit (default: 1 for a trace in cores)", float, 1e-9),
    "gib_per_unit": Param(None, "cluster-autoscaler, karpenter: GiB in one trace memory "
                          "unit (default: 1 for GiB, 1/1024 for MiB)", float, 1e-12),
}
LOCALITY_PARAMS = ("dfs", "block_mb", "replication", "rack_size", "node_mb_s", "rack_mb_s",
                   "core_mb_s")
SPEED_PARAMS = ("slow_fraction", "slow_factor", "platform_speed", "contention_share",
                "contention_factor", "contention_mean_s")
ELASTIC_ONLY = {"node_cpu", "node_mem", "node_gpu", "min_nodes", "max_nodes",
                "initial_nodes", "boot_delay_s", "upscale_wait_s", "idle_s"}
# the options of each Kubernetes cluster model (no other kind takes them)
KUBE_SHARED = {"catalog", "vcpu_per_unit", "gib_per_unit"}
KUBE_OPTIONS = {"cluster-autoscaler": KUBE_SHARED | {"autoscaler_flags", "node_groups",
                                                     "safe_to_evict"},
                "karpenter": KUBE_SHARED | {"nodepool"}}
# what a cluster-autoscaler cluster takes of the elastic options
KUBE_ELASTIC = {"max_nodes", "boot_delay_s"}



def describe_replay_options() -> dict[str, Any]:
    """The replay's own options (any policy) as ``tracereplay policies`` lists them."""
    return {
        "name": "replay options (any policy)",
        "summary": "the cluster a replay runs on, its prices and speeds, and how fast tasks "
                   "read their input (--set on replay and bench; a cluster's keys in "
                   "params.yaml)",
        "source": "AWS m5.xlarge list price; HDFS defaults (block 128 MiB, 3 replicas); "
                  "read rates from Zaharia et al., EuroSys 2010, section 5 (node-local 2x "
                  "off-rack)",
        "params": [{"name": key, "default": p.default, "type": p.kind.__name__,
                    "help": p.help, **({"choices": list(p.choices)} if p.choices else {})}
                   for key, p in CLUSTER_PARAMS.items()],
    }


# Checked in order: "normalized" first (its description may mention "CPU" or "memory").
_CPU_UNITS = {"normal": 1.0, "fraction": 1.0, "share": 1.0, "core": 4.0, "vcpu": 4.0}
_MEM_UNITS = {"normal": 1.0, "fraction": 1.0, "share": 1.0, "gib": 16.0, "gb": 16.0,
              "mib": 16384.0, "mb": 16384.0}


def _unit_default(text: str | None, table: dict[str, float]) -> float | None:
    text = (text or "").lower()
    for key, value in table.items():
        if key in text:
            return value
    return None


def template_defaults(cap: np.ndarray, units: Mapping[str, str]) -> dict[str, float | None]:
    """Default elastic template: the most common machine shape, else from the trace's units."""
    if len(cap):
        shapes, counts = np.unique(cap, axis=0, return_counts=True)
        best = max(range(len(shapes)), key=lambda i: (counts[i], tuple(shapes[i])))
        return dict(zip(("node_cpu", "node_mem", "node_gpu"), map(float, shapes[best]),
                        strict=True))
    return {"node_cpu": _unit_default(units.get("cpu"), _CPU_UNITS),
            "node_mem": _unit_default(units.get("mem"), _MEM_UNITS), "node_gpu": 0.0}


def cluster_spec(kind: str, options: Mapping[str, Any] | None, cap: np.ndarray,
                 units: Mapping[str, str]) -> ClusterSpec:
    """Resolve ``kind`` and user ``options`` (strings or typed) against the trace."""
    if kind not in CLUSTER_KINDS:
        raise UsageError(f"unknown cluster '{kind}' (known: {', '.join(CLUSTER_KINDS)})")
    raw = dict(options or {})
    unknown = sorted(set(raw) - set(CLUSTER_PARAMS))
    if unknown:
        raise UsageError(f"unknown cluster option '{unknown[0]}' (options: "
                         f"{', '.join(CLUSTER_PARAMS)})")
    foreign = set().union(*KUBE_OPTIONS.values()) - KUBE_OPTIONS.get(kind, set())
    if set(raw) & foreign:
        key = sorted(set(raw) & foreign)[0]
        owners = [k for k, opts in KUBE_OPTIONS.items() if key in opts]
        raise UsageError(f"cluster option '{key}' applies to the {' and '.join(owners)} "
                         f"cluster{'s' if len(owners) > 1 else ''} only")
    if kind in KUBE_OPTIONS and set(raw) & (ELASTIC_ONLY - KUBE_ELASTIC):
        raise UsageError(f"cluster option '{sorted(set(raw) & (ELASTIC_ONLY - KUBE_ELASTIC))[0]}'"
                         f" does not apply to {kind} (its node groups or NodePool say)")
    if kind == "fixed" and set(raw) & ELASTIC_ONLY:
        raise UsageError(f"cluster option '{sorted(set(raw) & ELASTIC_ONLY)[0]}' applies to "
                         "the elastic cluster only")
    got = {k: CLUSTER_PARAMS[k].coerce("cluster", k, v) for k, v in raw.items()}
    vals = {k: got.get(k, p.default) for k, p in CLUSTER_PARAMS.items()}
    if kind == "elastic" and vals["platform_speed"]:
        raise UsageError("cluster option 'platform_speed' applies to the fixed cluster only "
                         "(elastic nodes are copies of one template)")
    common = {"kind": kind, "price_per_hour": vals["price_per_hour"],
              "billing_s": BILLING_S[vals["billing"]],
              **{k: vals[k] for k in LOCALITY_PARAMS}, **{k: vals[k] for k in SPEED_PARAMS}}
    if kind == "fixed":
        return ClusterSpec(**common)
    if kind in KUBE_OPTIONS:
        from pipeline.replay.kube_options import kube_fields

        return ClusterSpec(**common, **kube_fields(kind, vals, units))
    return ClusterSpec(**common, **_elastic(vals, cap, units))


def _elastic(vals: dict[str, Any], cap: np.ndarray, units: Mapping[str, str]) -> dict[str, Any]:
    defaults = template_defaults(cap, units)
    for key in ("node_cpu", "node_mem", "node_gpu"):
        if vals[key] is None:
            vals[key] = defaults[key]
        if vals[key] is None:
            raise UsageError(f"cluster option '{key}' is needed: the trace has no machines and "
                             f"its units ({dict(units) or 'none stated'}) give no default")
    if vals["node_cpu"] <= 0 and vals["node_mem"] <= 0:
        raise UsageError("the elastic template needs node_cpu or node_mem > 0")
    lo = vals["min_nodes"]
    hi = vals["max_nodes"] if vals["max_nodes"] is not None else max(len(cap) or 1000, lo, 1)
    init = vals["initial_nodes"] if vals["initial_nodes"] is not None else lo
    if not lo <= init <= hi:
        raise UsageError(f"cluster options need min_nodes <= initial_nodes <= max_nodes "
                         f"(got {lo}, {init}, {hi})")
    return {
        "node_cpu": vals["node_cpu"], "node_mem": vals["node_mem"],
        "node_gpu": vals["node_gpu"], "min_nodes": lo, "max_nodes": hi,
        "initial_nodes": init, "boot_delay_s": vals["boot_delay_s"],
        "upscale_wait_s": vals["upscale_wait_s"], "idle_s": vals["idle_s"],
    }


def describe_cluster_options() -> list[dict[str, Any]]:
    """Every cluster option with default, type, help and whether it is elastic-only."""
    return [
        {"name": key, "default": p.default, "type": p.kind.__name__, "help": p.help,
         "elastic_only": key in ELASTIC_ONLY,
         **({"choices": list(p.choices)} if p.choices else {})}
        for key, p in CLUSTER_PARAMS.items()
    ]
