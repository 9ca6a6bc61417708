"""The sections of a trace's report, answer first (pure functions of one trace's data).

1. The answer: the headline sentence (:mod:`.headline`), savings against the status quo per
   setting, fixed and elastic apart, and the trade-off table.
2. What the numbers assume (:mod:`.assumptions`), with each run's settings folded away.
3. What the replays show (:mod:`.observations`, and :mod:`.locality` on data locality).
4. The distributions of job completion and wait, the schedulers compared per cluster, the
   queues, data locality (traces with input data only), over-subscription (traces with
   opportunistic-container runs only: :mod:`.opportunistic`), speculation (traces with
   speculative-execution runs only: :mod:`.speculation`), Kubernetes (traces with Cluster
   Autoscaler runs only: :mod:`.kubernetes`), capacity over time,
   utilization, fairness, and the work left undone.
5. Every run (folded away).
Each section has at most one chart, a main table that fits the page (human column names,
rounded), and optional folded tables; every table is also written as CSV, unrounded.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.report import (
    answer_charts,
    charts,
    hpc,
    kubernetes,
    locality,
    locality_charts,
    opportunistic,
    opportunistic_charts,
    palette,
    speculation,
    speculation_charts,
)
from pipeline.report.assumptions import (
    cluster_lines,
    empty_metric_lines,
    seed_line,
    settings_table,
    trace_lines,
)
from pipeline.report.data import ReportData
from pipeline.report.glance import answer_glance
from pipeline.report.headline import DRAINED, FIXED, SAVINGS, headline
from pipeline.report.observations import observations
from pipeline.report.section import Section
from pipeline.report.tables import readable

ANSWER_COLUMNS = ["cluster_mode", "setting", "node_hours", "cost_usd", "cost_saved_pct",
                  "saved_usd_per_day", "jct_p95_s", "wait_p95_s", "jain_fairness",
                  "backlog_task_s", "qualifies"]
# every setting on the same machines: no savings columns (all zero, or not money)
SAME_BILL_COLUMNS = {
    FIXED: ["setting", "jct_p95_s", "wait_p95_s", "jain_fairness", "backlog_task_s",
            "qualifies"],
    DRAINED: ["setting", "makespan_s", "node_hours", "jct_p95_s", "wait_p95_s",
              "jain_fairness", "qualifies"],
}


def trace_sections(data: ReportData, tolerance: float = 0.1) -> list[Section]:
    """The sections for one trace (``data`` already restricted to it)."""
    trace = data.summary["trace"][0]
    info = data.traces_info.row(0, named=True) if data.traces_info.height else None
    window_s = _window_s(info, data.summary)
    answer = headline(data.summary, data.peaks, data.baseline, window_s, tolerance)
    labels = data.summary["label"].to_list()
    ordered = palette.by_label(palette.with_setting(answer.settings), first=[
        pl.col("cluster_mode").fill_null("fixed") != "fixed", pl.col("cost_usd")])
    chart = (answer_charts.savings_chart(answer.settings, labels) if answer.mode == SAVINGS
             else answer_charts.differences_chart(answer.settings, labels))
    columns = ANSWER_COLUMNS if answer.mode == SAVINGS else SAME_BILL_COLUMNS[answer.mode]
    sections = [
        Section("answer", "The answer", chart, readable(ordered, columns),
                answer_note(data.baseline, tolerance, answer.mode),
                lead=answer.sentence, raw=ordered,
                glance=answer_glance(answer, data.baseline, tolerance)),
        Section("assumptions", "What these numbers assume",
                bullets=tuple(trace_lines(info, trace, _drained(data.summary))
                              + cluster_lines(data.runs, data.summary, _drained(data.summary))
                              + [seed_line(data.summary)] + empty_metric_lines(data.summary)),
                details=(_detail("Every setting in full: what its runs used (set, or read "
                                 "from configuration files; defaults left out). Names "
                                 "elsewhere show the parameters that tell settings apart",
                                 settings_table(data.summary, data.runs)),)),
    ]
    seen = (observations(data.summary, data.queue_shares, data.comparison)
            + locality.locality_observation(data.summary, data.baseline))
    if seen:
        sections.append(Section("observations", "What the replays show",
                                bullets=tuple(seen)))
    if data.distributions.height:
        sections.append(Section(
            "distributions", "Job completion and task wait",
            answer_charts.distribution_chart(data.distributions, data.summary, labels,
                                           data.baseline),
            note=DISTRIBUTION_NOTE))
    sections += comparison_sections(data, labels)
    sections += locality_sections(data, labels)
    sections += oversubscription_sections(data, labels)
    sections += speculation_sections(data, labels)
    sections += hpc.hpc_sections(data, labels)
    sections += kubernetes.kubernetes_sections(data)
    sections += capacity_sections(data, labels)
    sections.append(Section(
        "backlog", "Work not done", None,
        readable(palette.by_label(data.summary), BACKLOG_COLUMNS), BACKLOG_NOTE,
        raw=data.summary.select(["run_id", *BACKLOG_COLUMNS])))
    sections.append(Section("runs", "Every run", details=(_detail(
        "Runs, their settings and identity", palette.by_label(data.summary, "seed").select(
            "run_id", "label", "seed", "params_text"), raw=True),)))
    return sections


def _drained(summary: pl.DataFrame) -> bool:
    """Whether the trace's runs went on until every task ended."""
    return "drained" in summary.columns and bool(summary["drained"].fill_null(False).any())


def _window_s(info: dict[str, object] | None, summary: pl.DataFrame) -> float:
    if info and info.get("window_end_s") is not None:
        return float(info["window_end_s"]) - float(info.get("window_start_s") or 0.0)
    ends = summary["measured_to_s"].drop_nulls() if "measured_to_s" in summary.columns else []
    return float(max(ends)) if len(ends) else 86_400.0


def _detail(title: str, frame: pl.DataFrame, raw: bool = False
            ) -> tuple[str, pl.DataFrame, pl.DataFrame]:
    shown = readable(frame, frame.columns) if raw else frame
    return (title, shown, frame)


MODE_NOTES = {
    SAVINGS: (
        "paid for over the trace's window. On the fixed cluster every policy pays for the "
        "same machines, so its savings are zero by construction (the chart leaves that "
        "panel out): what differs there is job time, waiting, fairness and the work left "
        "undone. "),
    FIXED: (
        "paid for over the trace's window. Every setting of this trace runs on those same "
        "machines, so all pay the same and none saves: the chart and the table show what "
        "differs instead (p95 job completion and wait, fairness, the work left undone). "),
    DRAINED: (
        "and these runs went on past the trace's window until every task ended (drain). "
        "Every setting runs on the same machines, which cost the same whatever the schedule: "
        "node-hours here are the time until each run's last task ended (its makespan), so "
        "fewer of them are machines free sooner for other work, not money saved unless the "
        "machines are rented by the hour. "),
}


def answer_note(baseline: str, tolerance: float, mode: str = SAVINGS) -> str:
    tol = f"{100 * tolerance:.0f}%"
    money = ("Saved per day divides the saving by the window's length; a month is 30 days. "
             if mode == SAVINGS else "")
    return (
        f"The status quo is {baseline} on the trace's own machines (the fixed cluster), "
        f"{MODE_NOTES[mode]}A setting is within "
        f"tolerance when its p95 job time is at most {tol} above the status quo's and it "
        f"leaves at most {tol} more work undone at the window's end (faded bars: beyond). "
        f"{money}recorded, where present, replays the trace's own decisions (each task on "
        "the machine and at the time the trace records): a reference for what the real "
        "cluster did, never a choice (no tolerance verdict)."
    )


DISTRIBUTION_NOTE = (
    "Each line is one setting's cumulative distribution: the share of jobs completed (tasks "
    "started) within a given time. Lines further left are faster; where a line meets 100% "
    "is its slowest job (longest wait). Elastic clusters add the autoscaler's reaction "
    "(the upscale wait plus the boot delay) to waits that need a new node."
)
BACKLOG_COLUMNS = ["label", "seed", "tasks_finished", "tasks_unfinished", "backlog_tasks",
                   "backlog_task_s", "tasks_censored", "tasks_unschedulable", "wasted_task_s"]
BACKLOG_NOTE = (
    "A cheaper setting that leaves work undone is not a saving. Unfinished tasks were still "
    "running or waiting at the window's end; work left counts the task-hours they still had "
    "to do. 'Still running in the trace' are tasks the trace itself saw running at its "
    "window's end (their true length is unknown; they run to the window's end). Tasks that "
    "fit nowhere ask for more than any node has."
)
COMPARISON_COLUMNS = ["label", "node_hours", "jct_p50_s", "jct_p95_s", "wait_p95_s",
                      "jain_fairness", "preemptions", "preemption_wasted_task_s",
                      "min_share_of_guarantee", "jain_queues"]
COMPARISON_NOTE = (
    "Every setting on this cluster, side by side (panels with nothing to show are left "
    "out). Fairness is Jain's index across users of what each held against its fair share "
    "given what it asked for (1 = nobody held back beyond a fair division). For queue "
    "schedulers, 'lowest queue vs guarantee' is the smallest mean dominant share over "
    "guaranteed share among the leaves that ran work (above 1 = borrowing idle capacity), "
    "and queue fairness is Jain's index across leaves of the part of its guarantee each "
    "got, up to what it asked for. docs/metrics.md defines every figure."
)
QUEUE_NOTE = (
    "Each leaf queue's share of the provisioned cluster over time (line: the larger of its "
    "cpu and memory shares, what dominant-resource queues are guaranteed) against its "
    "guaranteed share (dashed), and how long its tasks waited. A line above its guarantee "
    "borrows idle capacity; below it while the queue has work waiting, the queue is short "
    "of its guarantee and preemption (when on) takes containers back for it."
)


def comparison_sections(data: ReportData, labels: list[str]) -> list[Section]:
    """Per cluster: every run side by side, then the queues of the queue-based runs."""
    sections = []
    for cluster in data.clusters():
        runs = data.comparison.filter(pl.col("cluster") == cluster)
        key = section_key(cluster)
        sections.append(Section(
            f"schedulers-{key}", f"Schedulers compared on the {cluster} cluster",
            charts.scheduler_comparison_chart(runs, labels),
            readable(palette.by_label(runs), COMPARISON_COLUMNS), COMPARISON_NOTE, raw=runs,
            details=(("Every column", readable(palette.by_label(runs), runs.columns), runs),)))
        queue_runs = runs.filter(pl.col("has_queues"))
        if queue_runs.height and data.has_queues:
            ids = queue_runs["run_id"].implode()
            waits = data.queue_waits.filter(pl.col("run_id").is_in(ids)).join(
                data.summary.select("run_id", "label", "cluster_mode"), on="run_id")
            queues = queue_table(data.queue_summary, queue_runs)
            sections.append(Section(
                f"queue-shares-{key}", f"Queues against their guarantees ({cluster} cluster)",
                charts.queue_share_chart(data.queue_shares.filter(pl.col("run_id").is_in(ids))),
                readable(queues, QUEUE_COLUMNS), QUEUE_NOTE, raw=queues))
            if waits.height:
                sections.append(Section(
                    f"queue-waits-{key}", f"How long each queue waited ({cluster} cluster)",
                    answer_charts.queue_wait_chart(waits, labels),
                    readable(palette.by_label(waits, "queue"), QUEUE_WAIT_COLUMNS), raw=waits))
    return sections


QUEUE_COLUMNS = ["label", "queue", "guaranteed_share", "mean_dominant_share",
                 "dominant_share_of_guarantee", "tasks", "preemptions",
                 "preemption_wasted_task_s"]
QUEUE_WAIT_COLUMNS = ["label", "queue", "tasks", "wait_p50_s", "wait_p95_s", "wait_max_s",
                      "jct_p95_s", "backlog_task_s"]


def section_key(text: str) -> str:
    """``text`` as a section key (HTML id and chart file name part)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "cluster"


def queue_table(queue_summary: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Per queue-based run and leaf: share against guarantee, preemptions, waits, fairness."""
    return (
        queue_summary.join(runs.select("run_id", "label", "seed"), on="run_id")
        .select("label", "seed", "queue", "guaranteed_share", "mean_dominant_share",
                "peak_dominant_share", "dominant_share_of_guarantee", "mean_mem_share",
                "tasks", "preemptions", "preemption_wasted_task_s", "wasted_task_s",
                "job_start_wait_mean_s", "jain_users_usage", "jain_queues")
        .pipe(palette.by_label, "seed", "queue")
    )


def locality_sections(data: ReportData, labels: list[str]) -> list[Section]:
    """Where tasks read their input data per setting (with the trade-off along a delay
    setting when the runs vary one), then by job size; none when no run measured locality."""
    if not locality.has_locality(data.summary):
        return []
    rows = locality.settings_with_locality(data.summary)
    sweep = locality.delay_sweep(rows)
    raw = rows.drop("params")
    sections = [Section(
        "locality", "Data locality",
        None if sweep is None else locality_charts.tradeoff_chart(sweep, labels),
        readable(raw, locality.table_columns(raw)), locality.locality_note(data.runs, sweep),
        raw=raw)]
    bins = locality.job_size_bins(data, rows)
    if bins.height:
        sections.append(Section(
            "locality-job-size", "Data locality by job size",
            locality_charts.job_size_chart(bins, labels), locality.job_size_table(bins),
            locality.JOB_SIZE_NOTE, raw=bins))
    return sections


def oversubscription_sections(data: ReportData, labels: list[str]) -> list[Section]:
    """Opportunistic containers and over-allocation against the same runs without them:
    utilization gained and what it cost; none when no run of the trace used them."""
    if not opportunistic.has_opportunistic(data.opportunistic):
        return []
    rows = opportunistic.settings_table(data.opportunistic)
    return [Section(
        "oversubscription", "Over-subscription",
        opportunistic_charts.gain_loss_chart(rows, labels), opportunistic.table(rows),
        opportunistic.NOTE, lead=opportunistic.payer_paragraph(rows), raw=rows,
        glance=opportunistic.glance(rows))]


def speculation_sections(data: ReportData, labels: list[str]) -> list[Section]:
    """Speculative execution against the same runs without it: job completion time gained
    and the extra capacity the copies used; none when no run of the trace used it."""
    if not speculation.has_speculation(data.speculation):
        return []
    effect = speculation.with_varying_settings(data.speculation)
    rows = speculation.settings_table(effect)
    runs = speculation.runs_table(effect, rows)
    chart = (speculation_charts.tradeoff_chart(rows, labels)
             if speculation_charts.points(rows).height else None)
    return [Section(
        "speculation", "Speculation", chart, speculation.readable_runs(runs),
        speculation.NOTE, lead=speculation.summary_line(rows), raw=runs,
        glance=speculation.glance(rows),
        details=(("Per setting, averaged over seeds", speculation.readable_runs(
            rows, speculation.SETTING_COLUMNS), rows),))]


def capacity_sections(data: ReportData, labels: list[str]) -> list[Section]:
    """Capacity over time, utilization and fairness against waiting."""
    peaks = data.peaks.join(data.summary.select("run_id", "label", "seed", "util_alloc_cpu",
                                                "util_alloc_mem", "util_used_cpu",
                                                "util_used_mem", "node_hours"), on="run_id")
    window_h = max(_window_s(None, data.summary) / 3600, 1e-9)
    peaks = peaks.with_columns((pl.col("node_hours") / window_h).alias("mean_nodes"))
    return [
        Section("provisioned-nodes", "Provisioned nodes over time",
                charts.provisioned_nodes_chart(data.utilization, labels),
                readable(palette.by_label(peaks), ["label", "seed", "mean_nodes", "peak_nodes"]),
                "Identical lines (the fixed cluster is the same machines under every "
                "policy) are drawn once. Peaks are true peaks, from every change.",
                raw=peaks),
        Section("allocated-capacity", "Allocated capacity over time",
                charts.allocated_capacity_chart(data.utilization, labels, data.baseline)),
        Section("utilization", "Utilization", charts.utilization_chart(data.summary, labels),
                readable(palette.by_label(data.summary), ["label", "seed", "util_alloc_cpu",
                                                      "util_alloc_mem", "util_used_cpu",
                                                      "util_used_mem"])),
        Section("fairness-wait", "Fairness against waiting",
                charts.fairness_wait_chart(data.fairness, labels),
                readable(palette.by_label(data.fairness), [
                    "label", "seed", "jain_fairness", "jain_equal_share", "wait_p50_s",
                    "wait_p95_s", "jct_p95_s"]), FAIRNESS_NOTE),
    ]


FAIRNESS_NOTE = (
    "Fairness is Jain's index across users of what each user held over its fair share (its "
    "DRF share of the capacity given what every user asked for), time-weighted: 1 means "
    "every user got its fair share. The equal-share index compares users' dominant shares "
    "with an equal share whatever they asked for, so it also falls when users simply ask "
    "for different amounts."
)
