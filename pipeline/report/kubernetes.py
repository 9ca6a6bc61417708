"""The Kubernetes section of a trace's report: kube-scheduler's scoring strategies and
Cluster Autoscaler's and Karpenter's setups on priced instance types, against the status
quo a platform team runs today (the default scheduler, LeastAllocated, with Cluster
Autoscaler on one node group), at what cost, what pod scheduling latency and what
evictions.

Rows come from the ``kubernetes_comparison`` view (one per run) and ``instance_type_cost``
(one per run and instance type); settings run with several seeds are averaged.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from pipeline.report.charts import WIDTH
from pipeline.report.data import ReportData
from pipeline.report.section import Glance, Section
from pipeline.report.tables import duration, readable, usd

COLUMNS = ["setting", "node_hours", "cost_usd", "k8s_saved_pct",
           "wait_p50_s", "wait_p95_s", "jct_p95_s", "pods_evicted", "pods_preempted",
           "wasted_task_s", "backlog_task_s"]
MEANS = ["node_hours", "cost_usd", "cost_saved_pct", "wait_p50_s", "wait_p95_s",
         "jct_p95_s", "pods_evicted", "pods_preempted", "wasted_task_s", "backlog_task_s",
         "nodes_added", "nodes_deleted", "status_quo_cost_usd", "status_quo_wait_p95_s"]
TYPE_COLUMNS = ["setting", "instance_type", "instances", "node_hours", "cost_usd", "cost_share"]
NOTE = (
    "kube-scheduler (v1.31 scoring) with Cluster Autoscaler (CA, v1.31 defaults unless the "
    "setting says) or Karpenter (v1.14, its NodePool's consolidation policy), buying the "
    "catalog's instance types at their list prices (configs/instance-types-aws.csv). "
    "Status quo: LeastAllocated, the default, on CA with one node group and the default "
    "expander. Pod wait: submission to start (pods that need a new node wait for its "
    "boot). Evictions: pods on the nodes CA's scale-down or Karpenter's consolidation "
    "deleted; they restart from scratch elsewhere, so their run so far is work lost. "
    "Preempted: pods kube-scheduler's DefaultPreemption stopped for higher-priority ones "
    "(the trace's tiers); they restart too. "
    "'No eviction': every pod annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "
    "\"false\", so only empty nodes go. docs/families/cluster-autoscaler.md and "
    "karpenter.md list what is modelled.")
HEIGHT_PER_SETTING = 26


def kubernetes_sections(data: ReportData) -> list[Section]:
    """The Kubernetes section, when the trace has Cluster Autoscaler or Karpenter runs."""
    if data.kubernetes.height == 0:
        return []
    rows = per_setting(data.kubernetes)
    types = per_type(data.instance_types, data.kubernetes)
    return [Section(
        "kubernetes", "Kubernetes: scheduler scoring and node autoscaling",
        cost_by_type_chart(types, rows) if types.height else None,
        readable(rows, COLUMNS), NOTE, lead=lead(rows), raw=rows,
        glance=glance(rows),
        details=(("Cost per instance type", readable(types, TYPE_COLUMNS), types),))]


def per_setting(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per setting (label): the mean over its seeds, cheapest first; ``setting``
    names it as the section does (``MostAllocated on CA 4 types least-waste``)."""
    named = runs.with_columns(setting_name())
    return (named.group_by("label", "setting", "scoring", "cluster_label", maintain_order=True)
            .agg(pl.col("is_status_quo").any(), pl.len().alias("seeds"),
                 *[pl.col(c).mean() for c in MEANS])
            .sort("cost_usd", "label")
            .rename({"cost_saved_pct": "k8s_saved_pct"}))


def setting_name() -> pl.Expr:
    """``<scoring> on <cluster label>``, the setting's name in this section."""
    return pl.format("{} on {}", pl.col("scoring"),
                     pl.col("cluster_label").fill_null("Cluster Autoscaler")).alias("setting")


def per_type(types: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """One row per setting and instance type: instances, node-hours and cost (mean over
    seeds), and the type's share of the setting's cost."""
    if types.height == 0:
        return types
    joined = types.join(runs.with_columns(setting_name()).select("run_id", "setting"),
                        on="run_id")
    # sorted before the share is taken: a sum's last digits depend on its order, and the
    # groups come in any order
    out = (joined.group_by("setting", "instance_type")
           .agg(pl.col("instances", "node_hours", "cost_usd").mean())
           .sort("setting", "instance_type"))
    total = pl.col("cost_usd").sum().over("setting")
    return (out.with_columns((pl.col("cost_usd") / total).alias("cost_share"))
            .sort(total, "setting", pl.col("cost_usd"), descending=[False, False, True]))


def cost_by_type_chart(types: pl.DataFrame, rows: pl.DataFrame) -> alt.Chart:
    """Each setting's cost as a bar split by instance type, cheapest setting first."""
    order = rows["setting"].to_list()
    return alt.Chart(types).mark_bar().encode(
        y=alt.Y("setting:N", sort=order, title=None, axis=alt.Axis(labelLimit=420)),
        x=alt.X("sum(cost_usd):Q", title="cost over the window (USD)",
                axis=alt.Axis(format="$,.0f")),
        color=alt.Color("instance_type:N", title="instance type"),
        order=alt.Order("cost_usd:Q", sort="descending"),
        tooltip=["setting:N", "instance_type:N", alt.Tooltip("instances:Q", format=",.0f"),
                 alt.Tooltip("node_hours:Q", format=",.0f", title="node-hours"),
                 alt.Tooltip("cost_usd:Q", format="$,.0f", title="cost"),
                 alt.Tooltip("cost_share:Q", format=".0%", title="share of the cost")],
    ).properties(width=WIDTH, height=HEIGHT_PER_SETTING * max(len(order), 2),
                 title=alt.TitleParams("Cost per setting, by instance type",
                                       subtitle="cheapest first"))


def lead(rows: pl.DataFrame) -> str:
    """The cheapest setting against the status quo: cost, pod latency and evictions."""
    ref = _status_quo(rows)
    best = rows.row(0, named=True)
    if ref is None:
        return (f"{best['setting']} costs least here ({usd(best['cost_usd'])}); no run of "
                "the status quo (LeastAllocated, one node group) is there to compare with.")
    if best["label"] == ref["label"]:
        return (f"The status quo, {ref['setting']}, costs least here "
                f"({usd(ref['cost_usd'])}, p95 pod wait {duration(ref['wait_p95_s'])}).")
    return (f"Against the Kubernetes status quo, {ref['setting']} "
            f"({usd(ref['cost_usd'])}, p95 pod wait {duration(ref['wait_p95_s'])}), "
            f"{best['setting']} costs {usd(best['cost_usd'])} "
            f"({best['k8s_saved_pct']:.1f}% less) with p95 pod wait "
            f"{duration(best['wait_p95_s'])}. {_evictions(best, ref)} {_work_left(best, ref)}")


def glance(rows: pl.DataFrame) -> Glance | None:
    """The first page's line: which scoring and autoscaler setup costs least."""
    ref = _status_quo(rows)
    if ref is None:
        return None
    best = rows.row(0, named=True)
    if best["label"] == ref["label"]:
        answer = f"Keep the default: {ref['setting']} costs least ({usd(ref['cost_usd'])})."
    else:
        answer = (f"{best['setting']}: {usd(best['cost_usd'])} against "
                  f"{usd(ref['cost_usd'])} for {ref['setting']} "
                  f"({best['k8s_saved_pct']:.1f}% less).")
    caveat = _evictions(best, ref)
    if (best["backlog_task_s"] or 0.0) > (ref["backlog_task_s"] or 0.0):
        caveat += " " + _work_left(best, ref)  # cheaper partly by doing less by the end
    return Glance("Which Kubernetes scoring and autoscaler setup costs least?", answer, caveat)


def _status_quo(rows: pl.DataFrame) -> dict[str, Any] | None:
    ref = rows.filter(pl.col("is_status_quo"))
    return ref.row(0, named=True) if ref.height else None


def _evictions(row: dict[str, Any], ref: dict[str, Any]) -> str:
    """What the autoscaler's deletions did to pods in ``row``'s setting, against the status
    quo's."""
    evicted, lost = row["pods_evicted"] or 0.0, (row["wasted_task_s"] or 0.0) / 3600
    preempted = row.get("pods_preempted") or 0.0
    by = (f" and preemption stopped {preempted:,.0f} for higher-priority pods"
          if preempted else "")
    if evicted == 0 and not preempted:
        return "Its node deletions evicted no pod, and no pod was preempted."
    return (f"Its node deletions evicted {evicted:,.0f} pods{by}, throwing away "
            f"{lost:,.0f} task-hours of their runs (status quo: "
            f"{ref['pods_evicted'] or 0:,.0f} evicted, "
            f"{ref.get('pods_preempted') or 0:,.0f} preempted).")


def _work_left(row: dict[str, Any], ref: dict[str, Any]) -> str:
    """The work ``row``'s setting left undone at the window's end, against the status quo."""
    left, ref_left = (row["backlog_task_s"] or 0.0) / 3600, (ref["backlog_task_s"] or 0.0) / 3600
    return (f"It leaves {left:,.0f} task-hours of work undone at the window's end "
            f"(status quo: {ref_left:,.0f}).")
