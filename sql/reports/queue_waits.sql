-- Per run of a queue-based scheduler and leaf queue: how long its tasks waited and its jobs
-- took (percentiles, linear interpolation as quantile_cont), and how much of its work the
-- run left undone.
with task_runs as (
    select * from task_runs where queue is not null
),

tasks as (
    select
        run_id,
        queue,
        count(*) as tasks,
        count(*) filter (where first_start_s is not null) as started,
        max(first_start_s - ready_s) filter (where first_start_s is not null) as wait_max_s,
        coalesce(sum(preemptions), 0) as preemptions,
        coalesce(sum(remaining_s) filter (where outcome in ('unfinished', 'preempted')), 0)
            as backlog_task_s
    from task_runs
    group by run_id, queue
),

-- (run, queue) pairs by number: DuckDB sorts and partitions integers several times faster
-- than text (see completion_cdf)
groups as (
    select run_id, queue, row_number() over (order by run_id, queue) as g
    from (select distinct run_id, queue from task_runs)
),

waits as (
    select groups.g, task_runs.first_start_s - task_runs.ready_s as wait_s
    from task_runs
    join groups using (run_id, queue)
    where task_runs.first_start_s is not null and task_runs.ready_s is not null
),

-- The wait percentiles by position in sorted order (value i of n at fraction * (n - 1),
-- interpolated between floor and ceiling), as completion_cdf does: quantile_cont holds
-- every task's wait in memory and ran out of DuckDB's 2 GB on seven 29-day runs (244 M
-- tasks); a sort spills to disk.
positions as (
    select g, n, fraction, fraction * (n - 1) as pos
    from (select g, count(*) as n from waits group by g) as counted
    cross join (select unnest([0.5, 0.95]) as fraction) as fractions
),

wanted as (
    select g, cast(floor(pos) as bigint) as i from positions
    union
    select g, cast(ceil(pos) as bigint) as i from positions
),

picked as materialized (
    select ranked.g, ranked.i, ranked.wait_s
    from (
        select g, wait_s, row_number() over (partition by g order by wait_s) - 1 as i
        from waits
    ) as ranked
    join wanted using (g, i)
),

wait_quantiles as (
    select
        groups.run_id,
        groups.queue,
        max(lo.wait_s + (hi.wait_s - lo.wait_s) * (positions.pos - floor(positions.pos)))
            filter (where positions.fraction = 0.5) as wait_p50_s,
        max(lo.wait_s + (hi.wait_s - lo.wait_s) * (positions.pos - floor(positions.pos)))
            filter (where positions.fraction = 0.95) as wait_p95_s
    from positions
    join picked as lo on lo.g = positions.g and lo.i = floor(positions.pos)
    join picked as hi on hi.g = positions.g and hi.i = ceil(positions.pos)
    join groups on groups.g = positions.g
    group by groups.run_id, groups.queue
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
    select
        runs.trace,
        tasks.run_id,
        tasks.queue,
        tasks.tasks,
        tasks.started,
        wait_quantiles.wait_p50_s,
        wait_quantiles.wait_p95_s,
        tasks.wait_max_s,
        tasks.preemptions,
        tasks.backlog_task_s,
        job_times.jct_p95_s
    from tasks
    join runs using (run_id)
    left join wait_quantiles using (run_id, queue)
    left join job_times using (run_id, queue)
)

select * from final
order by trace, run_id, queue
