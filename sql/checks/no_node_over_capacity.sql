-- Must return no rows: at every task start, the cpu and mem allocated on the task's node
-- (tasks with start_s <= t < end_s there: ends free capacity before starts at the same
-- instant, and tasks starting together count for each other) fit the
-- capacity of the node interval provisioned at that time, and some interval is provisioned.
-- task_runs holds each task's last attempt, so earlier attempts are not seen.  Opportunistic
-- containers (`task_runs.opportunistic`: runs with `opp_*` parameters) are left out: they
-- run beyond the allocated capacity by design (NM queues, over-allocation) and are killed
-- or paused when the guaranteed ones need the room; guaranteed containers must still fit.
-- The running sums partition by an integer node number (the text run and machine ids sorted
-- 2-3x slower: 236 -> 97 s on a 35 M-task run) and carry no task id: the tasks of a failing
-- start are found afterwards (tasks starting together on a node share one allocation).
with scope as (
    select * from check_scope
),

task_runs as (
    select * from task_runs where run_id in (select run_id from scope)
),

node_intervals as (
    select * from node_intervals where run_id in (select run_id from scope)
),

-- every provisioned node of a run, numbered
nodes as (
    select run_id, machine_id, row_number() over (order by run_id, machine_id) as node
    from (select distinct run_id, machine_id from node_intervals)
),

placed as (
    select run_id, machine_id, task_id, start_s, end_s, coalesce(cpu, 0) as cpu,
           coalesce(mem, 0) as mem
    from task_runs
    where start_s is not null and machine_id is not null
      and not coalesce(opportunistic, false)
),

placed_on_nodes as (
    select nodes.node, placed.start_s, placed.end_s, placed.cpu, placed.mem
    from placed join nodes using (run_id, machine_id)
),

events as (
    select node, start_s as t_s, 1 as is_start, cpu, mem from placed_on_nodes
    union all
    select node, end_s as t_s, 0 as is_start, -cpu, -mem from placed_on_nodes
    where end_s is not null
),

running as (
    select
        *,
        sum(cpu) over node_time as cpu_allocated,
        sum(mem) over node_time as mem_allocated
    from events
    window node_time as (
        partition by node
        order by t_s, is_start
        range between unbounded preceding and current row
    )
),

starts as (
    select node, t_s, cpu_allocated, mem_allocated from running where is_start = 1
),

intervals as (
    select nodes.node, node_intervals.up_s, node_intervals.down_s, node_intervals.cpu,
           node_intervals.mem
    from node_intervals join nodes using (run_id, machine_id)
),

with_capacity as (
    select
        starts.node,
        starts.t_s as start_s,
        starts.cpu_allocated,
        starts.mem_allocated,
        intervals.up_s,
        intervals.down_s,
        intervals.cpu as cpu_capacity,
        intervals.mem as mem_capacity
    from starts
    asof left join intervals
        on starts.node = intervals.node
        and starts.t_s >= intervals.up_s
),

over as (
    select
        *,
        case
            when up_s is null or start_s >= down_s then 'node not provisioned at task start'
            when cpu_allocated > cpu_capacity * (1 + 1e-9) + 1e-9 then 'cpu over capacity'
            when mem_allocated > mem_capacity * (1 + 1e-9) + 1e-9 then 'mem over capacity'
        end as reason
    from with_capacity
),

failing as (
    select nodes.run_id, nodes.machine_id, placed.task_id, over.start_s, over.cpu_allocated,
           over.mem_allocated, over.up_s, over.down_s, over.cpu_capacity, over.mem_capacity,
           over.reason
    -- one row per failing start instant of a node (its starts share it), then its tasks
    from (select distinct * from over where reason is not null) as over
    join nodes using (node)
    join placed on placed.run_id = nodes.run_id and placed.machine_id = nodes.machine_id
        and placed.start_s = over.start_s
),

-- tasks on a machine that no interval of their run provisions
unprovisioned as (
    select run_id, machine_id, task_id, start_s, null::double, null::double, null::double,
           null::double, null::double, null::double, 'node not provisioned at task start'
    from placed anti join nodes using (run_id, machine_id)
),

final as (
    select * from failing
    union all
    select * from unprovisioned
)

select * from final
order by run_id, machine_id, start_s, task_id
