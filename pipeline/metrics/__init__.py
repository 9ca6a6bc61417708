"""Per-run metrics computed from a run's ``task_runs`` and ``node_intervals`` (polars)."""

from pipeline.metrics.table import METRICS, metrics_table

__all__ = ["METRICS", "metrics_table"]
