"""The fairness and share columns of the report views, on hand-made warehouse rows."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from pipeline.warehouse.db import create_schema, refresh_views

HOUR = 3600.0


def task(run: str, queue: str, user: str, cpu: float, mem: float,
         start: float | None) -> tuple:
    """A task of ``run`` ready at 0, running from ``start`` to the hour (or never)."""
    return (run, f"{queue}-{user}-{start}", "j", user, f"root.{queue}",
            None if start is None else "m0", 0.0, 0.0, start, HOUR if start is not None else None,
            "finished" if start is not None else "unfinished", cpu, mem)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """Two runs on one 10-cpu, 10-mem node for an hour, queues a and b guaranteed 50% each.

    r1: a's users hold 6 and 2 one-cpu tasks (a borrows: 0.8 of the cluster); b holds two
    <1 cpu, 0.5 mem> tasks and two more wait (demand 0.4, held 0.2).
    r2: the same a; b asks for nothing.
    """
    db = duckdb.connect()
    create_schema(db)
    a = ([task(r, "a", "ua1", 1.0, 1.0, 0.0) for _ in range(6) for r in ("r1", "r2")]
         + [task(r, "a", "ua2", 1.0, 1.0, 0.0) for _ in range(2) for r in ("r1", "r2")])
    b = ([task("r1", "b", "ub", 1.0, 0.5, 0.0)] * 2 + [task("r1", "b", "ub", 1.0, 0.5, None)] * 2)
    db.executemany(
        "insert into task_runs (run_id, task_id, job_id, \"user\", queue, machine_id, submit_s,"
        " ready_s, start_s, end_s, outcome, cpu, mem) values "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", a + b)
    for run in ("r1", "r2"):
        db.execute("insert into runs (run_id, trace, policy, params, seed) values "
                   "(?, 't', 'capacity-scheduler', ?, 0)", [run, f'{{"case": "{run}"}}'])
        db.execute("insert into node_intervals (run_id, machine_id, up_s, down_s, cpu, mem) "
                   "values (?, 'm0', 0, ?, 10, 10)", [run, HOUR])
        db.executemany("insert into metrics values (?, ?, ?, ?)",
                       [(run, "node_hours", 1.0, "h"), (run, "jain_fairness", 0.9, "index"),
                        (run, "jain_equal_share", 0.6, "index")])
        db.executemany("insert into queues (run_id, queue, parent, leaf, depth, weight, "
                       "guaranteed_share, max_share) values (?, ?, ?, ?, ?, ?, ?, 1.0)",
                       [(run, "root", None, False, 0, 1.0, 1.0),
                        (run, "root.a", "root", True, 1, 0.5, 0.5),
                        (run, "root.b", "root", True, 1, 0.5, 0.5)])
    refresh_views(db)
    yield db
    db.close()


def summary(con: duckdb.DuckDBPyConnection, run: str) -> dict[str, dict[str, float]]:
    cur = con.execute("select * from queue_summary where run_id = ?", [run])
    names = [d[0] for d in cur.description]
    return {row[names.index("queue")]: dict(zip(names, row, strict=True))
            for row in cur.fetchall()}


def test_share_of_guarantee_names_say_which_share(con: duckdb.DuckDBPyConnection) -> None:
    b = summary(con, "r1")["root.b"]
    assert b["dominant_share_of_guarantee"] == pytest.approx(0.2 / 0.5)  # cpu is dominant
    assert b["mem_share_of_guarantee"] == pytest.approx(0.1 / 0.5)
    assert "share_of_guarantee" not in b and "jain_users" not in b


def test_jain_queues_counts_a_leaf_short_of_the_guarantee_it_asked_for(
        con: duckdb.DuckDBPyConnection) -> None:
    # b asked for 0.4 (under its 0.5 guarantee) and got 0.2: x_b = 1/2; a got all it is
    # entitled to (x = 1, borrowing is not held against it): J = 1.5^2 / (2 * 1.25) = 0.9.
    # (Against guarantees alone, 1.6 and 0.4, it would be 0.735.)
    rows = summary(con, "r1")
    assert rows["root.a"]["jain_queues"] == pytest.approx(0.9)
    assert rows["root.b"]["jain_queues"] == pytest.approx(0.9)


def test_jain_queues_ignores_a_leaf_that_asks_for_nothing(
        con: duckdb.DuckDBPyConnection) -> None:
    # Only a asked for anything, and it got its guarantee: 1 (an idle b counted as 0
    # would make it 1/2).
    assert summary(con, "r2")["root.a"]["jain_queues"] == pytest.approx(1.0)


def test_jain_users_usage_compares_users_usage(con: duckdb.DuckDBPyConnection) -> None:
    rows = summary(con, "r1")
    assert rows["root.a"]["jain_users_usage"] == pytest.approx(8**2 / (2 * (36 + 4)))  # 6, 2
    assert rows["root.b"]["jain_users_usage"] == pytest.approx(1.0)


def test_demand_share_over_time(con: duckdb.DuckDBPyConnection) -> None:
    row = con.execute(
        "select min(dominant_share), max(dominant_share), min(demand_dominant_share), "
        "max(demand_dominant_share) from queue_share_over_time "
        "where run_id = 'r1' and queue = 'root.b'").fetchone()
    assert row == pytest.approx((0.2, 0.2, 0.4, 0.4))


def test_fairness_vs_wait_has_both_user_indices(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute("select run_id, jain_fairness, jain_equal_share from fairness_vs_wait "
                       "order by run_id").fetchall()
    assert rows == [("r1", 0.9, 0.6), ("r2", 0.9, 0.6)]
