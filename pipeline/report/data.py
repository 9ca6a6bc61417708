"""What the report shows, read from the warehouse views as polars frames (I/O at this edge)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

import duckdb
import polars as pl

from pipeline.errors import TraceError, UsageError
from pipeline.report.names import short_labels
from pipeline.warehouse.db import connect, describe_error

VIEWS = ("policy_summary", "cost_savings", "utilization_over_time", "fairness_vs_wait",
         "unschedulable_work", "queue_share_over_time", "queue_summary",
         "scheduler_comparison", "trace_summary", "completion_cdf", "queue_waits",
         "run_peaks", "locality_by_job_size")
# views a warehouse loaded before they existed may lack (read as empty frames)
OPTIONAL_VIEWS = ("opportunistic_effect", "speculation_effect", "gpu_inflation", "gpu_summary",
                  "hpc_by_size", "kubernetes_comparison", "instance_type_cost")


@dataclass(frozen=True)
class ReportData:
    """The report views of one warehouse, for one baseline policy."""

    baseline: str
    summary: pl.DataFrame
    savings: pl.DataFrame
    utilization: pl.DataFrame
    fairness: pl.DataFrame
    unschedulable: pl.DataFrame
    queue_shares: pl.DataFrame = field(default_factory=pl.DataFrame)  # empty: no queues
    queue_summary: pl.DataFrame = field(default_factory=pl.DataFrame)
    comparison: pl.DataFrame = field(default_factory=pl.DataFrame)  # scheduler_comparison
    traces_info: pl.DataFrame = field(default_factory=pl.DataFrame)  # trace_summary
    distributions: pl.DataFrame = field(default_factory=pl.DataFrame)  # completion_cdf
    queue_waits: pl.DataFrame = field(default_factory=pl.DataFrame)
    peaks: pl.DataFrame = field(default_factory=pl.DataFrame)  # run_peaks
    runs: pl.DataFrame = field(default_factory=pl.DataFrame)  # runs: cluster and settings
    locality_bins: pl.DataFrame = field(default_factory=pl.DataFrame)  # locality_by_job_size
    # opportunistic_effect: runs with opportunistic containers beside their runs without
    opportunistic: pl.DataFrame = field(default_factory=pl.DataFrame)
    # speculation_effect: runs with speculative execution beside their runs without
    speculation: pl.DataFrame = field(default_factory=pl.DataFrame)
    # the GPU workload-inflation experiment (runs of mode 'inflation'): gpu_inflation, the
    # curve per arrived percent, and gpu_summary, per setting
    gpu_curve: pl.DataFrame = field(default_factory=pl.DataFrame)
    gpu_summary: pl.DataFrame = field(default_factory=pl.DataFrame)
    # hpc_by_size: traces from SWF logs, per setting and job size class
    hpc: pl.DataFrame = field(default_factory=pl.DataFrame)
    # kubernetes_comparison: Kubernetes runs against their status quo; instance_type_cost:
    # node-hours and cost per run and instance type
    kubernetes: pl.DataFrame = field(default_factory=pl.DataFrame)
    instance_types: pl.DataFrame = field(default_factory=pl.DataFrame)

    @property
    def has_queues(self) -> bool:
        """Whether any run here has queues (a queue-based policy)."""
        return self.queue_shares.height > 0

    def clusters(self) -> list[str]:
        """The clusters (``scheduler_comparison.cluster``) with runs: fixed first, then sorted."""
        if self.comparison.height == 0:
            return []
        names = self.comparison["cluster"].unique().to_list()
        return sorted(names, key=lambda c: (not c.startswith("fixed"), c))

    def traces(self) -> list[str]:
        """The traces with at least one run, sorted."""
        names = set(self.summary["trace"].to_list())
        if self.gpu_summary.height:
            names |= set(self.gpu_summary["trace"].to_list())
        return sorted(names)

    @property
    def has_replays(self) -> bool:
        """Whether any run here went through the event-driven replay (not inflation)."""
        return self.summary.height > 0

    def for_trace(self, trace: str) -> ReportData:
        """The same data restricted to one trace."""
        def only(frame: pl.DataFrame) -> pl.DataFrame:
            return frame.filter(pl.col("trace") == trace)

        def runs_of(frame: pl.DataFrame) -> pl.DataFrame:
            if frame.height == 0:
                return frame
            return frame.filter(pl.col("run_id").is_in(self.summary.filter(
                pl.col("trace") == trace)["run_id"].implode()))

        def maybe(frame: pl.DataFrame) -> pl.DataFrame:
            return only(frame) if frame.height else frame

        restricted = ReportData(self.baseline, only(self.summary), only(self.savings),
                          only(self.utilization), only(self.fairness), only(self.unschedulable),
                          maybe(self.queue_shares), runs_of(self.queue_summary),
                          maybe(self.comparison), maybe(self.traces_info),
                          maybe(self.distributions), maybe(self.queue_waits),
                          maybe(self.peaks), maybe(self.runs), maybe(self.locality_bins),
                          maybe(self.opportunistic), maybe(self.speculation),
                          maybe(self.gpu_curve), maybe(self.gpu_summary), maybe(self.hpc),
                          maybe(self.kubernetes), runs_of(self.instance_types))
        return restricted.with_short_labels()

    def with_short_labels(self) -> ReportData:
        """The same data with each run's label as the report names it
        (:func:`pipeline.report.names.short_labels`: the parameters that tell settings
        apart), in every frame's ``label`` and ``base_label``."""
        names = {old: new for old, new in short_labels(self.summary["label"].to_list()).items()
                 if old != new}
        if not names:
            return self

        def renamed(frame: pl.DataFrame) -> pl.DataFrame:
            return frame.with_columns(pl.col(c).replace(names) for c in ("label", "base_label")
                                      if c in frame.columns)

        return ReportData(self.baseline, *(renamed(getattr(self, f.name))
                                           for f in fields(self) if f.name != "baseline"))


def read_report_data(db: Path, baseline: str) -> ReportData:
    """Read every report view of warehouse ``db``, comparing costs against ``baseline``."""
    with connect(db, read_only=True) as con:
        # One thread sums floats in one order: the same warehouse gives the same report,
        # byte for byte (dvc.lock tracks it).
        con.execute("set threads = 1")
        if not _has_runs(con):
            raise TraceError("the warehouse holds no runs (load some with `tracereplay load`)",
                             db)
        policies = _policies(con)
        inflation = _inflation_runs(con)
        only_gpu = len(inflation) == con.execute("select count(*) from runs").fetchone()[0]
        if baseline not in policies and not only_gpu:
            raise UsageError(
                f"baseline policy {baseline!r} has no runs in the warehouse "
                f"(policies: {', '.join(policies)})", db, field="--baseline",
            )
        con.execute("set variable baseline_policy = ?", [baseline])
        frames = {view: _frame(con, view, db) for view in (*VIEWS, "runs")}
        frames |= {view: _frame(con, view, db) if _has_view(con, view) else pl.DataFrame()
                   for view in OPTIONAL_VIEWS}
    if inflation:  # the event-replay views leave the GPU experiment's runs out
        frames = {view: _without(frame, inflation) if view not in ("gpu_inflation",
                                                                    "gpu_summary") else frame
                  for view, frame in frames.items()}
    return ReportData(
        baseline,
        summary=frames["policy_summary"],
        savings=frames["cost_savings"],
        utilization=frames["utilization_over_time"],
        fairness=frames["fairness_vs_wait"],
        unschedulable=frames["unschedulable_work"],
        queue_shares=frames["queue_share_over_time"],
        queue_summary=frames["queue_summary"],
        comparison=frames["scheduler_comparison"],
        traces_info=frames["trace_summary"],
        distributions=frames["completion_cdf"],
        queue_waits=frames["queue_waits"],
        peaks=frames["run_peaks"],
        runs=frames["runs"],
        locality_bins=frames["locality_by_job_size"],
        opportunistic=frames["opportunistic_effect"],
        speculation=frames["speculation_effect"],
        gpu_curve=frames["gpu_inflation"],
        gpu_summary=frames["gpu_summary"],
        hpc=frames["hpc_by_size"],
        kubernetes=frames["kubernetes_comparison"],
        instance_types=frames["instance_type_cost"],
    )


def _inflation_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Run ids of the GPU workload-inflation experiment (none in older warehouses)."""
    columns = {r[0] for r in con.execute("describe runs").fetchall()}
    if "mode" not in columns:
        return []
    return [r[0] for r in con.execute(
        "select run_id from runs where mode = 'inflation' order by 1").fetchall()]


def _without(frame: pl.DataFrame, run_ids: list[str]) -> pl.DataFrame:
    """``frame`` without the rows of ``run_ids`` (frames without run ids as they are)."""
    if frame.height == 0 or "run_id" not in frame.columns:
        return frame
    return frame.filter(~pl.col("run_id").is_in(run_ids))


def _has_runs(con: duckdb.DuckDBPyConnection) -> bool:
    try:
        row = con.execute("select count(*) from runs").fetchone()
    except duckdb.CatalogException:
        return False
    return bool(row and row[0])


def _has_view(con: duckdb.DuckDBPyConnection, view: str) -> bool:
    rows = con.execute("select count(*) from duckdb_views() where view_name = ?",
                       [view]).fetchall()
    return bool(rows and rows[0][0])


def _policies(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("select distinct policy from runs order by 1").fetchall()]


def _frame(con: duckdb.DuckDBPyConnection, view: str, db: Path) -> pl.DataFrame:
    """All rows of ``view``, JSON columns as text."""
    try:
        table = con.sql(f'select * from "{view}"').to_arrow_table()
    except duckdb.Error as exc:
        raise TraceError(f"cannot read view {view}: {describe_error(exc)}", db) from exc
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    # sums of integers come back as decimals, which charts cannot serialize
    decimals = [c for c, t in zip(frame.columns, frame.dtypes, strict=True)
                if isinstance(t, pl.Decimal)]
    return frame.with_columns(pl.col(decimals).cast(pl.Float64)) if decimals else frame


def mean_over_seeds(frame: pl.DataFrame, values: list[str]) -> pl.DataFrame:
    """One row per (trace, policy, label): the mean of ``values`` over seeds, and the seed count."""
    keys = ["trace", "policy", "label"]
    present = [v for v in values if v in frame.columns]
    return (
        frame.group_by(keys, maintain_order=True)
        .agg([pl.col(v).cast(pl.Float64).mean() for v in present]
             + [pl.col("seed").n_unique().alias("seeds")])
        .sort(keys)
    )
