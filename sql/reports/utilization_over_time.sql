-- Provisioned nodes and allocated cpu/mem over time, per run, on one time grid per trace.
-- A trace's horizon (the latest node-down or task end over its runs) is cut into buckets of
-- the roundest width (1 min ... 1 day) that gives at most `max_time_buckets` buckets (a
-- `settings` row, default 200); values are time-weighted means over each bucket.  Tasks
-- still running at the end of a run (no end_s) count as running to the horizon.
with summary as (
    select run_id, trace, policy, params_text, seed, label from policy_summary
),

node_intervals as (
    select * from node_intervals
),

task_runs as (
    select * from task_runs
),

settings as (
    select * from settings
),

max_buckets as (
    select coalesce(
        max(try_cast(value as integer)) filter (where key = 'max_time_buckets'), 200
    ) as n
    from settings
),

run_horizons as (
    select run_id, max(coalesce(down_s, up_s)) as horizon_s from node_intervals group by run_id
    union all
    select run_id, max(coalesce(end_s, start_s)) as horizon_s from task_runs group by run_id
),

trace_horizons as (
    select summary.trace, max(run_horizons.horizon_s) as horizon_s
    from summary
    join run_horizons using (run_id)
    group by summary.trace
    having max(run_horizons.horizon_s) > 0
),

trace_grids as (
    select
        trace_horizons.trace,
        trace_horizons.horizon_s,
        coalesce(
            list_min(list_filter(
                [60, 300, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400],
                lambda w: trace_horizons.horizon_s / w <= max_buckets.n
            )),
            trace_horizons.horizon_s / max_buckets.n
        )::double as bucket_s
    from trace_horizons
    cross join max_buckets
),

grid as (
    select
        summary.*,
        trace_grids.bucket_s,
        trace_grids.horizon_s,
        unnest(range(0, ceil(trace_grids.horizon_s / trace_grids.bucket_s)::bigint)) as bucket
    from summary
    join trace_grids using (trace)
),

-- Intervals ([from_s, to_s) with a cpu/mem amount) spread over the buckets they overlap.
node_spans as (
    select
        node_intervals.run_id,
        greatest(node_intervals.up_s, 0) as from_s,
        least(coalesce(node_intervals.down_s, trace_grids.horizon_s), trace_grids.horizon_s)
            as to_s,
        node_intervals.cpu,
        node_intervals.mem,
        trace_grids.bucket_s
    from node_intervals
    join summary using (run_id)
    join trace_grids using (trace)
),

task_spans as (
    select
        task_runs.run_id,
        greatest(task_runs.start_s, 0) as from_s,
        least(coalesce(task_runs.end_s, trace_grids.horizon_s), trace_grids.horizon_s)
            as to_s,
        task_runs.cpu,
        task_runs.mem,
        trace_grids.bucket_s
    from task_runs
    join summary using (run_id)
    join trace_grids using (trace)
    where task_runs.start_s is not null and task_runs.machine_id is not null
),

node_pieces as (
    select
        run_id, cpu, mem, from_s, to_s, bucket_s,
        unnest(range(floor(from_s / bucket_s)::bigint, ceil(to_s / bucket_s)::bigint)) as bucket
    from node_spans
    where to_s > from_s
),

task_pieces as (
    select
        run_id, cpu, mem, from_s, to_s, bucket_s,
        unnest(range(floor(from_s / bucket_s)::bigint, ceil(to_s / bucket_s)::bigint)) as bucket
    from task_spans
    where to_s > from_s
),

node_seconds as (
    select
        run_id,
        bucket,
        sum(overlap_s)       as node_s,
        sum(overlap_s * cpu) as cpu_s,
        sum(overlap_s * mem) as mem_s
    from (
        select
            *,
            least(to_s, (bucket + 1) * bucket_s) - greatest(from_s, bucket * bucket_s)
                as overlap_s
        from node_pieces
    )
    group by run_id, bucket
),

task_seconds as (
    select
        run_id,
        bucket,
        sum(overlap_s * cpu) as cpu_s,
        sum(overlap_s * mem) as mem_s
    from (
        select
            *,
            least(to_s, (bucket + 1) * bucket_s) - greatest(from_s, bucket * bucket_s)
                as overlap_s
        from task_pieces
    )
    group by run_id, bucket
),

widths as (
    select
        grid.*,
        grid.bucket * grid.bucket_s as bucket_start_s,
        least((grid.bucket + 1) * grid.bucket_s, grid.horizon_s) as bucket_end_s
    from grid
),

final as (
    select
        widths.run_id,
        widths.trace,
        widths.policy,
        widths.params_text,
        widths.seed,
        widths.label,
        widths.bucket,
        widths.bucket_start_s,
        widths.bucket_end_s,
        coalesce(node_seconds.node_s, 0) / (widths.bucket_end_s - widths.bucket_start_s)
            as nodes_provisioned,
        coalesce(node_seconds.cpu_s, 0) / (widths.bucket_end_s - widths.bucket_start_s)
            as cpu_provisioned,
        coalesce(node_seconds.mem_s, 0) / (widths.bucket_end_s - widths.bucket_start_s)
            as mem_provisioned,
        coalesce(task_seconds.cpu_s, 0) / (widths.bucket_end_s - widths.bucket_start_s)
            as cpu_allocated,
        coalesce(task_seconds.mem_s, 0) / (widths.bucket_end_s - widths.bucket_start_s)
            as mem_allocated,
        task_seconds.cpu_s / nullif(node_seconds.cpu_s, 0) as cpu_alloc_frac,
        task_seconds.mem_s / nullif(node_seconds.mem_s, 0) as mem_alloc_frac
    from widths
    left join node_seconds using (run_id, bucket)
    left join task_seconds using (run_id, bucket)
)

select * from final
order by trace, policy, label, seed, run_id, bucket
