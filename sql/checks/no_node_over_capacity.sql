-- Must return no rows: at every task start, the cpu and mem allocated on the task's node
-- (tasks with start_s <= t < end_s there: ends free capacity before starts at the same
-- instant, and tasks starting together count for each other) fit the
-- capacity of the node interval provisioned at that time, and some interval is provisioned.
-- task_runs holds each task's last attempt, so earlier attempts are not seen.  Opportunistic
-- containers (`task_runs.opportunistic`: runs with `opp_*` parameters) are left out: they
-- run beyond the allocated capacity by design (NM queues, over-allocation) and are killed
-- or paused when the guaranteed ones need the room; guaranteed containers must still fit.
with scope as (
    select * from check_scope
),

task_runs as (
    select * from task_runs where run_id in (select run_id from scope)
),

node_intervals as (
    select * from node_intervals where run_id in (select run_id from scope)
),

placed as (
    select run_id, machine_id, task_id, start_s, end_s, coalesce(cpu, 0) as cpu,
           coalesce(mem, 0) as mem
    from task_runs
    where start_s is not null and machine_id is not null
      and not coalesce(opportunistic, false)
),

events as (
    select run_id, machine_id, task_id, start_s as t_s, 1 as is_start, cpu, mem from placed
    union all
    select run_id, machine_id, task_id, end_s as t_s, 0 as is_start, -cpu, -mem from placed
    where end_s is not null
),

running as (
    select
        *,
        sum(cpu) over node_time as cpu_allocated,
        sum(mem) over node_time as mem_allocated
    from events
    -- range, not rows: tasks starting at the same instant all count for each other
    window node_time as (
        partition by run_id, machine_id
        order by t_s, is_start
        range between unbounded preceding and current row
    )
),

starts as (
    select * from running where is_start = 1
),

with_capacity as (
    select
        starts.run_id,
        starts.machine_id,
        starts.task_id,
        starts.t_s as start_s,
        starts.cpu_allocated,
        starts.mem_allocated,
        node_intervals.up_s,
        node_intervals.down_s,
        node_intervals.cpu as cpu_capacity,
        node_intervals.mem as mem_capacity
    from starts
    asof left join node_intervals
        on starts.run_id = node_intervals.run_id
        and starts.machine_id = node_intervals.machine_id
        and starts.t_s >= node_intervals.up_s
),

final as (
    select
        *,
        case
            when up_s is null or start_s >= down_s then 'node not provisioned at task start'
            when cpu_allocated > cpu_capacity * (1 + 1e-9) + 1e-9 then 'cpu over capacity'
            when mem_allocated > mem_capacity * (1 + 1e-9) + 1e-9 then 'mem over capacity'
        end as reason
    from with_capacity
)

select * from final
where reason is not null
order by run_id, machine_id, start_s, task_id
