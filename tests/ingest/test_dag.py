"""Alibaba task-name DAGs: the published example, malformed names, and DAG invariants."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.dag import dag_levels, parse_task_names, resolve_dag

GOLDEN = ["M1", "M2_1", "M3_1", "R4_2", "M5_3_4"]


def _job(names: list[str], job: str = "j_1") -> pl.DataFrame:
    return pl.DataFrame({"job_id": [job] * len(names), "task_name": names})


def _edges(dag_edges: pl.DataFrame) -> set[tuple[str, str]]:
    return set(dag_edges.select("task_name", "parent_name").iter_rows())


def _level_sets(levels: pl.DataFrame) -> list[set[str]]:
    grouped = levels.group_by("level").agg("task_name").sort("level")
    return [set(names) for names in grouped["task_name"]]


def test_parse_published_examples() -> None:
    parsed = parse_task_names(pl.Series([*GOLDEN, "task_Nzg3ODAwNDgzMTAwNTc2NTQ2Mw=="]))
    rows = {r["task_name"]: (r["task_num"], r["parent_nums"], r["name_kind"])
            for r in parsed.iter_rows(named=True)}
    assert rows["M1"] == (1, [], "dag")
    assert rows["M2_1"] == (2, [1], "dag")
    assert rows["R4_2"] == (4, [2], "dag")
    assert rows["M5_3_4"] == (5, [3, 4], "dag")
    assert rows["task_Nzg3ODAwNDgzMTAwNTc2NTQ2Mw=="] == (None, [], "independent")


def test_parse_malformed_names_are_independent() -> None:
    parsed = parse_task_names(pl.Series(["MergeTask", "M_", "M1_", "3_1", "M12345678901"]))
    assert parsed["name_kind"].to_list() == ["malformed"] * 5
    assert parsed["task_num"].null_count() == 5


def test_golden_example_levels_and_edges() -> None:
    dag = resolve_dag(_job(GOLDEN))
    assert _edges(dag.edges) == {
        ("M2_1", "M1"), ("M3_1", "M1"), ("R4_2", "M2_1"), ("M5_3_4", "M3_1"), ("M5_3_4", "R4_2"),
    }
    assert _level_sets(dag.levels) == [{"M1"}, {"M2_1", "M3_1"}, {"R4_2"}, {"M5_3_4"}]
    assert dag.repairs == {}


def test_jobs_do_not_share_task_numbers() -> None:
    tasks = pl.concat([_job(["M1", "M2_1"], "j_1"), _job(["M2_1"], "j_2")])
    dag = resolve_dag(tasks)
    assert dag.edges.rows() == [("j_1", "M2_1", "M1")]
    assert dag.repairs == {"missing_parent": 1}


def test_repairs_are_counted() -> None:
    dag = resolve_dag(_job(["MergeTask", "J3_3", "M2_7", "M1", "R1", "M4_1"]))
    assert dag.repairs == {"unparsed_task_name": 1, "self_dependency": 1, "missing_parent": 1}
    # two tasks numbered 1: the child waits for both
    assert _edges(dag.edges) == {("M4_1", "M1"), ("M4_1", "R1")}


def test_cycle_is_cut_but_tasks_behind_it_keep_their_edge() -> None:
    dag = resolve_dag(_job(["M1_2", "M2_1", "M3_1", "M4"]))
    assert dag.repairs == {"dependency_cycle": 2}
    assert _edges(dag.edges) == {("M3_1", "M1_2")}
    assert dict(dag.levels.select("task_name", "level").iter_rows())["M3_1"] == 1


def test_unresolved_edges_reported_by_dag_levels() -> None:
    nodes = _job(["a", "b"])
    edges = pl.DataFrame({"job_id": ["j_1", "j_1"], "task_name": ["a", "b"],
                          "parent_name": ["b", "a"]})
    levels, pending = dag_levels(nodes, edges)
    assert levels.height == 0 and pending.height == 2


@st.composite
def dag_names(draw: st.DrawFn) -> list[str]:
    """Task names of one job, numbers 1..n with random (possibly bad) parent numbers."""
    n = draw(st.integers(1, 12))
    names = []
    for num in range(1, n + 1):
        parents = draw(st.lists(st.integers(1, n + 2), max_size=3))
        names.append("_".join([f"{draw(st.sampled_from('MRJ'))}{num}", *map(str, parents)]))
    return names


@settings(max_examples=60, deadline=None)
@given(dag_names())
def test_resolved_dag_is_acyclic_and_levelled(names: list[str]) -> None:
    dag = resolve_dag(_job(names))
    level = dict(dag.levels.select("task_name", "level").iter_rows())
    assert set(level) == set(names)  # every task gets a level: no cycle survives
    for child, parent in _edges(dag.edges):
        assert level[child] > level[parent]
