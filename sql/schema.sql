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

create table if not exists node_intervals (
    run_id     varchar not null,
    machine_id varchar,
    up_s       double,
    down_s     double,
    cpu        double,
    mem        double
);

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
