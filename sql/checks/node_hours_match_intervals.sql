-- Must return no rows: each run's node_hours metric equals the provisioned time of its node
-- intervals, sum(down_s - up_s) / 3600 (relative tolerance 1e-6), every interval is closed
-- (down_s >= up_s), and the metric is present.
with scope as (
    select * from check_scope
),

runs as (
    select * from runs where run_id in (select run_id from scope)
),

node_intervals as (
    select * from node_intervals where run_id in (select run_id from scope)
),

metrics as (
    select * from metrics where run_id in (select run_id from scope)
),

interval_hours as (
    select
        runs.run_id,
        coalesce(sum(node_intervals.down_s - node_intervals.up_s), 0) / 3600 as interval_hours,
        -- (a run that provisioned no node has no interval: the left join's empty row is
        -- none)
        count(*) filter (where node_intervals.machine_id is not null
                         and (node_intervals.down_s is null or node_intervals.up_s is null))
            as open_intervals,
        count(*) filter (where node_intervals.down_s < node_intervals.up_s)
            as reversed_intervals
    from runs
    left join node_intervals using (run_id)
    group by runs.run_id
),

metric_hours as (
    select run_id, max(value) as node_hours
    from metrics
    where metric = 'node_hours'
    group by run_id
),

compared as (
    select
        interval_hours.*,
        metric_hours.node_hours,
        case
            when open_intervals > 0 then open_intervals || ' intervals without up_s/down_s'
            when reversed_intervals > 0 then reversed_intervals || ' intervals with down_s < up_s'
            when metric_hours.node_hours is null then 'node_hours metric missing'
            when abs(metric_hours.node_hours - interval_hours.interval_hours)
                > 1e-6 * greatest(abs(interval_hours.interval_hours), 1)
                then 'node_hours differs from the intervals'
        end as reason
    from interval_hours
    left join metric_hours using (run_id)
),

final as (
    select run_id, node_hours, interval_hours, reason from compared where reason is not null
)

select * from final
order by run_id
