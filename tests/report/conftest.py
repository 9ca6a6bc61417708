"""Warehouses and their reports, shared by the tests: two synthetic policies x one trace x one
seed, real replays of the three multi-tenant schedulers on a tiny trace, and real replays
with input data (yarn-uniform and delay-scheduling along skip_count, HDFS layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.bench.workload import write_trace
from pipeline.replay import replay
from pipeline.report import report
from pipeline.warehouse import load
from tests.warehouse.rundirs import demo_runs

SECTIONS_WITH_CHARTS = ("answer", "distributions", "schedulers-fixed", "schedulers-elastic",
                        "provisioned-nodes", "allocated-capacity", "utilization",
                        "fairness-wait")
# sections without a chart, and those with a table (main or folded)
SECTIONS = (*SECTIONS_WITH_CHARTS, "assumptions", "backlog", "runs")
SECTIONS_WITH_TABLES = ("answer", "assumptions", "schedulers-fixed", "schedulers-elastic",
                        "provisioned-nodes", "utilization", "fairness-wait", "backlog", "runs")
# the queue report: one fixed cluster; capacity and fair runs have queues
QUEUE_SECTIONS_WITH_CHARTS = ("answer", "distributions", "schedulers-fixed",
                              "queue-shares-fixed", "queue-waits-fixed", "provisioned-nodes",
                              "allocated-capacity", "utilization", "fairness-wait")
# the locality report: one fixed cluster, every run with input data
LOCALITY_SECTIONS_WITH_CHARTS = ("answer", "distributions", "schedulers-fixed", "locality",
                                 "locality-job-size", "provisioned-nodes",
                                 "allocated-capacity", "utilization", "fairness-wait")
# name -> (policy, params); every run on the fixed cluster with dfs=hdfs
LOCALITY_RUNS = {
    "uniform": ("yarn-uniform", {}),
    "skip0": ("delay-scheduling", {"delay": "skip", "skip_count": 0}),
    "skip8": ("delay-scheduling", {"delay": "skip", "skip_count": 8}),
    "time": ("delay-scheduling", {"delay": "time"}),
}

CAPACITY_XML = """<configuration>
<property><name>yarn.scheduler.capacity.root.queues</name><value>prod,research</value></property>
<property><name>yarn.scheduler.capacity.root.prod.capacity</name><value>50</value></property>
<property><name>yarn.scheduler.capacity.root.research.capacity</name><value>50</value></property>
<property><name>yarn.scheduler.capacity.queue-mappings</name>
  <value>u:%user:%primary_group</value></property>
<property><name>yarn.resourcemanager.scheduler.monitor.enable</name><value>true</value>
</property></configuration>"""
FAIR_XML = """<allocations>
<queue name="prod"><weight>1</weight></queue>
<queue name="research"><weight>1</weight></queue>
<queuePlacementPolicy><rule name="primaryGroup" create="false"/>
<rule name="default" queue="research"/></queuePlacementPolicy>
</allocations>"""
GROUPS = "alice=prod;bob=research;carol=research"


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-runs")
    db = root / "wh.duckdb"
    load(demo_runs(root), db)
    return db


@pytest.fixture(scope="session")
def built_report(warehouse: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("report-out") / "report"
    return out, report(warehouse, out)


def queue_trace(root: Path) -> Path:
    """Two 8-cpu machines; prod asks for a burst after research filled the cluster."""
    tasks = [{"task_id": f"r{i}", "job_id": f"jr{i % 2}", "submit_s": float(i),
              "duration_s": 400.0, "cpu": 1.0, "mem": 1.0} for i in range(20)]
    tasks += [{"task_id": f"p{i}", "job_id": "jp", "submit_s": 60.0 + i,
               "duration_s": 100.0, "cpu": 1.0, "mem": 1.0} for i in range(8)]
    jobs = [{"job_id": "jr0", "user": "bob", "submit_s": 0.0},
            {"job_id": "jr1", "user": "carol", "submit_s": 1.0},
            {"job_id": "jp", "user": "alice", "submit_s": 60.0}]
    machines = [{"machine_id": f"m{i}", "cpu": 8.0, "mem": 8.0} for i in range(2)]
    return write_trace(root / "trace", machines, tasks, jobs)


@pytest.fixture(scope="session")
def queue_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A report of yarn-uniform, capacity-scheduler, fair-scheduler and drf replays."""
    root = tmp_path_factory.mktemp("queue-report")
    trace = queue_trace(root)
    (root / "cs.xml").write_text(CAPACITY_XML)
    (root / "fs.xml").write_text(FAIR_XML)
    policies = {
        "yarn-uniform": {},
        "capacity-scheduler": {"config": str(root / "cs.xml"), "groups": GROUPS},
        "fair-scheduler": {"allocation_file": str(root / "fs.xml"), "groups": GROUPS,
                           "preemption": True},
        "drf": {},
    }
    runs = [replay(trace, name, params, 0, root / "runs" / name).out_dir
            for name, params in policies.items()]
    db = root / "wh.duckdb"
    load(runs, db)
    out = root / "report"
    return out, report(db, out)


def locality_trace(root: Path) -> Path:
    """Twelve 2-slot machines in three racks; ten jobs of 1 to 60 tasks (job-size bins 1,
    2-10, 11-50 and 51-150), one every 15 s, so they overlap and compete for slots."""
    rng = np.random.default_rng(3)
    machines = [{"machine_id": f"n{i}", "cpu": 2.0, "mem": 2.0, "rack": f"r{i // 4}"}
                for i in range(12)]
    sizes = [1, 1, 1, 3, 3, 8, 8, 20, 40, 60]
    jobs = [{"job_id": f"j{j}", "user": f"u{j % 3}", "submit_s": 15.0 * j}
            for j in range(len(sizes))]
    tasks = [{"task_id": f"j{j}-{k}", "job_id": f"j{j}", "submit_s": 15.0 * j,
              "duration_s": float(rng.uniform(20, 60)), "cpu": 1.0, "mem": 1.0}
             for j, n in enumerate(sizes) for k in range(n)]
    return write_trace(root / "trace", machines, tasks, jobs)


@pytest.fixture(scope="session")
def locality_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of ``LOCALITY_RUNS`` replayed with HDFS-placed input data (drained)."""
    root = tmp_path_factory.mktemp("locality")
    trace = locality_trace(root)
    runs = [replay(trace, policy, params, 0, root / "runs" / name, drain=True,
                   cluster_options={"dfs": "hdfs"}).out_dir
            for name, (policy, params) in LOCALITY_RUNS.items()]
    db = root / "wh.duckdb"
    load(runs, db)
    return db


@pytest.fixture(scope="session")
def locality_report(locality_warehouse: Path, tmp_path_factory: pytest.TempPathFactory
                    ) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("locality-out") / "report"
    return out, report(locality_warehouse, out)
