-- Per run: true peaks over the measurement window, from every change (not maxima of time-
-- bucket averages): the most nodes provisioned at once, and the most cpu and memory
-- allocated at once (each task's last attempt; ends free capacity before starts at the same
-- instant); and the work the trace offered in the window (`offered_task_s`: the recorded
-- durations of the tasks submitted by its end, the scale for the backlog).
with node_events as (
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

alloc_at as (
    select
        run_id,
        sum(cpu) over w as cpu_allocated,
        sum(mem) over w as mem_allocated
    from task_events
    window w as (partition by run_id order by t, cpu rows unbounded preceding)
),

final as (
    select
        runs.run_id,
        runs.trace,
        (select max(nodes) from nodes_at where nodes_at.run_id = runs.run_id)
            as peak_nodes,
        (select max(cpu_allocated) from alloc_at where alloc_at.run_id = runs.run_id)
            as peak_cpu_allocated,
        (select max(mem_allocated) from alloc_at where alloc_at.run_id = runs.run_id)
            as peak_mem_allocated,
        (select sum(duration_s) from task_runs
         where task_runs.run_id = runs.run_id and task_runs.outcome <> 'unschedulable'
           and task_runs.submit_s <= coalesce(runs.measured_to_s, task_runs.submit_s))
            as offered_task_s
    from runs
)

select * from final
order by trace, run_id
