"""The data-locality part of a trace's report (pure functions of one trace's frames).

Shown only for a trace where some run measured locality (``locality_node`` not null: the
trace lists its tasks' ``inputs``, or a run laid input data out with ``dfs=hdfs``); for any
other trace nothing here appears and the report says nothing about locality.

- :func:`settings_with_locality`: per setting, where tasks read their input data, what
  crossed racks, job times and fairness (the section's table);
- :func:`delay_sweep`: the runs along a delay setting, when they vary one (its chart);
- :func:`job_size_bins`, :func:`job_size_table`: locality by job size
  (``locality_by_job_size``);
- :func:`locality_observation`: one sentence for the person paying for the cluster: the most
  local setting against the status quo, in reads across racks and job times.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.report import palette
from pipeline.report.data import ReportData, mean_over_seeds
from pipeline.report.headline import reference_policies, setting_name
from pipeline.report.tables import duration, gib, readable

MEASURES = ["locality_node", "locality_rack", "locality_any", "data_read_core_gb",
            "data_read_rack_gb", "jct_p50_s", "jct_p95_s", "jain_fairness", "preemptions",
            "solver_rounds", "solver_arcs_p50"]
TABLE_COLUMNS = ["label", *MEASURES]
# A parameter is a delay setting when its name says so (delay-scheduling's skip_count,
# node_wait_s and rack_wait_s; YARN's node-locality-delay) and the runs give it numbers.
DELAY_NAME = re.compile(r"skip|delay|wait", re.IGNORECASE)


def table_columns(rows: pl.DataFrame) -> list[str]:
    """:data:`TABLE_COLUMNS` less those that say nothing here: preemptions when no setting
    preempted, the flow solver's figures when no setting solves a flow."""
    quiet = [c for c in ("preemptions", "solver_rounds", "solver_arcs_p50")
             if c not in rows.columns
             or not (rows[c].cast(pl.Float64).fill_nan(None).fill_null(0.0) != 0).any()]
    return [c for c in TABLE_COLUMNS if c not in quiet]


def has_locality(summary: pl.DataFrame) -> bool:
    """Whether some run of ``summary`` measured data locality."""
    return "locality_node" in summary.columns and summary["locality_node"].drop_nulls().len() > 0


def settings_with_locality(summary: pl.DataFrame) -> pl.DataFrame:
    """One row per setting that measured locality: the means over seeds of ``MEASURES``, its
    policy, cluster and parameters (JSON), in reading order (fixed cluster first, then
    policy, then parameters with numbers compared as numbers)."""
    runs = summary.filter(pl.col("locality_node").is_not_null())
    means = mean_over_seeds(runs, MEASURES)
    firsts = runs.group_by("label", maintain_order=True).agg(
        pl.col("cluster_mode").first().fill_null("fixed"), pl.col("params").first())
    rows = palette.with_setting(means.join(firsts, on="label", how="left")).with_columns(
        pl.col("cluster_mode").alias("cluster"))
    order = sorted(range(rows.height), key=lambda i: (
        rows["cluster"][i] != "fixed", rows["cluster"][i], palette.natural_key(rows["label"][i])))
    return rows[order]


def _params(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """Each row's parameters as a dict (``params`` holds JSON text)."""
    return [json.loads(t) if isinstance(t, str) and t else {} for t in rows["params"]]


@dataclass(frozen=True)
class DelaySweep:
    """Runs of one policy along one delay setting (``knob``) on one cluster: ``points`` (one
    row per setting on a line, ``x`` the knob's value, ``series`` the line) and
    ``references`` (the cluster's other settings, drawn as levels to compare with)."""

    policy: str
    knob: str
    cluster: str
    points: pl.DataFrame
    references: pl.DataFrame


def delay_sweep(rows: pl.DataFrame) -> DelaySweep | None:
    """The delay setting the runs vary most (fixed cluster first), or None.

    Runs of a policy are grouped by its other varying parameters (``delay=skip`` and
    ``delay=time`` apart); a group whose runs take two or more numeric values of the knob
    is a line.  Runs where the knob does not vary (a ``delay=time`` run's ``skip_count``)
    are references, like the other policies.
    """
    best: tuple[int, str, str, str] | None = None
    for cluster in dict.fromkeys(rows["cluster"].to_list()):
        for policy in sorted(set(rows.filter(pl.col("cluster") == cluster)["policy"])):
            of = rows.filter((pl.col("cluster") == cluster) & (pl.col("policy") == policy))
            for knob in _knobs(_params(of)):
                lines = _lines(of, knob)
                width = max((len(set(xs)) for xs in lines.values()), default=0)
                if width >= 2 and (best is None or width > best[0]):
                    best = (width, cluster, policy, knob)
        if best is not None:
            break  # the fixed cluster (the status quo's) when it has one
    if best is None:
        return None
    _, cluster, policy, knob = best
    return _sweep(rows.filter(pl.col("cluster") == cluster), cluster, policy, knob)


def _knobs(params: list[dict[str, Any]]) -> list[str]:
    """Parameters named like a delay whose values are numbers and differ between runs."""
    names = sorted({k for p in params for k in p if DELAY_NAME.search(k)})
    return [k for k in names
            if len({p.get(k) for p in params if _number(p.get(k))}) >= 2]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _varying(params: list[dict[str, Any]]) -> list[str]:
    keys = sorted({k for p in params for k in p})
    return [k for k in keys if len({json.dumps(p.get(k)) for p in params}) > 1]


def _series_name(policy: str, params: dict[str, Any], others: list[str]) -> str:
    fixed = ",".join(f"{k}={params.get(k)}" for k in others)
    return f"{policy} {fixed}".strip()


def _lines(of: pl.DataFrame, knob: str) -> dict[str, list[float]]:
    """Series name -> the knob's numeric values on it (the policy's runs, grouped by their
    other varying parameters)."""
    params = _params(of)
    others = [k for k in _varying(params) if k != knob]
    lines: dict[str, list[float]] = {}
    for p in params:
        if _number(p.get(knob)):
            lines.setdefault(_series_name(of["policy"][0], p, others), []).append(
                float(p[knob]))
    return lines


def _sweep(rows: pl.DataFrame, cluster: str, policy: str, knob: str) -> DelaySweep:
    of = rows.filter(pl.col("policy") == policy)
    lines = {name for name, xs in _lines(of, knob).items() if len(set(xs)) >= 2}
    others = [k for k in _varying(_params(of)) if k != knob]
    params = _params(rows)
    names = [_series_name(policy, p, others) if name == policy else None
             for p, name in zip(params, rows["policy"].to_list(), strict=True)]
    tagged = rows.with_columns(
        pl.Series("series", names, pl.String),
        pl.Series("x", [float(p[knob]) if _number(p.get(knob)) else None for p in params],
                  pl.Float64))
    on_line = pl.col("series").is_in(sorted(lines)) & pl.col("x").is_not_null()
    return DelaySweep(policy, knob, cluster, tagged.filter(on_line).sort(["series", "x"]),
                      tagged.filter(~on_line).with_columns(pl.lit(None, pl.Float64).alias("x")))


def locality_note(runs: pl.DataFrame, sweep: DelaySweep | None) -> str:
    """What the locality table and chart show, and where the input data was."""
    parts = [
        "Among tasks that read input data and started: node-local ran on a machine holding "
        "their data, rack-local elsewhere in such a machine's rack, off-rack in another "
        "rack. Read across racks is input data that crossed the core switches, read via "
        "rack switch what went through a top-of-rack switch (GiB, every attempt). Job "
        "times and fairness as in the tables above; docs/metrics.md defines every figure."]
    dfs = _dfs_layout(runs)
    if dfs:
        parts.append(dfs)
    if sweep is not None:
        parts.append(
            f"The chart follows {sweep.policy} along {sweep.knob} on the {sweep.cluster} "
            "cluster (points on the grey line) and shows what each value gives in node-local "
            "tasks, p95 job time and fairness; dashed lines are the other settings.")
    parts.append("On an elastic cluster booted nodes hold no data: every read is off-rack.")
    if "policy" in runs.columns and "quincy" in runs["policy"].to_list():
        parts.append(
            "Quincy runs (Isard et al., SOSP 2009) solve one min-cost flow per scheduling round: "
            "Q without fairness, QF with each job's fair share of slots, QFP also preempting "
            "to reach it (preemptions counts them). Rounds and arcs per round (median) say how "
            "much the solver had to do; its wall-clock time is a measurement of the machine, "
            "not of the schedule, so it stays out of this report (which is the same on every "
            "run) and is in the warehouse: policy_summary.solver_ms_p50 and solver_ms_p99.")
    return " ".join(parts)


def _dfs_layout(runs: pl.DataFrame) -> str:
    """How runs with ``dfs=hdfs`` laid input data out, from the first such cluster."""
    for text in runs["cluster"].to_list() if "cluster" in runs.columns else []:
        spec = json.loads(text) if isinstance(text, str) else dict(text or {})
        if spec.get("dfs") == "hdfs":
            return (f"Where the trace does not say where data lives, runs with dfs=hdfs laid "
                    f"each job's input out as HDFS does: {spec.get('block_mb', 128):g} MiB "
                    f"blocks, {spec.get('replication', 3)} replicas placed rack-aware, racks "
                    f"of {spec.get('rack_size', 30)} machines where the trace names none.")
    return ""


JOB_SIZE_NOTE = (
    "Jobs binned by their number of tasks with input data (for MapReduce jobs, their maps), "
    "as the delay-scheduling paper (Zaharia et al., EuroSys 2010) bins Facebook's jobs: "
    "small jobs have few tasks to choose from and are where waiting for a local slot "
    "matters most. The table gives the node-local share per bin; tables/*.csv holds jobs, "
    "tasks and rack-local and off-rack shares per bin (view locality_by_job_size).")


def job_size_bins(data: ReportData, rows: pl.DataFrame) -> pl.DataFrame:
    """``locality_by_job_size`` per setting (means over seeds, weighted by tasks)."""
    bins = data.locality_bins
    if bins.height == 0:
        return pl.DataFrame()
    runs = data.summary.filter(pl.col("label").is_in(rows["label"].implode())).select(
        "run_id", "label", pl.col("cluster_mode").fill_null("fixed").alias("cluster"))
    share = [pl.col(c).cast(pl.Float64) * pl.col("tasks_with_inputs").cast(pl.Float64)
             for c in ("locality_node", "locality_rack", "locality_any")]
    joined = bins.join(runs, on="run_id").with_columns(share)
    per = joined.group_by(["label", "cluster", "bin", "bin_order"]).agg(
        pl.col("run_id").n_unique().alias("seeds"),
        pl.col("jobs").cast(pl.Float64).mean(),
        pl.col("tasks_with_inputs").cast(pl.Float64).sum().alias("tasks_total"),
        *(pl.col(c).sum() for c in ("locality_node", "locality_rack", "locality_any")))
    order = {label: i for i, label in enumerate(rows["label"].to_list())}
    return palette.with_setting(per.with_columns(
        *(pl.col(c) / pl.col("tasks_total") for c in ("locality_node", "locality_rack",
                                                       "locality_any")),
        (pl.col("tasks_total") / pl.col("seeds")).alias("tasks_with_inputs"),
        pl.col("label").replace_strict(order, return_dtype=pl.Int64).alias("order"),
    ).sort(["order", "bin_order"]).select(
        "label", "cluster", "bin", "bin_order", "jobs", "tasks_with_inputs",
        "locality_node", "locality_rack", "locality_any"))


def job_size_table(bins: pl.DataFrame) -> pl.DataFrame:
    """Settings as rows, job-size bins as columns, node-local shares as cells; a bin's
    title gives its jobs when every setting saw the same number."""
    titles = {}
    for name, group in bins.group_by("bin", maintain_order=True):
        jobs = set(group["jobs"].to_list())
        count = f" ({next(iter(jobs)):,.0f} jobs)" if len(jobs) == 1 else ""
        unit = "task" if name[0] == "1" else "tasks"
        titles[str(name[0])] = f"{name[0]} {unit}{count}"
    wide = bins.pivot(on="bin", index="label", values="locality_node",
                      sort_columns=False, maintain_order=True)
    shown = readable(wide, ["label"])
    in_order = bins.select("bin", "bin_order").unique().sort("bin_order")["bin"].to_list()
    for column in in_order:
        shown = shown.with_columns(pl.Series(
            titles[column], ["\u2013" if v is None else f"{100 * v:.1f}%"
                             for v in wide[column].to_list()], pl.String))
    return shown


def locality_observation(summary: pl.DataFrame, baseline: str) -> list[str]:
    """One sentence: the most node-local setting against the status quo (``baseline`` on the
    fixed cluster), in local reads, reads across racks and job times; [] without locality."""
    if not has_locality(summary):
        return []
    rows = settings_with_locality(summary)
    fixed = rows.filter(pl.col("cluster") == "fixed")
    rows = fixed if fixed.height else rows
    choices = rows.filter(~pl.col("policy").is_in(sorted(reference_policies())))
    status_quo = rows.filter(pl.col("policy") == baseline)
    ref = status_quo.row(0, named=True) if status_quo.height else None
    others = choices if ref is None else choices.filter(pl.col("label") != ref["label"])
    if others.height == 0:
        return [_alone(ref or rows.row(0, named=True))]
    best = others.with_columns(pl.col("jct_p95_s").fill_null(float("inf")).alias("_p95")).sort(
        ["locality_node", "_p95"], descending=[True, False]).row(0, named=True)
    if ref is None:  # no status quo with locality: the least local setting instead
        ref = rows.sort("locality_node").row(0, named=True)
        if ref["label"] == best["label"]:
            return [_alone(best)]
    return [_against(best, ref, baseline)]


def percent(value: object) -> str:
    """A share in whole percent, or to a tenth where that would round to 0% or 100%."""
    v = 100 * float(value)  # type: ignore[arg-type]
    whole = f"{v:.0f}"
    return f"{v:.1f}%" if whole in ("0", "100") and 0 < v < 100 else f"{whole}%"


def _alone(row: dict[str, Any]) -> str:
    read = row.get("data_read_core_gb")
    across = "" if read is None else f", and read {gib(read)} GiB of it across racks"
    return (f"{setting_name(row)} ran {percent(row['locality_node'])} of the tasks that read "
            f"input data on a machine holding that data{across}.")


def _against(best: dict[str, Any], ref: dict[str, Any], baseline: str) -> str:
    quo = " (the status quo)" if ref["policy"] == baseline else ""
    text = (f"{setting_name(best)} ran {percent(best['locality_node'])} of the tasks that read "
            f"input data on a machine holding that data, against {percent(ref['locality_node'])} "
            f"under {ref['label']}{quo}")
    before, after = ref.get("data_read_core_gb"), best.get("data_read_core_gb")
    if before is not None and after is not None:
        verb = "cut" if after <= before else "raised"
        text += f", and {verb} data read across racks from {gib(before)} GiB to {gib(after)} GiB"
    times = [f"{what} job time {duration(best[c])} instead of {duration(ref[c])}"
             for c, what in (("jct_p50_s", "median"), ("jct_p95_s", "p95"))
             if best.get(c) is not None and ref.get(c) is not None]
    return text + ("; " + ", ".join(times) if times else "") + "."
