"""The DuckDB warehouse: load run directories, keep the report views, run SQL.

Tables (``sql/schema.sql``): ``runs``, ``task_runs``, ``node_intervals``, ``metrics`` (the
contract's columns, plus any extra columns the run files bring) and ``settings`` (key,
value: ``baseline_policy``, default ``yarn-uniform``; ``max_time_buckets``, default 200).

``sql/`` is layered like jaffle_shop: ``staging/stg_*.sql`` rename and cast one run's files
on the way in; ``reports/NAME.sql`` is one query per output, each kept as view ``NAME``
(``policy_summary``, ``cost_savings``, ``utilization_over_time``, ``fairness_vs_wait``,
``unschedulable_work``, ``opportunistic_effect``, ``speculation_effect``, ...);
``checks/NAME.sql`` are queries that must return no rows, run on every load over the runs
loaded (``check_scope``) and on demand over all runs with ``sql``.

``cost_savings`` compares against the session variable ``baseline_policy`` when set, else
the stored setting (``load(..., baseline=...)`` changes it).
"""

from pipeline.warehouse.db import CheckFailure, connect, run_checks
from pipeline.warehouse.query import format_table, sql
from pipeline.warehouse.stage import load

__all__ = ["CheckFailure", "connect", "format_table", "load", "run_checks", "sql"]
