-- Per run of a queue-based scheduler and leaf queue: how long its tasks waited and its jobs
-- took (percentiles, linear interpolation), and how much of its work the run left undone.
with task_runs as (
    select * from task_runs where queue is not null
),

tasks as (
    select
        run_id,
        queue,
        count(*) as tasks,
        count(*) filter (where first_start_s is not null) as started,
        quantile_cont(first_start_s - ready_s, 0.5)
            filter (where first_start_s is not null) as wait_p50_s,
        quantile_cont(first_start_s - ready_s, 0.95)
            filter (where first_start_s is not null) as wait_p95_s,
        max(first_start_s - ready_s) filter (where first_start_s is not null) as wait_max_s,
        coalesce(sum(preemptions), 0) as preemptions,
        coalesce(sum(remaining_s) filter (where outcome in ('unfinished', 'preempted')), 0)
            as backlog_task_s
    from task_runs
    group by run_id, queue
),

jobs as (
    select run_id, queue, job_id, max(end_s) - min(submit_s) as jct_s,
           bool_and(outcome = 'finished') as done
    from task_runs
    group by run_id, queue, job_id
),

job_times as (
    select run_id, queue, quantile_cont(jct_s, 0.95) as jct_p95_s
    from jobs
    where done
    group by run_id, queue
),

final as (
    select runs.trace, tasks.*, job_times.jct_p95_s
    from tasks
    join runs using (run_id)
    left join job_times using (run_id, queue)
)

select * from final
order by trace, run_id, queue
