"""Alibaba PAI ``cluster-trace-gpu-v2020`` -> canonical trace.

Source: alibaba/clusterdata ``cluster-trace-gpu-v2020/README.md`` and ``data/*.header`` (the
exact column order: the CSV files have no header row; numbers are written as floats,
``4550879.0``, inst_num ``1.0``).  Published as one ``TABLE.tar.gz`` per table holding
``TABLE.csv``; this adapter reads the extracted ``TABLE*.csv`` or ``TABLE*.csv.gz`` parts.
Weng et al., "MLaaS in the Wild", NSDI'22.  Required: ``pai_machine_spec``,
``pai_job_table``, ``pai_task_table``; optional: ``pai_instance_table``,
``pai_sensor_table`` (read only with instances), ``pai_group_tag_table``.

Mapping decisions (what, why):

- machines (``pai_machine_spec``): ``machine_id`` = machine, ``cpu`` = cap_cpu cores, ``mem``
  = cap_mem GB, ``gpu`` = cap_gpu devices, ``gpu_model`` = gpu_type (null for ``CPU``
  machines; ``MISC``, older K40m/K80/M60 GPUs, is kept as a model name).  No racks and no
  removals are published: every machine is present from 0 for the whole window.  Repeated
  ids (``duplicate_machine``), zero capacity (``no_capacity``) and a fractional GPU count
  (``fractional_gpu_count``) are rejected rows.
- jobs (``pai_job_table``): ``job_id`` = job_name, the key the task and instance tables use
  (the docs say job_name and inst_id are 1:1 and ask to treat inst_id as the job id; inst_id
  is kept as ``jobs.inst_id`` to join the sensor and group tables).  ``user`` = user,
  ``queue`` null (none published), ``submit_s`` = start_time (submission), ``status`` kept.
  With ``pai_group_tag_table`` (joined on inst_id): ``group_tag`` (= group: instances with
  similar inputs, i.e. repeated work, useful for run-time prediction) and ``workload``.
- tasks: one canonical task per instance.  With ``pai_instance_table``: one per instance row
  (``JOB/TASK/inst_name``; of repeated rows of one instance the latest start is kept),
  ``recorded_machine_id`` = machine (null, repair ``recorded_machine_not_in_spec``, when the
  spec lacks it), ``recorded_start_s`` = its start.  Without it: each task row becomes
  ``inst_num`` tasks ``JOB/TASK/k`` over the task's start..end.  Status: Terminated ->
  ``finished``, Failed -> ``failed``, Running -> ``censored`` at the window end; Waiting or
  no start -> dropped (``never_started``); no end, end before start, an unknown status ->
  dropped by reason; start == end -> 1 s (repair ``zero_duration``).  ``submit_s`` = the
  job's submission (an instance that started earlier: its start, repair
  ``started_before_job_submit``).
- requests (``pai_task_table``): ``cpu`` = plan_cpu/100 cores, ``mem`` = plan_mem GB,
  ``gpu`` = plan_gpu/100 (50 -> a 0.5 share of one device; 100, 200, 800 -> whole devices).
  plan_gpu above 100 and not a multiple of 100 (150: more than one device, not a whole
  number) is rounded up to whole devices (repair ``gpu_rounded_up_to_whole_devices``: a share
  must fit on one device, and rounding down would under-allocate).  An empty request is read
  as 0 (repair ``missing_plan_<field>_read_as_0``).  More GPUs than any machine has is kept
  (unschedulable in a replay, as in the 2023 adapter) and counted (``more_gpus_than_any_node``).
- ``gpu_spec``: with ``pai_group_tag_table``, [gpu_type_spec] of the job (the user's
  requirement; empty or no row: any model); without it, [gpu_type] of the task (the type the
  trace assigned).  MISC and CPU name no single model: null.  Only on tasks asking for a GPU.
  A model no machine has is kept and counted (repair ``gpu_spec_model_absent``, the models
  named in ``manifest.notes``).
- ``gang_id``: ``JOB/TASK`` on every instance of a task with inst_num > 1 (distributed
  training: workers/ps start together or not at all); null for inst_num 1.
- usage (``pai_sensor_table``, joined on worker_name): ``cpu_used`` = cpu_usage/100 cores,
  ``mem_used`` = avg_mem GB (lifetime means, so no ``task_usage`` rows).  GPU utilization,
  GPU memory, max_mem and network columns have no canonical column: not used (notes).
- time: the published clock is shifted by an undisclosed constant; times here are seconds
  from the earliest time read (stated in ``manifest.time_origin`` with its raw value, so the
  UTC+8 time of day can be recovered).  Window: 0 to the latest time read (``generated.json``
  wins, :mod:`pipeline.ingest.window`).
- not read: ``pai_machine_metric`` (machine-level metrics per instance, not the instance's
  own usage) and ``pai_group_tag_table.user`` (the job table's user is used).

Bad rows are rejected by reason (:mod:`pipeline.ingest.csvparts` for format and value errors;
``duplicate_job``, ``duplicate_task``, ``unknown_job``, ``no_instances``,
``duplicate_instance``, ``unknown_task``, ``duplicate_inst_id``, ``duplicate_worker_name``,
``unknown_instance``, ``ambiguous_worker_name``, ``instance_not_emitted`` here), never a
traceback.  The cross-table steps run in DuckDB with bounded memory
(:mod:`pipeline.ingest.pai2020.assemble`).
"""

from pipeline.ingest.pai2020.adapter import Pai2020

__all__ = ["Pai2020"]
