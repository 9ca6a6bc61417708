-- Per run: true peaks over the measurement window, from every change (not maxima of time-
-- bucket averages): the most nodes provisioned at once, and the most cpu and memory
-- allocated at once (each task's last attempt; ends free capacity before starts at the same
-- instant); and the work the trace offered in the window (`offered_task_s`: the recorded
-- durations of the tasks submitted by its end, the scale for the backlog).
-- The peaks do not depend on the order rows are stored in (a sum of doubles does, in its
-- last digits: two copies of one 29-day warehouse gave two peaks): running sums go in a full
-- order of the events and day totals are summed in fixed point (decimal, exact).
with run_codes as (
    -- runs by number: DuckDB partitions and sorts on an integer key several times faster
    -- than on the text run id (29-day trace: see completion_cdf)
    select run_id, row_number() over (order by run_id) as r from runs
),

node_events as (
    select run_id, up_s as t, 1 as delta from node_intervals
    union all
    select run_id, down_s as t, -1 as delta from node_intervals
),

nodes_at as (
    select run_id, sum(delta) over (partition by run_id order by t, delta
                                    rows unbounded preceding) as nodes
    from node_events
),

task_events as (
    select run_id, start_s as t, cpu, mem
    from task_runs where start_s is not null
    union all
    select run_id, coalesce(end_s, runs.measured_to_s) as t, -cpu, -mem
    from task_runs join runs using (run_id)
    where start_s is not null and coalesce(end_s, runs.measured_to_s) is not null
),

-- The running sums go a day at a time (a window partition of every event of a run ran out
-- of DuckDB's memory on a 29-day trace): the allocation after an event is what the earlier
-- days left allocated plus the running sum within its day.
task_days as (
    select run_codes.r, cast(floor(t / 86400) as integer) as day, t, cpu, mem
    from task_events join run_codes using (run_id)
),

within_day as (
    select
        r,
        day,
        sum(cpu) over w as cpu_in_day,
        sum(mem) over w as mem_in_day
    from task_days
    window w as (partition by r, day order by t, cpu, mem rows unbounded preceding)
),

days as (
    select r, day, sum(cast(cpu as decimal(38, 9))) as cpu_day,
           sum(cast(mem as decimal(38, 9))) as mem_day
    from task_days
    group by r, day
),

before_day as (
    select
        r,
        day,
        coalesce(sum(cpu_day) over earlier, 0) as cpu_before,
        coalesce(sum(mem_day) over earlier, 0) as mem_before
    from days
    window earlier as (partition by r order by day
                       rows between unbounded preceding and 1 preceding)
),

alloc_at as (
    select
        within_day.r,
        cast(before_day.cpu_before as double) + within_day.cpu_in_day as cpu_allocated,
        cast(before_day.mem_before as double) + within_day.mem_in_day as mem_allocated
    from within_day
    join before_day using (r, day)
),

-- one aggregate per source (correlated subqueries read alloc_at once per column)
alloc_peaks as (
    select run_codes.run_id, max(cpu_allocated) as peak_cpu_allocated,
           max(mem_allocated) as peak_mem_allocated
    from alloc_at join run_codes using (r)
    group by run_codes.run_id
),

node_peaks as (
    select run_id, max(nodes) as peak_nodes from nodes_at group by run_id
),

offered as (
    select task_runs.run_id, sum(task_runs.duration_s) as offered_task_s
    from task_runs join runs using (run_id)
    where task_runs.outcome <> 'unschedulable'
      and task_runs.submit_s <= coalesce(runs.measured_to_s, task_runs.submit_s)
    group by task_runs.run_id
),

final as (
    select
        runs.run_id,
        runs.trace,
        node_peaks.peak_nodes,
        alloc_peaks.peak_cpu_allocated,
        alloc_peaks.peak_mem_allocated,
        offered.offered_task_s
    from runs
    left join node_peaks using (run_id)
    left join alloc_peaks using (run_id)
    left join offered using (run_id)
)

select * from final
order by trace, run_id
