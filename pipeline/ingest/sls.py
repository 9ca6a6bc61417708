"""Apache Hadoop YARN Scheduler Load Simulator (SLS) inputs -> canonical trace.

Sources: the SLS documentation (``SchedulerLoadSimulator.md``: both input formats and the
node-topology file), SLS's readers in ``hadoop-tools/hadoop-sls`` (``SLSConfiguration``,
``AMDefinitionSLS``/``AMDefinitionRumen``, ``TaskContainerDefinition``, ``MRAMSimulator``,
``SLSUtils``) and Rumen's ``JobBuilder``/``LoggedJob``.

Files: every ``*.json`` / ``*.json.gz`` directly under SRC (name order; ``generated.json``
skipped) is a stream of concatenated JSON objects (:mod:`.sls_json`), told apart by its first
object, whatever its name: ``jobID`` -> Rumen job history (``LoggedJob`` per job); a ``job.*``
or ``am.*`` key -> SLS jobs; ``rack`` / ``nodes`` -> SLS topology (``--nodes`` file, e.g.
``sls-nodes.json`` or ``*topo*.json``).  Other JSON files are listed in ``notes.not_read``.
SLS and Rumen files may be mixed.  Raw rows (objects) are counted per table: ``sls_jobs``,
``sls_containers``, ``rumen_jobs``, ``rumen_tasks``, ``topology_nodes``.

Mapping decisions (what, why):

- times: SLS times are ms from the simulation start and stay so (origin 0); Rumen times are
  ms since the epoch, shifted so the earliest Rumen time is 0 (SLS offsets Rumen jobs to its
  first job's submit the same way); seconds = ms / 1000.  Window: earliest submit .. latest
  recorded end (task or job).
- jobs: ``job.id``/``jobID``, ``job.user``/``user``, ``job.queue.name``/``queue`` (missing:
  ``default``, repaired), submit = ``job.start.ms`` / ``submitTime``; Rumen ``jobName`` as name.
- tasks: one per SLS container (``container.count`` copies, ``JOB/INDEX``), with duration by
  SLS's precedence (``container.duration.ms``, ``duration.ms``, else end - start) and the
  job's start as submit (the AM asks once it runs); one per Rumen map or reduce (``taskID``;
  ``otherTasks`` setup/cleanup are rejected, SLS ignores them too), from its last successful
  attempt, else its last one (SLS takes the last): duration and host of that attempt, submit
  = the task's TaskStarted time (when the MR AM scheduled it), ``trace_attempts`` = attempts,
  ``trace_lost_s`` = run time of the others, ``end_event`` from ``taskStatus``, ``cpu_used`` =
  CPU ms / run ms, ``mem_used`` = mean of the 12 ``physMemKbytes`` progress splits (MB).
- requests (units: vcores and MB, YARN's own): SLS containers ask ``container.vcores`` and
  ``container.memory-mb`` when given, else SLS's container defaults, 1 vcore and 1024 MB
  (``yarn.sls.container.*``).  Rumen tasks ask the job conf's ``mapreduce.{map,reduce}.
  {memory.mb,cpu.vcores}`` (the container the MR AM requested), else 1 vcore / 1024 MB
  (repair ``container_mb_default``).  Rumen's ``jobMapMB``/``jobReduceMB`` are not used: Rumen
  fills them from ``-Xmx`` in the java opts (heap, not container; 200 MB in the sample whose
  containers were 1024 MB), and SLS itself ignores them.
- machines: the topology files' nodes when given, else every host named (container hosts,
  every attempt's host, preferred locations); ``/rack/host`` -> machine ``host``, rack ``rack``
  (``/core/tor/host`` -> ``core/tor``).  Capacity: SLS's NM defaults, 10 vcores and 10240 MB
  (``yarn.sls.nm.vcores`` / ``.memory.mb``); present the whole trace.  With a topology, a
  recorded host outside it is cleared (``recorded_host_not_in_topology``) and a preferred host
  outside it dropped from ``inputs`` (``preferred_host_not_in_topology``).
- ``inputs``/``input_mb``: Rumen maps' ``preferredLocations`` hosts (HDFS split locations) and
  ``inputBytes`` / 2**20; null for reduces and for SLS (the format has neither).
- ``depends_on``: in MapReduce jobs (SLS ``am.type`` mapreduce, every Rumen job) each reduce
  waits for all the job's maps, as SLS's MR AM simulator asks for reduces only once every map
  finished; above ``DIRECT_LIMIT`` maps through one synthetic ``JOB/maps-done`` barrier.  Real
  MR starts reduces early (slowstart) to shuffle: how many did is in
  ``notes.reduces_overlapping_maps``.
- not used: ``container.priority`` (YARN: lower runs first within an application; canonical
  priority orders jobs), ``job.label.expression``, Rumen CDFs and counters.

Bad input: unparsable JSON, a top-level non-object or a corrupt file is an error naming the
file and line; a job or task with a missing, non-numeric or negative field, an end before its
start or no tasks/attempts is rejected by reason (its tasks with it) and counted.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pyarrow as pa

from pipeline.errors import TraceError
from pipeline.ingest.csvparts import RawTable
from pipeline.ingest.finalize import spill_connection, write_query
from pipeline.ingest.sls_build import Topology, TraceBuilder
from pipeline.ingest.sls_json import JsonObjects, first_object
from pipeline.ingest.sls_records import (
    JobRecord,
    Rejected,
    TaskRecord,
    parse_host,
    rumen_job,
    rumen_task,
    sls_containers,
    sls_job,
    text,
)
from pipeline.ingest.stage import require_usable_rows
from pipeline.ingest.window import GENERATED, set_window
from pipeline.trace.io import PartWriter, write_table
from pipeline.trace.manifest import Ledger, Manifest

NODE_VCORES, NODE_MB = 10.0, 10240.0  # SLSConfiguration NM_VCORES_DEFAULT, NM_MEMORY_MB_DEFAULT
JSON_FILES = RawTable("json", "*.json*", ())
# The raw tables rows are counted in (one JSON object = one row), per file kind.
KINDS = {"sls": ("sls_jobs", "sls_containers"), "rumen": ("rumen_jobs", "rumen_tasks")}
TOPOLOGY = "topology_nodes"
ACCOUNTED = tuple(RawTable(name, "*.json*", ())
                  for name in (*KINDS["sls"], *KINDS["rumen"], TOPOLOGY))
# Task ids are unique within a job (checked as read); across jobs (distinct Rumen jobs naming
# the same taskID) the first emitted is kept, in bounded memory, and the others counted.
UNIQUE_SQL = """CREATE TEMP TABLE t AS SELECT * FROM read_parquet([{files}])
    QUALIFY row_number() OVER (PARTITION BY task_id ORDER BY seq) = 1"""
TASKS_SQL = """SELECT task_id, job_id, (submit_ms - {origin}) / 1000.0 AS submit_s, duration_s,
    cpu, mem, 0.0 AS gpu, cpu_used, mem_used, inputs, input_mb, depends_on, end_event,
    trace_attempts, trace_lost_s, synthetic, recorded_machine_id,
    (start_ms - {origin}) / 1000.0 AS recorded_start_s, task_kind
    FROM t ORDER BY submit_s, task_id"""


def file_kind(first: dict[str, Any] | None) -> str | None:
    """'rumen', 'sls' or 'topology' from a file's first object (None: not one of them)."""
    if first is None:
        return None
    if "jobID" in first:
        return "rumen"
    if any(key.startswith(("job.", "am.")) for key in first):
        return "sls"
    if "rack" in first or "nodes" in first:
        return "topology"
    return None


def _sls_tasks(job: JobRecord, index: int, kind: str | None, obj: Any) -> list[TaskRecord]:
    return sls_containers(job, index, obj)


def _rumen_tasks(job: JobRecord, index: int, kind: str | None, obj: Any) -> list[TaskRecord]:
    if kind is None:
        raise Rejected("setup_or_cleanup_task", "otherTasks")
    return [rumen_task(job, kind, obj)]


PARSERS = {"sls": (sls_job, _sls_tasks), "rumen": (rumen_job, _rumen_tasks)}


class Sls:
    """Hadoop SLS inputs: SLS JSON jobs, Rumen job histories, optional SLS topology."""

    name: ClassVar[str] = "sls"
    summary: ClassVar[str] = "Hadoop SLS JSON jobs and Rumen MapReduce job histories"
    tables: ClassVar[tuple[RawTable, ...]] = (JSON_FILES,)

    def __init__(self, node_vcores: float = NODE_VCORES, node_memory_mb: float = NODE_MB) -> None:
        self.node_vcores = node_vcores
        self.node_memory_mb = node_memory_mb

    def run(self, src: Path, out: Path, ledger: Ledger, manifest: Manifest) -> None:
        """Read the JSON files under ``src``; write canonical tables into ``out``."""
        files = self._classify(src, manifest)
        topology = Topology()
        for path in files["topology"]:
            self._topology(src, path, topology, ledger, manifest)
        builder = TraceBuilder(topology, ledger, out / "_unsorted_tasks")
        for kind in ("sls", "rumen"):
            for path in files[kind]:
                self._jobs(src, path, kind, builder, manifest)
        builder.flush()
        require_usable_rows(SimpleNamespace(tables=ACCOUNTED), src, ledger)  # type: ignore[arg-type]
        if not builder.jobs:
            raise TraceError("no usable job in the SLS/Rumen files (every job dropped)", src)
        ledger.repair("machines", "host_named_under_two_racks_first_kept",
                      len(topology.conflicts))
        origins = {"sls": 0.0, "rumen": builder.bounds.get("rumen", [0.0])[0]}
        write_table(out, "machines", topology.machines(self.node_vcores, self.node_memory_mb))
        rows, job_ids = _write_tasks(builder.unsorted, out, origins)
        ledger.drop("tasks", "duplicate_task_id_in_another_job", builder.emitted - rows)
        jobs = [job for job in builder.jobs if job["job_id"] in job_ids]
        ledger.drop("jobs", "no_usable_tasks", len(builder.jobs) - len(jobs))
        write_table(out, "jobs", _jobs_table(jobs, origins))
        shutil.rmtree(builder.unsorted)
        self._describe(src, manifest, builder, origins, topology)

    def _classify(self, src: Path, manifest: Manifest) -> dict[str, list[Path]]:
        files: dict[str, list[Path]] = {"sls": [], "rumen": [], "topology": []}
        ignored = []
        for path in JSON_FILES.files(src):
            if path.name == GENERATED or not path.name.endswith((".json", ".json.gz")):
                continue
            kind = file_kind(first_object(path))
            if kind is None:
                ignored.append(path.name)
            else:
                files[kind].append(path)
        if ignored:
            manifest.notes["not_read"] = ("JSON files that are neither SLS jobs, Rumen jobs nor "
                                          "an SLS topology: " + ", ".join(ignored))
        if not files["sls"] and not files["rumen"]:
            raise TraceError("no SLS or Rumen job file (*.json or *.json.gz whose first object "
                             "has job.* keys or jobID)", src)
        return files

    def _topology(self, src: Path, path: Path, topology: Topology, ledger: Ledger,
                  manifest: Manifest) -> None:
        """Nodes of an SLS topology file (``{"rack": R, "nodes": [{"node": N}, ...]}``)."""
        rel = _rel(src, path)
        objects = JsonObjects(path, rel)
        for line, obj in objects:
            rack, nodes = text(obj, "rack"), obj.get("nodes")
            if not isinstance(nodes, list):
                ledger.read(TOPOLOGY, 1)
                ledger.reject(TOPOLOGY, "missing_value:nodes", path=rel, line=line,
                              field_name="nodes")
                continue
            ledger.read(TOPOLOGY, len(nodes))
            for node in nodes:
                name = text(node, "node") if isinstance(node, dict) else None
                host = parse_host(f"/{rack or ''}/{name}") if name else None
                reason = ("missing_value:node" if host is None
                          else "duplicate:node" if host in topology else None)
                if reason:
                    ledger.reject(TOPOLOGY, reason, path=rel, line=line, field_name="node")
                    continue
                assert host is not None
                topology.add(host)
                ledger.use(TOPOLOGY, 1)
        topology.given = True
        manifest.sources.append(objects.source(TOPOLOGY))

    def _jobs(self, src: Path, path: Path, kind: str, builder: TraceBuilder,
              manifest: Manifest) -> None:
        rel = _rel(src, path)
        objects = JsonObjects(path, rel)
        parse_job, parse_tasks = PARSERS[kind]
        for line, obj in objects:
            builder.add(obj, KINDS[kind], parse_job, parse_tasks, (rel, line))
        manifest.sources.append(objects.source(KINDS[kind][0]))

    def _describe(self, src: Path, manifest: Manifest, builder: TraceBuilder,
                  origins: dict[str, float], topology: Topology) -> None:
        manifest.units = {"cpu": "vcores", "mem": "MB (YARN memory-mb)", "gpu": "none",
                          "time": "s", "input_mb": "MiB (inputBytes / 2**20)"}
        origin = "SLS jobs: the simulation start (job.start.ms = 0)"
        if "rumen" in builder.bounds:
            when = datetime.fromtimestamp(origins["rumen"] / 1000.0, UTC).isoformat()
            origin += f"; Rumen jobs: their earliest time, {when} ({origins['rumen']:.0f} ms)"
        manifest.time_origin = origin
        starts = [(b[0] - origins[c]) / 1000.0 for c, b in builder.bounds.items()]
        ends = [(b[1] - origins[c]) / 1000.0 for c, b in builder.bounds.items()]
        set_window(manifest, src, min(starts), max(max(ends), min(starts) + 1e-3),
                   "earliest submit .. latest recorded end (task or job)")
        manifest.notes.update({
            "machines": ("topology files" if topology.given else "every host the jobs name")
            + f"; SLS node defaults {self.node_vcores:g} vcores, {self.node_memory_mb:g} MB",
            "depends_on": "reduces wait for all maps of their job (SLS MR AM simulator phases)",
            "barrier_tasks": str(builder.barriers),
            "reduces_overlapping_maps": str(builder.reduces_overlapping_maps),
            "requests": "SLS: container.vcores/memory-mb else 1 vcore, 1024 MB; Rumen: job conf "
                        "mapreduce.{map,reduce}.memory.mb/cpu.vcores else 1 vcore, 1024 MB",
        })


def _rel(src: Path, path: Path) -> str:
    return str(path.relative_to(src)) if path.is_relative_to(src) else str(path)


def _jobs_table(jobs: list[dict[str, Any]], origins: dict[str, float]) -> pa.Table:
    rows = sorted(({**{k: v for k, v in job.items() if k not in ("submit_ms", "clock")},
                    "submit_s": (job["submit_ms"] - origins[job["clock"]]) / 1000.0}
                   for job in jobs), key=lambda job: (job["submit_s"], job["job_id"]))
    return pa.Table.from_pylist(rows)


def _write_tasks(unsorted: Path, out: Path, origins: dict[str, float]) -> tuple[int, set[str]]:
    """Shift the unsorted parts' times to the origin and write them sorted by submit;
    return the number of tasks written and the jobs they belong to."""
    files = sorted(unsorted.glob("*.parquet"))
    if not files:
        PartWriter(out, "tasks").close()
        return 0, set()
    con = spill_connection(unsorted)
    origin = f"(CASE clock WHEN 'rumen' THEN {origins['rumen']!r} ELSE {origins['sls']!r} END)"
    con.execute(UNIQUE_SQL.format(files=", ".join(f"'{f}'" for f in files)))
    rows = write_query(con, TASKS_SQL.format(origin=origin), out, "tasks")
    job_ids = {job_id for (job_id,) in con.execute("SELECT DISTINCT job_id FROM t").fetchall()}
    con.close()
    return rows, job_ids
