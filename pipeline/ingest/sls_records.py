"""One SLS or Rumen job object -> a job record and its task records (see :mod:`.sls` for why).

Pure functions over decoded JSON: no files, no ledger.  A field that makes a job or task
unusable raises :class:`Rejected` with a reason and the field's name (``missing_value``,
``bad_number``, ``negative_value``, ``end_before_start``, ``non_positive_duration``, ...); the
adapter counts it.  Repairs made to an emitted record are listed in its ``repairs``.  Times
stay in the source's milliseconds (SLS: from the simulation start; Rumen: since the epoch)
until the adapter knows the trace's origin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pipeline.ingest import limits
from pipeline.ingest.limits import (
    MAX_EPOCH_S,
    MAX_MACHINE_CORES,
    MAX_MACHINE_MEM_MIB,
    MAX_SPAN_S,
    MAX_TASKS,
)

MAP, REDUCE = "map", "reduce"
# SLSConfiguration defaults: yarn.sls.container.memory.mb / .vcores (each container simulator).
CONTAINER_MB, CONTAINER_VCORES = 1024.0, 1.0
# MR job conf keys of the container request (MRv2 names first, then MRv1's).
JOB_CONF_MB = {MAP: ("mapreduce.map.memory.mb", "mapred.job.map.memory.mb"),
               REDUCE: ("mapreduce.reduce.memory.mb", "mapred.job.reduce.memory.mb")}
JOB_CONF_VCORES = {MAP: ("mapreduce.map.cpu.vcores",), REDUCE: ("mapreduce.reduce.cpu.vcores",)}
END_EVENTS = {"SUCCESS": "finished", "FAILED": "failed", "KILLED": "killed"}
MIB = float(2**20)


class Rejected(Exception):  # noqa: N818 - a verdict on a row, not a program error
    """A job or task that cannot be used: the reason and the field that decided it."""

    def __init__(self, reason: str, field_name: str) -> None:
        super().__init__(f"{reason}:{field_name}")
        self.reason, self.field_name = f"{reason}:{field_name}", field_name


class Host(NamedTuple):
    """A node named by the trace: ``/rack/host`` -> rack ``rack`` (null when none), ``host``."""

    rack: str | None
    name: str


@dataclass
class TaskRecord:
    """One canonical task before its times are shifted to the trace origin (ms)."""

    task_id: str
    kind: str | None
    submit_ms: float
    duration_ms: float
    cpu: float
    mem: float
    host: Host | None
    start_ms: float | None
    inputs: list[Host] | None = None
    input_mb: float | None = None
    end_event: str | None = "finished"
    attempts: int = 1
    lost_ms: float = 0.0
    cpu_used: float | None = None
    mem_used: float | None = None
    other_hosts: list[Host] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    depends_on: list[str] | None = None
    synthetic: bool = False


@dataclass
class JobRecord:
    """One canonical job, with its raw task objects still to be read."""

    job_id: str
    user: str
    queue: str
    submit_ms: float
    end_ms: float | None
    clock: str  # 'sls' (ms from simulation start) or 'rumen' (ms since the epoch)
    mapreduce: bool  # reduces wait for the job's maps (the MR AM simulator's phases)
    tasks: list[tuple[str | None, Any]]  # (kind from the list it came from, raw object)
    name: str | None = None
    conf: dict[str, Any] = field(default_factory=dict)
    repairs: list[str] = field(default_factory=list)


def number(obj: dict[str, Any], key: str, required: bool = True,
           label: str | None = None) -> float | None:
    """A finite, non-negative number (JSON number or numeric string, as SLS's parseLong)."""
    label = label or key
    value = obj.get(key)
    if value is None:
        if required:
            raise Rejected("missing_value", label)
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        parsed = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise Rejected("bad_number", label) from None
    if not math.isfinite(parsed):
        raise Rejected("bad_number", label)
    if parsed < 0:
        raise Rejected("negative_value", label)
    if parsed > _physical_bound(key):
        raise Rejected(limits.REASON, label)
    return parsed


def _physical_bound(key: str) -> float:
    """The most field ``key`` can physically be (:mod:`pipeline.ingest.limits`): times in
    ms (SLS's from the trace's start, Rumen's since the epoch) before the year 2200, a
    duration no longer than any trace, one container's memory and vcores no more than any
    machine's, a request's container count no more than any cluster's tasks."""
    if "duration" in key:
        return MAX_SPAN_S * 1000.0
    if key.endswith((".ms", "Time")):
        return MAX_EPOCH_S * 1000.0
    if "memory" in key:
        return MAX_MACHINE_MEM_MIB
    if "vcores" in key:
        return MAX_MACHINE_CORES
    if key.endswith("count"):
        return MAX_TASKS
    return math.inf


def text(obj: dict[str, Any], key: str) -> str | None:
    """A field as text (numbers become their digits); None when absent or empty."""
    value = obj.get(key)
    if value is None or isinstance(value, dict | list | bool):
        return None
    value = str(value).strip()
    return value or None


def parse_host(value: Any) -> Host | None:
    """``/rack/host`` (or ``/core/tor/host``, or a bare ``host``) as a :class:`Host`."""
    if not isinstance(value, str):
        return None
    parts = [p for p in value.strip().split("/") if p]
    return Host("/".join(parts[:-1]) or None, parts[-1]) if parts else None


def layers_host(location: Any) -> Host | None:
    """A Rumen ``LoggedLocation`` ``{"layers": [rack, ..., host]}`` as a :class:`Host`."""
    layers = location.get("layers") if isinstance(location, dict) else None
    if not isinstance(layers, list) or not layers or not all(isinstance(x, str) for x in layers):
        return None
    return parse_host("/" + "/".join(layers))


def _user_queue(obj: dict[str, Any], user_key: str, queue_key: str,
                repairs: list[str]) -> tuple[str, str]:
    user, queue = text(obj, user_key), text(obj, queue_key)
    if user is None:
        repairs.append("no_user_read_as_default")
    if queue is None:
        repairs.append("no_queue_read_as_default")
    return user or "default", queue or "default"


def _task_list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise Rejected("not_a_list", key)
    return value


def sls_job(obj: dict[str, Any]) -> JobRecord:
    """An SLS job object (``job.*`` keys, ``job.tasks`` containers)."""
    job_id = text(obj, "job.id")
    if job_id is None:
        raise Rejected("missing_value", "job.id")
    start = number(obj, "job.start.ms")
    end = number(obj, "job.end.ms", required=False)
    if end is not None and end < start:
        raise Rejected("end_before_start", "job.end.ms")
    if (number(obj, "job.count", required=False) or 1) > 1:
        raise Rejected("unsupported_job_count", "job.count")
    tasks = _task_list(obj, "job.tasks")
    if not tasks:  # SLS refuses a job without tasks ("No task for the job!")
        raise Rejected("no_tasks", "job.tasks")
    repairs: list[str] = []
    user, queue = _user_queue(obj, "job.user", "job.queue.name", repairs)
    am_type = text(obj, "am.type") or "mapreduce"
    return JobRecord(job_id, user, queue, start, end, "sls", am_type == "mapreduce",
                     [(None, t) for t in tasks], repairs=repairs)


def sls_containers(job: JobRecord, index: int, obj: Any) -> list[TaskRecord]:
    """The tasks of one SLS container entry (``container.count`` copies, default 1)."""
    if not isinstance(obj, dict):
        raise Rejected("not_an_object", "job.tasks[]")
    start = number(obj, "container.start.ms", required=False)
    duration = _sls_duration(obj, start)
    kind = text(obj, "container.type") or MAP  # SLS's default container type
    repairs = [] if kind in (MAP, REDUCE) else ["container_type_not_map_or_reduce"]
    host = parse_host(obj.get("container.host"))
    if host is None:
        repairs.append("no_recorded_host")
    if text(obj, "container.execution.type") == "OPPORTUNISTIC":
        repairs.append("opportunistic_run_as_guaranteed")
    submit = job.submit_ms
    if start is not None and start < submit:
        submit = start
        repairs.append("submit_from_container_start")
    mem = number(obj, "container.memory-mb", required=False)
    cpu = number(obj, "container.vcores", required=False)
    count = int(number(obj, "container.count", required=False) or 1)
    return [TaskRecord(
        f"{job.job_id}/{index}" if count == 1 else f"{job.job_id}/{index}-{k}",
        kind if kind in (MAP, REDUCE) else None, submit, duration,
        CONTAINER_VCORES if cpu is None else cpu, CONTAINER_MB if mem is None else mem,
        host, start, repairs=list(repairs),
    ) for k in range(max(count, 1))]


def _sls_duration(obj: dict[str, Any], start: float | None) -> float:
    """SLS's precedence: ``container.duration.ms``, then ``duration.ms``, then end - start."""
    for key in ("container.duration.ms", "duration.ms"):
        duration = number(obj, key, required=False)
        if duration is not None:
            if duration <= 0:
                raise Rejected("non_positive_duration", key)
            return duration
    if start is None:
        raise Rejected("missing_value", "container.start.ms")
    end = number(obj, "container.end.ms")
    if end < start:
        raise Rejected("end_before_start", "container.end.ms")
    if end == start:
        raise Rejected("non_positive_duration", "container.end.ms")
    if end - start > MAX_SPAN_S * 1000.0:  # longer than any trace lasts
        raise Rejected(limits.REASON, "container.end.ms")
    return end - start


def rumen_job(obj: dict[str, Any]) -> JobRecord:
    """A Rumen ``LoggedJob`` (``jobID``, ``submitTime`` ms since the epoch, task lists)."""
    job_id = text(obj, "jobID")
    if job_id is None:
        raise Rejected("missing_value", "jobID")
    submit = number(obj, "submitTime")
    end = _rumen_time(obj, "finishTime")
    if end is not None and end < submit:
        raise Rejected("end_before_start", "finishTime")
    tasks = [(MAP, t) for t in _task_list(obj, "mapTasks")]
    tasks += [(REDUCE, t) for t in _task_list(obj, "reduceTasks")]
    tasks += [(None, t) for t in _task_list(obj, "otherTasks")]  # setup/cleanup
    if not any(kind for kind, _ in tasks):
        raise Rejected("no_tasks", "mapTasks")
    repairs: list[str] = []
    user, queue = _user_queue(obj, "user", "queue", repairs)
    conf = obj.get("jobProperties") if isinstance(obj.get("jobProperties"), dict) else {}
    return JobRecord(job_id, user, queue, submit, end, "rumen", True, tasks,
                     name=text(obj, "jobName"), conf=conf, repairs=repairs)


def _rumen_time(obj: dict[str, Any], key: str, label: str | None = None) -> float | None:
    """An optional Rumen time: Rumen writes -1 for "not recorded", read as absent."""
    value = obj.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        return None
    return number(obj, key, required=False, label=label)


def rumen_task(job: JobRecord, kind: str, obj: Any) -> TaskRecord:
    """A Rumen map or reduce: its successful attempt (else its last, as SLS takes)."""
    if not isinstance(obj, dict):
        raise Rejected("not_an_object", f"{kind}Tasks[]")
    task_id = text(obj, "taskID")
    if task_id is None:
        raise Rejected("missing_value", "taskID")
    attempts = [a for a in obj.get("attempts") or [] if isinstance(a, dict)]
    if not attempts:  # SLS refuses these too ("no attempt for a mapper")
        raise Rejected("no_attempts", "attempts")
    chosen = next((a for a in reversed(attempts) if a.get("result") == "SUCCESS"), attempts[-1])
    start = number(chosen, "startTime", label="attempt.startTime")
    finish = number(chosen, "finishTime", label="attempt.finishTime")
    if finish <= start:
        raise Rejected("end_before_start" if finish < start else "non_positive_duration",
                       "attempt.finishTime")
    submit, repairs = _rumen_submit(job, obj, start)
    cpu, mem = _rumen_request(job, kind, repairs)
    record = TaskRecord(task_id, kind, submit, finish - start, cpu, mem, _attempt_host(chosen),
                        start, attempts=len(attempts), repairs=repairs)
    if record.host is None:
        repairs.append("no_recorded_host")
    _rumen_attempts(record, attempts, chosen)
    _rumen_usage(record, chosen)
    status = text(obj, "taskStatus") or text(chosen, "result")
    record.end_event = END_EVENTS.get(status or "")
    if kind == MAP:
        _rumen_inputs(record, obj)
    return record


def _rumen_submit(job: JobRecord, obj: dict[str, Any],
                  attempt_start: float) -> tuple[float, list[str]]:
    """The task's request time and its repairs: its TaskStarted time (when the MR AM
    scheduled it), never before its job's submit nor after its recorded attempt started."""
    task_start = _rumen_time(obj, "startTime")
    if task_start is None:
        submit, repairs = job.submit_ms, ["submit_from_job_submit"]
    elif task_start < job.submit_ms:
        submit, repairs = job.submit_ms, ["task_start_before_job_submit"]
    else:
        submit, repairs = task_start, []
    if attempt_start < submit:
        submit = attempt_start
        repairs.append("submit_from_attempt_start")
    return submit, repairs


def _conf(job: JobRecord, keys: tuple[str, ...]) -> float | None:
    """The first positive number among job conf ``keys`` (values are strings in Rumen)."""
    for key in keys:
        try:
            value = float(str(job.conf.get(key)).strip())
        except ValueError:
            continue
        if math.isfinite(value) and value > 0:
            return value
    return None


def _rumen_request(job: JobRecord, kind: str, repairs: list[str]) -> tuple[float, float]:
    """(vcores, MB) of the container the MR AM asked for: job conf, else SLS's defaults."""
    vcores = _conf(job, JOB_CONF_VCORES[kind])
    mem = _conf(job, JOB_CONF_MB[kind])
    if mem is None:
        repairs.append("container_mb_default")
    return (CONTAINER_VCORES if vcores is None else vcores,
            CONTAINER_MB if mem is None else mem)


def _attempt_host(attempt: dict[str, Any]) -> Host | None:
    return parse_host(attempt.get("hostName")) or layers_host(attempt.get("location"))


def _rumen_attempts(record: TaskRecord, attempts: list[dict[str, Any]],
                    chosen: dict[str, Any]) -> None:
    """Hosts and run time of the attempts other than the chosen one (work the trace lost)."""
    for attempt in attempts:
        if attempt is chosen:
            continue
        host = _attempt_host(attempt)
        if host is not None:
            record.other_hosts.append(host)
        start, finish = attempt.get("startTime"), attempt.get("finishTime")
        if isinstance(start, int | float) and isinstance(finish, int | float) \
                and 0 <= start < finish:
            record.lost_ms += finish - start


def _rumen_usage(record: TaskRecord, attempt: dict[str, Any]) -> None:
    """Mean vcores used (CPU ms / run ms) and mean MB resident (the 12 progress splits)."""
    metrics = attempt.get("resourceUsageMetrics")
    cpu_ms = metrics.get("cumulativeCpuUsage") if isinstance(metrics, dict) else None
    if isinstance(cpu_ms, int | float) and cpu_ms >= 0:
        record.cpu_used = cpu_ms / record.duration_ms
    splits = attempt.get("physMemKbytes")
    if isinstance(splits, list) and splits and all(
            isinstance(k, int | float) and k >= 0 for k in splits):
        record.mem_used = sum(splits) / len(splits) / 1024.0


def _rumen_inputs(record: TaskRecord, obj: dict[str, Any]) -> None:
    """Split locations (``preferredLocations``) and bytes read (``inputBytes``) of a map."""
    read = obj.get("inputBytes")
    if isinstance(read, int | float) and not isinstance(read, bool) and read >= 0:
        record.input_mb = read / MIB
    hosts = [layers_host(loc) for loc in obj.get("preferredLocations") or []]
    if any(h is None for h in hosts):
        record.repairs.append("unreadable_preferred_location_skipped")
    named = list(dict.fromkeys(h for h in hosts if h is not None))
    record.inputs = named or None
