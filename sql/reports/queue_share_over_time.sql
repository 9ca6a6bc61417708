-- Each leaf queue's allocated share of the provisioned cluster over time, against its
-- guaranteed share, and what the leaf's tasks asked for, for runs whose policy has queues
-- (the `queues` table).  Same time grid and time-weighting as utilization_over_time; tasks
-- still running (or still waiting) at the end count to the horizon.  A share is of the
-- cluster provisioned in the bucket; `dominant_share` is the larger of the cpu and memory
-- shares (what the dominant resource calculator and DRF allocate by; an unqualified "share"
-- in these views is always the dominant one).  `demand_dominant_share` is the same for what
-- the leaf's tasks demanded: every task from `ready_s` (pending) until it ends, running or
-- not.  *_share_of_guarantee > 1 means the queue is borrowing idle capacity.
with grid as (
    select
        run_id, trace, policy, params_text, seed, label, bucket, bucket_start_s,
        bucket_end_s, cpu_provisioned, mem_provisioned
    from utilization_over_time
),

leaves as (
    select run_id, queue, guaranteed_share, max_share from queues where leaf
),

task_runs as (
    select * from task_runs
),

widths as (
    select
        run_id,
        max(bucket_end_s - bucket_start_s) filter (where bucket = 0) as bucket_s,
        max(bucket_end_s) as horizon_s
    from grid
    where run_id in (select run_id from leaves)
    group by run_id
),

spans as (
    -- held: each task's last attempt on a node; demand: from ready (pending) to its end.
    select
        task_runs.run_id,
        task_runs.queue,
        held.kind,
        greatest(if(held.kind = 'held', task_runs.start_s, task_runs.ready_s), 0) as from_s,
        least(coalesce(task_runs.end_s, widths.horizon_s), widths.horizon_s) as to_s,
        task_runs.cpu,
        task_runs.mem,
        widths.bucket_s
    from task_runs
    join widths using (run_id)
    cross join (values ('held'), ('demand')) as held(kind)
    where if(held.kind = 'held',
             task_runs.start_s is not null and task_runs.machine_id is not null,
             task_runs.ready_s is not null)
),

pieces as (
    select
        *,
        unnest(range(floor(from_s / bucket_s)::bigint, ceil(to_s / bucket_s)::bigint)) as bucket
    from spans
    where to_s > from_s
),

seconds as (
    select
        run_id,
        queue,
        bucket,
        sum(overlap_s * cpu) filter (where kind = 'held') as cpu_s,
        sum(overlap_s * mem) filter (where kind = 'held') as mem_s,
        sum(overlap_s * cpu) filter (where kind = 'demand') as cpu_demand_s,
        sum(overlap_s * mem) filter (where kind = 'demand') as mem_demand_s
    from (
        select
            *,
            least(to_s, (bucket + 1) * bucket_s) - greatest(from_s, bucket * bucket_s)
                as overlap_s
        from pieces
    )
    group by run_id, queue, bucket
),

final as (
    select
        grid.run_id,
        grid.trace,
        grid.policy,
        grid.params_text,
        grid.seed,
        grid.label,
        leaves.queue,
        grid.bucket,
        grid.bucket_start_s,
        grid.bucket_end_s,
        leaves.guaranteed_share,
        leaves.max_share,
        coalesce(seconds.cpu_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
            as cpu_allocated,
        coalesce(seconds.mem_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
            as mem_allocated,
        coalesce(seconds.cpu_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
            / nullif(grid.cpu_provisioned, 0) as cpu_share,
        coalesce(seconds.mem_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
            / nullif(grid.mem_provisioned, 0) as mem_share,
        coalesce(seconds.mem_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
            / nullif(grid.mem_provisioned, 0) / nullif(leaves.guaranteed_share, 0)
            as mem_share_of_guarantee,
        greatest(
            coalesce(seconds.cpu_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
                / nullif(grid.cpu_provisioned, 0),
            coalesce(seconds.mem_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
                / nullif(grid.mem_provisioned, 0)
        ) as dominant_share,
        greatest(
            coalesce(seconds.cpu_demand_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
                / nullif(grid.cpu_provisioned, 0),
            coalesce(seconds.mem_demand_s, 0) / (grid.bucket_end_s - grid.bucket_start_s)
                / nullif(grid.mem_provisioned, 0)
        ) as demand_dominant_share
    from grid
    join leaves using (run_id)
    left join seconds
        on seconds.run_id = grid.run_id
        and seconds.queue = leaves.queue
        and seconds.bucket = grid.bucket
)

select
    *,
    dominant_share / nullif(guaranteed_share, 0) as dominant_share_of_guarantee
from final
order by trace, policy, label, seed, run_id, queue, bucket
