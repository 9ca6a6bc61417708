"""The published tables of cluster-trace-gpu-v2020, in the exact column order of the
``*.header`` files (the data files have no header row), and the notes every ingest states."""

from __future__ import annotations

from pipeline.ingest.csvparts import FLOAT, INT, STR, Column, RawTable

# Numbers are written as floats in every table ("4550879.0", inst_num "1.0"); INT accepts them.
MACHINE_SPEC = RawTable("pai_machine_spec", "pai_machine_spec*.csv*", (
    Column("machine", STR, True), Column("gpu_type", STR),
    Column("cap_cpu", FLOAT, True, True), Column("cap_mem", FLOAT, True, True),
    Column("cap_gpu", FLOAT, True, True),
))
JOB = RawTable("pai_job_table", "pai_job_table*.csv*", (
    Column("job_name", STR, True), Column("inst_id", STR), Column("user", STR, True),
    Column("status", STR, True), Column("start_time", FLOAT, True, True),
    Column("end_time", FLOAT, False, True),
))
TASK = RawTable("pai_task_table", "pai_task_table*.csv*", (
    Column("job_name", STR, True), Column("task_name", STR, True),
    Column("inst_num", INT, True, True), Column("status", STR, True),
    Column("start_time", FLOAT, False, True), Column("end_time", FLOAT, False, True),
    Column("plan_cpu", FLOAT, False, True), Column("plan_mem", FLOAT, False, True),
    Column("plan_gpu", FLOAT, False, True), Column("gpu_type", STR),
))
INSTANCE = RawTable("pai_instance_table", "pai_instance_table*.csv*", (
    Column("job_name", STR, True), Column("task_name", STR, True),
    Column("inst_name", STR, True), Column("worker_name", STR), Column("inst_id", STR),
    Column("status", STR, True), Column("start_time", FLOAT, False, True),
    Column("end_time", FLOAT, False, True), Column("machine", STR),
), required=False)
SENSOR = RawTable("pai_sensor_table", "pai_sensor_table*.csv*", (
    Column("job_name", STR), Column("task_name", STR), Column("worker_name", STR, True),
    Column("inst_id", STR), Column("machine", STR), Column("gpu_name", STR),
    Column("cpu_usage", FLOAT, False, True), Column("gpu_wrk_util", FLOAT),
    Column("avg_mem", FLOAT, False, True), Column("max_mem", FLOAT),
    Column("avg_gpu_wrk_mem", FLOAT), Column("max_gpu_wrk_mem", FLOAT), Column("read", FLOAT),
    Column("write", FLOAT), Column("read_count", FLOAT), Column("write_count", FLOAT),
), required=False)
GROUP_TAG = RawTable("pai_group_tag_table", "pai_group_tag_table*.csv*", (
    Column("inst_id", STR, True), Column("user", STR), Column("gpu_type_spec", STR),
    Column("group", STR), Column("workload", STR),
), required=False)

# Published statuses -> how the trace recorded the work (schema.END_EVENTS); Waiting never ran.
END_EVENTS = {"Terminated": "finished", "Failed": "failed", "Running": "censored"}
NOT_STARTED = "Waiting"
# gpu_type values that name no single GPU model (never a gpu_spec; CPU is no model at all).
NOT_A_MODEL = ("MISC", "CPU")

NOTES = {
    "job_id": "job_name (the key of pai_task_table and pai_instance_table); the published "
              "inst_id (1:1 with job_name, the key of pai_sensor_table and "
              "pai_group_tag_table) is kept as jobs.inst_id",
    "users": "user of pai_job_table (the user column of pai_group_tag_table is not read); "
             "queue null (PAI publishes no queues)",
    "jobs": "status kept as jobs.status; with pai_group_tag_table, group -> jobs.group_tag "
            "(instances with similar inputs: repeated work) and workload -> jobs.workload; "
            "a job none of whose tasks is emitted is dropped (no_task_emitted)",
    "requests": "cpu = plan_cpu/100 cores, mem = plan_mem GB, gpu = plan_gpu/100 (below 1: a "
                "share of one device); an empty request is read as 0 (repair "
                "missing_<field>_read_as_0: CPU-only tasks leave plan_gpu empty); plan_gpu above "
                "100 that is not a multiple of 100 is rounded up to whole devices (repair "
                "gpu_rounded_up_to_whole_devices); more GPUs than any machine has is kept "
                "(unschedulable in a replay) and counted (repair more_gpus_than_any_node)",
    "gpu_spec": "with pai_group_tag_table: [gpu_type_spec] of the job (the user's requirement; "
                "empty or no row: any model); without it: [gpu_type] of the task (the type "
                "the trace assigned, which pins a replay to it).  MISC (mixed older GPUs) and "
                "CPU name no model: null.  Only on tasks asking for a GPU.  A model no machine "
                "has is kept and counted (repair gpu_spec_model_absent)",
    "gang_id": "JOB/TASK for every instance of a task with inst_num > 1 (distributed training: "
               "workers and ps start together or not at all); null for inst_num 1",
    "end_event": "Terminated -> finished, Failed -> failed, Running -> censored at the window "
                 "end; Waiting or no start_time -> dropped (never_started); an instance with "
                 "start == end gets 1 s (repair zero_duration)",
    "submit_s": "the job's start_time (its submission; the gap to the task's start is the "
                "scheduling wait); an instance that started earlier is submitted at its start "
                "(repair started_before_job_submit)",
    "usage": "with pai_instance_table and pai_sensor_table: cpu_used = cpu_usage/100 cores, "
             "mem_used = avg_mem GB (lifetime means per worker_name, joined on worker_name); "
             "not used: gpu_wrk_util, max_mem, avg/max_gpu_wrk_mem, read/write(_count), "
             "gpu_name (no canonical column; no series, so no task_usage rows)",
    "not_read": "pai_machine_metric (machine-level metrics per instance, not the instance's "
                "own usage); pai_group_tag_table.user",
    "machines": "one per pai_machine_spec row: cpu = cap_cpu cores, mem = cap_mem GB, gpu = "
                "cap_gpu devices, gpu_model = gpu_type (null for CPU machines; MISC, older "
                "K40m/K80/M60 GPUs, kept as a model name); no racks, no removals: every "
                "machine is present for the whole window",
}
