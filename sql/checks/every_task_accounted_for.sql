-- Must return no rows: each task of a run appears exactly once with a valid outcome and
-- locality; a finished task has a machine, a start and an end no earlier than its start;
-- a run has as many tasks as its trace (when the trace's manifest was found at load time);
-- and the tasks_finished / tasks_unschedulable metrics count the same tasks.  Copies of
-- tasks appended by the GPU workload-inflation experiment (copy_of set) are extra arrivals:
-- the trace's tasks are the rest.
with scope as (
    select * from check_scope
),

runs as (
    select * from runs where run_id in (select run_id from scope)
),

task_runs as not materialized (
    select * from task_runs where run_id in (select run_id from scope)
),

metrics as (
    select * from metrics where run_id in (select run_id from scope)
),

-- one pass over the (run, task) pairs gives both the duplicates and the task counts
per_task as (
    select
        run_id,
        task_id,
        count(*) as n,
        bool_or(copy_of is null) as original,
        count(*) filter (where outcome = 'finished') as finished,
        count(*) filter (where outcome = 'unschedulable') as unschedulable
    from task_runs
    group by run_id, task_id
),

duplicates as (
    select run_id, task_id, 'task appears ' || n || ' times' as reason
    from per_task
    where n > 1
),

bad_rows as (
    select
        run_id,
        task_id,
        case
            when task_id is null then 'task_id is null'
            when outcome is null
                or outcome not in ('finished', 'preempted', 'killed', 'unschedulable', 'unfinished')
                then 'invalid outcome ' || coalesce('''' || outcome || '''', 'NULL')
            when locality is not null and locality not in ('node', 'rack', 'any')
                then 'invalid locality ''' || locality || ''''
            when outcome = 'finished' and (start_s is null or end_s is null)
                then 'finished without start_s/end_s'
            when outcome = 'finished' and machine_id is null then 'finished without machine_id'
            when end_s < start_s then 'end_s before start_s'
        end as reason
    from task_runs
),

task_counts as (
    select
        runs.run_id,
        runs.trace_tasks,
        count(per_task.task_id) filter (where per_task.original) as tasks,
        coalesce(sum(per_task.finished) filter (where per_task.task_id is not null), 0)
            as finished,
        coalesce(sum(per_task.unschedulable) filter (where per_task.task_id is not null), 0)
            as unschedulable
    from runs
    left join per_task using (run_id)
    group by runs.run_id, runs.trace_tasks
),

metric_counts as (
    select
        run_id,
        max(value) filter (where metric = 'tasks_finished')      as tasks_finished,
        max(value) filter (where metric = 'tasks_unschedulable') as tasks_unschedulable
    from metrics
    group by run_id
),

count_mismatches as (
    select run_id, null as task_id, unnest(list_filter([
        case when trace_tasks is not null and tasks <> trace_tasks
             then tasks || ' tasks recorded, the trace has ' || trace_tasks end,
        case when tasks_finished is not null and finished <> tasks_finished
             then finished || ' finished tasks, metric tasks_finished = ' || tasks_finished end,
        case when tasks_unschedulable is not null and unschedulable <> tasks_unschedulable
             then unschedulable || ' unschedulable tasks, metric tasks_unschedulable = '
                  || tasks_unschedulable end
    ], lambda r: r is not null)) as reason
    from task_counts
    left join metric_counts using (run_id)
),

final as (
    select run_id, task_id, reason from duplicates
    union all
    select run_id, task_id, reason from bad_rows where reason is not null
    union all
    select run_id, task_id, reason from count_mismatches
)

select * from final
order by run_id, task_id, reason
