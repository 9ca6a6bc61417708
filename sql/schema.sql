-- The warehouse tables (contract section 3), created once; `load` fills them run by run.
-- Columns a run directory brings beyond these are added by the loader as they appear.
create table if not exists runs (
    run_id       varchar not null,
    trace        varchar not null,
    trace_path   varchar,
    policy       varchar not null,
    params       json,
    seed         bigint,
    wall_s       double,
    code_version varchar,
    created_at   timestamp,  -- UTC
    cluster      json,
    extra        json,       -- run.json keys beyond the ones above
    trace_tasks  bigint,     -- tasks in the trace (its manifest.json), null when unknown
    run_path     varchar,
    loaded_at    timestamp
);

-- Since runs are measured over the trace's window and list their effective settings:
-- params = the settings actually used (configuration files included), settings = each
-- one's value and source, params_given = the parameters as the user set them.
alter table runs add column if not exists params_given json;
alter table runs add column if not exists settings json;
alter table runs add column if not exists window_start_s double;
alter table runs add column if not exists window_end_s double;
alter table runs add column if not exists window_source varchar;
alter table runs add column if not exists measured_from_s double;
alter table runs add column if not exists measured_to_s double;
alter table runs add column if not exists drained boolean;
-- the trace's content digest and what it is (format, units, machines, tasks; run.json)
alter table runs add column if not exists trace_digest varchar;
alter table runs add column if not exists trace_facts json;
-- how the run replayed its trace: 'replay' (event-driven core) or 'inflation' (the GPU
-- workload-inflation experiment: pods arrive one by one and never leave, time not modelled)
alter table runs add column if not exists mode varchar;

create table if not exists task_runs (
    run_id     varchar not null,
    task_id    varchar,
    job_id     varchar,
    "user"     varchar,
    queue      varchar,
    machine_id varchar,
    submit_s   double,
    start_s    double,
    end_s      double,
    outcome    varchar,
    attempts   integer,
    locality   varchar,
    cpu        double,
    mem        double
);

-- Written by every replay since queues came in; declared so the queue and comparison views
-- can use them on warehouses whose runs predate them (null there).
alter table task_runs add column if not exists preemptions integer;
alter table task_runs add column if not exists evictions integer;
alter table task_runs add column if not exists wasted_s double;
alter table task_runs add column if not exists first_start_s double;
-- Since replays stop at the trace's window: work left when the run stopped, and whether the
-- trace itself saw the task running at its window's end.
alter table task_runs add column if not exists remaining_s double;
alter table task_runs add column if not exists censored boolean;
alter table task_runs add column if not exists duration_s double;
alter table task_runs add column if not exists ready_s double;  -- demand in queue_share_over_time
-- Opportunistic containers and over-allocation (runs with `opp_*` parameters; all zero or
-- false otherwise, null for runs that predate them), and each task's measured usage
-- integrated over its run time (null where the trace measured none): opportunistic_effect.
alter table task_runs add column if not exists opportunistic boolean;
alter table task_runs add column if not exists opp_starts integer;
alter table task_runs add column if not exists opp_kills integer;
alter table task_runs add column if not exists opp_pauses integer;
alter table task_runs add column if not exists opp_shed integer;
alter table task_runs add column if not exists opp_queue_s double;
alter table task_runs add column if not exists opp_wasted_s double;
alter table task_runs add column if not exists used_cpu_s double;
alter table task_runs add column if not exists used_mem_s double;
-- Speculative execution (runs whose `spec` parameter names a rule; zero, false or null
-- otherwise, null for runs that predate it): the task's copies launched, whether a copy gave
-- its result, where and when the last copy ran, the copies' run time and the run time of the
-- attempts that lost (speculation_effect).  machine_id/start_s stay the original attempt's.
alter table task_runs add column if not exists spec_copies integer;
alter table task_runs add column if not exists spec_won boolean;
alter table task_runs add column if not exists spec_machine_id varchar;
alter table task_runs add column if not exists spec_start_s double;
alter table task_runs add column if not exists spec_run_s double;
alter table task_runs add column if not exists spec_wasted_s double;

-- GPU placement in the workload-inflation experiment (runs of the GPU policies: run.json
-- mode 'inflation'): a task's GPU request (devices; below 1 a share of one), the devices it
-- holds, its arrival index, and for a copy appended by inflation the task it copies.
alter table task_runs add column if not exists gpu double;
alter table task_runs add column if not exists gpu_devices integer[];
alter table task_runs add column if not exists arrival bigint;
alter table task_runs add column if not exists copy_of varchar;

-- The cluster after every pod of an inflation run, averaged per whole percent of the
-- arrived workload (GPU requested so far over GPU capacity): gpu_curve.parquet, optional.
create table if not exists gpu_curve (
    run_id      varchar not null,
    arrived_pct integer not null,
    alloc_ratio double,   -- GPU allocated / GPU capacity
    frag_gpu    double,   -- fragmentation (FGD paper), GPUs
    frag_ratio  double,   -- fragmentation / idle GPU
    pods        bigint,   -- pods arriving in this percent
    dropped     bigint    -- of which no node could host
);

-- The queue configuration of runs whose policy has queues (queues.parquet; optional).
-- Shares are fractions of the cluster; guaranteed_<r>/max_<r> in the trace's units.
create table if not exists queues (
    run_id           varchar not null,
    queue            varchar not null,  -- full path, e.g. root.analytics.science
    parent           varchar,           -- null for root
    leaf             boolean,
    depth            integer,
    weight           double,            -- share of the parent's guarantee (0..1)
    guaranteed_share double,
    max_share        double,
    guaranteed_cpu   double,
    max_cpu          double,
    guaranteed_mem   double,
    max_mem          double,
    guaranteed_gpu   double,
    max_gpu          double
);

create table if not exists node_intervals (
    run_id     varchar not null,
    machine_id varchar,
    up_s       double,
    down_s     double,
    cpu        double,
    mem        double
);

alter table node_intervals add column if not exists gpu double;
-- priced nodes (instance_type: Kubernetes cluster models; null on one-price clusters)
alter table node_intervals add column if not exists price_per_hour double;
alter table node_intervals add column if not exists billing_s double;
alter table node_intervals add column if not exists instance_type varchar;

create table if not exists metrics (
    run_id varchar not null,
    metric varchar not null,
    value  double,
    unit   varchar
);

-- Warehouse-wide settings read by the views (key -> value as text).
--   baseline_policy   the policy cost_savings compares against (a session can override it
--                     with `SET VARIABLE baseline_policy = 'name'`, as `report --baseline` does)
--   max_time_buckets  the most buckets utilization_over_time cuts a trace's horizon into
create table if not exists settings (
    key   varchar not null,
    value varchar
);

insert into settings
select * from (values ('baseline_policy', 'yarn-uniform'), ('max_time_buckets', '200')) v(key, value)
where v.key not in (select key from settings);

-- The runs the data checks look at: all of them, unless a session narrows it with
-- `SET VARIABLE check_run_ids = [...]` (load checks only the runs it just loaded).
create or replace view check_scope as
select run_id
from runs
where getvariable('check_run_ids') is null
   or list_contains(getvariable('check_run_ids'), run_id);
