"""What every number in a trace's report assumes, in words (pure functions over its frames).

The trace (format, window, size, units), each cluster model as replayed (machines or the
elastic template, price and billing, boot and upscale delays, idle release, failures), the
seeds, and for every metric that is empty for all runs, why.  The settings each run used
(configuration files included, with where each came from) are in
:func:`settings_table`.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from pipeline.report import palette
from pipeline.report.tables import duration

# metric -> why it is empty when it is empty for every run of a trace.  Data locality is
# not here: without input data (a trace's inputs, or dfs=hdfs) the report leaves it out
# altogether (:mod:`.locality`), and any trace can have it measured with dfs=hdfs.
EMPTY_REASONS = {
    "util_used_cpu": "the trace records no measured usage (cpu_used, mem_used), so only "
                     "allocated utilization is known",
    "jct_p95_s": "no job finished entirely within the window",
    "wait_p95_s": "no task started",
    "jain_fairness": "no user held resources while another asked for them",
}
BILLING = {1.0: "billed per second", 3600.0: "billed per started hour"}


# An SWF log describes one machine's pool of processors, not nodes: say what a node-hour is.
POOL_LINE = ("An SWF log describes one pool of processors (its MaxProcs), replayed as a single "
             "machine of that many processors: a node-hour here is an hour of the whole pool, "
             "and the price (price_per_hour) is what the pool costs per hour. Every setting "
             "holds the same pool; only how long it is held differs (the answer's makespan).")
MEASURED = {
    False: "Costs and utilization are measured over this window; work not finished by its "
           "end is reported as backlog.",
    True: "The runs went on past this window until every task ended (drain): costs and "
          "utilization are measured over each whole run.",
}


def trace_lines(info: dict[str, Any] | None, trace: str, drained: bool = False) -> list[str]:
    """The trace: what it is, its window and size, and its units (``drained``: its runs
    went on until every task ended)."""
    if info is None or (info.get("source_format") is None
                        and info.get("window_end_s") is None):
        return [f"Trace {trace}: its runs recorded no description of it (format, window, "
                "size); they predate it or were written by other tools."]
    start, end = info.get("window_start_s"), info.get("window_end_s")
    window = (f"observation window {duration(start)} to {duration(end)} from the trace's "
              f"start ({info.get('window_source') or 'source not recorded'})"
              if end is not None else "no observation window recorded")
    size = ", ".join(f"{int(info[k]):,} {k if int(info[k]) != 1 else k[:-1]}"
                     for k in ("machines", "jobs", "tasks") if info.get(k) is not None)
    lines = [f"Trace {trace}: {info.get('source_format') or 'unknown'} format"
             f"{', ' + size if size else ''}; {window}. {MEASURED[drained]}"]
    if info.get("source_format") == "swf":
        lines.append(POOL_LINE)
    units = info.get("units")
    if isinstance(units, str):
        units = json.loads(units)
    if units:
        described = "; ".join(f"{k}: {v}" for k, v in units.items() if k in ("cpu", "mem"))
        lines.append(f"Resources are in the trace's units ({described}); an elastic node's "
                     "shape is given in the same units.")
    return lines


KIND_ORDER = {"fixed": 0, "elastic": 1, "cluster-autoscaler": 2, "karpenter": 3}


def cluster_lines(runs: pl.DataFrame, summary: pl.DataFrame, drained: bool = False
                  ) -> list[str]:
    """One line per cluster model replayed (fixed, elastic, Cluster Autoscaler, Karpenter,
    each with its options), in that order and then by label, so the text is the same on
    every machine."""
    paying = ("each run pays for them until its last task ends" if drained
              else "every policy pays for the same machines over the window")
    specs = {text: json.loads(text) if isinstance(text, str) else dict(text)
             for text in set(runs["cluster"].to_list())}
    lines = []
    for text, spec in sorted(specs.items(), key=lambda item: (
            KIND_ORDER.get(_kind(item[1]), 0), str(item[1].get("label", "")), str(item[0]))):
        ids = runs.filter(pl.col("cluster") == text)["run_id"]
        evictions = summary.filter(pl.col("run_id").is_in(ids.implode()))["evictions"]
        most = int(evictions.max() or 0) if evictions.len() else 0
        billing = BILLING.get(float(spec.get("billing_s", 1.0)), "billed per interval")
        price = f"${spec.get('price_per_hour', 0):.3g} per node-hour, {billing}"
        kind = _kind(spec)
        if kind == "elastic":
            lines.append(_elastic_line(spec, price))
        elif kind in ("cluster-autoscaler", "karpenter"):
            lines.append(_kubernetes_line(spec, kind, most, billing))
        else:
            lines.append(
                "Fixed cluster: the trace's own machines, added, removed and failing when the "
                f"trace says ({_fixed_evictions(most)}); {paying}. "
                f"{price}." + _speed_text(spec))
    return lines


def _fixed_evictions(most: int) -> str:
    return f"up to {most:,} task evictions per run here" if most else "no task was evicted"


def _kind(spec: dict[str, Any]) -> str:
    return str(spec.get("kind") or spec.get("mode") or "fixed")


def _kubernetes_line(spec: dict[str, Any], kind: str, most: int, billing: str) -> str:
    """A Cluster Autoscaler or Karpenter cluster: what it buys from, and how pods map to
    instance sizes (docs/families/cluster-autoscaler.md, karpenter.md)."""
    catalog = spec.get("catalog") or "the built-in catalog"
    label = spec.get("label") or "default"
    if kind == "cluster-autoscaler":
        groups = spec.get("autoscaler_flags") or f"one node group of {spec.get('node_groups')}"
        head = f"Cluster Autoscaler ({label}): node groups from {groups}"
        if spec.get("safe_to_evict") is False:
            head += ", every pod annotated safe-to-evict \"false\" (only empty nodes go)"
    else:
        head = f"Karpenter ({label}): NodePool {spec.get('nodepool') or 'the default'}"
    evicted = f"Up to {most:,} pod evictions per run here." if most else "No pod was evicted."
    return (f"{head}; instance types and hourly prices from {catalog}, each node {billing} "
            f"at its type's price from its launch, ready {duration(spec.get('boot_delay_s', 0))} "
            f"later. One trace unit of cpu is {spec.get('vcpu_per_unit', 0):g} vCPU and of "
            f"memory {spec.get('gib_per_unit', 0):g} GiB. {evicted}")


def _speed_text(spec: dict[str, Any]) -> str:
    """What a fixed cluster's speed options did to its machines (pipeline.replay.speeds)."""
    parts = []
    fraction = float(spec.get("slow_fraction") or 0.0)
    if fraction > 0:
        parts.append(f" A share of {fraction:.0%} of the machines (chosen by the seed, the same "
                     f"for every policy) runs {float(spec.get('slow_factor', 2.5)):g} times "
                     "slower than the rest.")
    if spec.get("platform_speed"):
        parts.append(f" Machine speeds by platform: {spec['platform_speed']}.")
    return "".join(parts)


def _elastic_line(spec: dict[str, Any], price: str) -> str:
    if "node_cpu" not in spec:
        return f"Elastic cluster: nodes added and released by an autoscaler. {price}."
    return (
        f"Elastic cluster: identical nodes of {spec['node_cpu']:g} cpu and "
        f"{spec['node_mem']:g} memory (trace units), {spec['min_nodes']} to "
        f"{spec['max_nodes']} nodes ({spec['initial_nodes']} at the start); a request waiting "
        f"{duration(spec['upscale_wait_s'])} triggers an upscale by the nodes the waiting "
        f"requests need, each billed from the request and ready "
        f"{duration(spec['boot_delay_s'])} later; a node idle for {duration(spec['idle_s'])} "
        f"is released. Elastic nodes never fail. {price}.")


def seed_line(runs: pl.DataFrame) -> str:
    seeds = sorted(set(runs["seed"].to_list()))
    return (f"Seeds: {', '.join(str(s) for s in seeds)}"
            + ("; figures are means over seeds." if len(seeds) > 1 else "."))


def empty_metric_lines(summary: pl.DataFrame) -> list[str]:
    """For each metric empty in every run, why (e.g. no measured usage in the trace)."""
    lines = []
    for metric, why in EMPTY_REASONS.items():
        if metric in summary.columns and summary[metric].null_count() == summary.height:
            lines.append(f"{metric.replace('_p95_s', '').replace('_cpu', '')} is empty: {why}.")
    return lines


def settings_text(settings: Any) -> str:
    """A run's settings, compactly: those set or read from a file (defaults left out)."""
    if isinstance(settings, str):
        settings = json.loads(settings or "{}")
    parts = []
    for name, entry in sorted((settings or {}).items()):
        if entry.get("source") == "default":
            continue
        value = entry.get("value")
        if isinstance(value, dict):
            value = " ".join(f"{k.removeprefix('root.')}:{v}" for k, v in value.items())
        parts.append(f"{name}={value}")
    return "; ".join(parts) or "defaults"


def sources_text(settings: Any) -> str:
    """Where a run's non-default settings came from (files and properties, or 'set')."""
    if isinstance(settings, str):
        settings = json.loads(settings or "{}")
    files = sorted({str(e.get("source", "")).split(":")[0].split(" (")[0]
                    for e in (settings or {}).values()
                    if e.get("source") not in ("default", "set")})
    return ", ".join(files) if files else "parameters"


def settings_table(summary: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Per setting: the settings its runs used (the same on every cluster and seed, as a
    rule: one row then) and where they came from."""
    joined = summary.select("run_id", "label").join(
        runs.select("run_id", "settings"), on="run_id", how="left")
    return joined.select(
        pl.col("label").str.replace(r" \[[^\]]+\]$", "").alias("Setting"),
        pl.col("settings").map_elements(settings_text, return_dtype=pl.String)
        .alias("Settings used (set or from files)"),
        pl.col("settings").map_elements(sources_text, return_dtype=pl.String)
        .alias("From"),
    ).unique().pipe(palette.by_label, "Settings used (set or from files)", column="Setting")
