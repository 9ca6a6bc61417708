"""Alibaba batch DAGs: task numbers and parents parsed from task names, with counted repairs.

Source: alibaba/clusterdata ``cluster-trace-v2018/trace_2018.md`` section 2.3.  A DAG task name
is a letter prefix, the task's number and the numbers of the tasks it depends on, joined by
``_``: ``M1`` is task 1 with no parents, ``M2_1`` task 2 after task 1, ``M5_3_4`` task 5 after
tasks 3 and 4.  Only the digits matter; the leading letters (``M``, ``R``, ``J``...) do not.
Non-DAG tasks have random names (``task_Nzg3ODAw...==``) and are independent.

Names that fit neither form are repaired, never guessed at, and counted by reason:

- ``unparsed_task_name``: anything else (``MergeTask``, ``M_``, numbers over 9 digits) is
  treated as an independent task;
- ``self_dependency``: a task listing its own number (``J3_3``) loses that edge;
- ``missing_parent``: a parent number no DAG task of the same job carries loses that edge;
- ``dependency_cycle``: tasks on a cycle (``M1_2`` with ``M2_1``) lose their edges to each
  other, so every job is a DAG the replay can finish.

When two tasks of a job share a number (``M1`` and ``R1``), a child of that number depends on
both.  All functions are pure: polars frames in, polars frames and counts out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

DAG_NAME = r"^[A-Za-z]+\d{1,9}(?:_\d{1,9})*$"
INDEPENDENT_PREFIX = "task_"
KEYS = ("job_id", "task_name")


@dataclass(frozen=True)
class Dag:
    """Resolved DAG of many jobs: one row per edge, one level per task, repairs by reason."""

    edges: pl.DataFrame  # job_id, task_name, parent_name
    levels: pl.DataFrame  # job_id, task_name, level (0 = no parents; else 1 + max parent level)
    repairs: dict[str, int] = field(default_factory=dict)


def parse_task_names(names: pl.Series) -> pl.DataFrame:
    """``task_name``, ``task_num`` (null if independent), ``parent_nums`` and ``name_kind``.

    ``name_kind`` is ``dag``, ``independent`` (the documented ``task_...`` form) or
    ``malformed`` (neither; treated as independent).
    """
    name = pl.col("task_name")
    is_dag = name.str.contains(DAG_NAME)
    nums = name.str.extract_all(r"\d+").cast(pl.List(pl.Int64))
    kind = (
        pl.when(is_dag).then(pl.lit("dag"))
        .when(name.str.starts_with(INDEPENDENT_PREFIX)).then(pl.lit("independent"))
        .otherwise(pl.lit("malformed"))
    )
    return pl.DataFrame({"task_name": names.cast(pl.String)}).select(
        name,
        pl.when(is_dag).then(nums.list.first()).alias("task_num"),
        pl.when(is_dag).then(nums.list.slice(1)).otherwise(pl.lit([], pl.List(pl.Int64)))
        .alias("parent_nums"),
        kind.alias("name_kind"),
    )


def resolve_dag(tasks: pl.DataFrame) -> Dag:
    """Resolve the DAG of every job in ``tasks`` (columns ``job_id``, ``task_name``; unique)."""
    parsed = pl.concat(
        [tasks.select(KEYS), parse_task_names(tasks["task_name"]).drop("task_name")],
        how="horizontal",
    )
    repairs = {"unparsed_task_name": int((parsed["name_kind"] == "malformed").sum())}
    wanted = (
        parsed.filter(pl.col("name_kind") == "dag")
        .select(*KEYS, "task_num", pl.col("parent_nums").alias("parent_num"))
        .explode("parent_num").drop_nulls("parent_num").unique()
    )
    self_dep = wanted["task_num"] == wanted["parent_num"]
    repairs["self_dependency"] = _tasks_in(wanted.filter(self_dep))
    wanted = wanted.filter(~self_dep)
    numbers = parsed.filter(pl.col("name_kind") == "dag").select(
        "job_id", pl.col("task_num").alias("parent_num"), pl.col("task_name").alias("parent_name"),
    )
    missing = wanted.join(numbers, on=["job_id", "parent_num"], how="anti")
    repairs["missing_parent"] = _tasks_in(missing)
    edges = (
        wanted.join(numbers, on=["job_id", "parent_num"], how="inner")
        .filter(pl.col("parent_name") != pl.col("task_name"))
        .select(*KEYS, "parent_name").unique().sort(*KEYS, "parent_name")
    )
    edges, cyclic = _break_cycles(tasks.select(KEYS), edges)
    repairs["dependency_cycle"] = cyclic
    levels = dag_levels(tasks.select(KEYS), edges)[0]
    return Dag(edges=edges, levels=levels, repairs={k: v for k, v in repairs.items() if v})


def dag_levels(nodes: pl.DataFrame, edges: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Topological level of each node, and the edges left unresolved (on or behind a cycle).

    Level 0 has no parents; otherwise level = 1 + the highest parent level (longest path from
    a root).  One join per level, over the still-pending edges only.
    """
    children = edges.select(KEYS).unique()
    resolved = nodes.select(KEYS).unique().join(children, on=list(KEYS), how="anti")
    resolved = resolved.with_columns(pl.lit(0, pl.Int64).alias("level"))
    pending = edges
    while pending.height:
        parent_levels = resolved.select(
            "job_id", pl.col("task_name").alias("parent_name"), pl.col("level").alias("p_level"),
        )
        ready = (
            pending.join(parent_levels, on=["job_id", "parent_name"], how="left")
            .group_by(KEYS)
            .agg(pl.col("p_level").is_not_null().all().alias("ready"),
                 (pl.col("p_level").max() + 1).alias("level"))
            .filter(pl.col("ready")).drop("ready")
        )
        if not ready.height:
            break
        resolved = pl.concat([resolved, ready])
        pending = pending.join(ready.select(KEYS), on=list(KEYS), how="anti")
    return resolved.sort(*KEYS), pending


def _break_cycles(nodes: pl.DataFrame, edges: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Cut the edges between tasks that sit on a cycle; return edges and tasks repaired.

    A task on a cycle can be levelled neither from the roots (forward) nor from the leaves
    (backward); tasks merely behind or before a cycle keep their edges.
    """
    _, forward = dag_levels(nodes, edges)
    if not forward.height:
        return edges, 0
    reverse = edges.select(
        "job_id", pl.col("parent_name").alias("task_name"), pl.col("task_name").alias("parent_name")
    )
    _, backward = dag_levels(nodes, reverse)
    on_cycle = forward.select(KEYS).unique().join(
        backward.select(KEYS).unique(), on=list(KEYS), how="inner"
    )
    child = on_cycle.with_columns(pl.lit(True).alias("c"))
    parent = on_cycle.rename({"task_name": "parent_name"}).with_columns(pl.lit(True).alias("p"))
    marked = edges.join(child, on=list(KEYS), how="left").join(
        parent, on=["job_id", "parent_name"], how="left"
    )
    cut = marked["c"].fill_null(False) & marked["p"].fill_null(False)
    return marked.filter(~cut).select(edges.columns), _tasks_in(marked.filter(cut))


def _tasks_in(frame: pl.DataFrame) -> int:
    return frame.select(KEYS).unique().height
