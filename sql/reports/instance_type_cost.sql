-- Per run and instance type (runs on priced instance types: Kubernetes cluster models): how
-- many instances were bought, their node-hours and cost over the run's measurement window
-- (each interval clipped to [measured_from_s, measured_to_s] and rounded up to its billing
-- granularity, as the cost_usd metric is), and the type's share of the run's cost.
-- Runs of one price (fixed and elastic clusters, instance_type null) have no rows.
with intervals as (
    select
        node_intervals.run_id,
        node_intervals.instance_type,
        node_intervals.machine_id,
        node_intervals.price_per_hour,
        node_intervals.billing_s,
        greatest(least(node_intervals.down_s, coalesce(runs.measured_to_s, 'infinity'))
                 - greatest(node_intervals.up_s, coalesce(runs.measured_from_s, '-infinity')),
                 0) as provisioned_s
    from node_intervals
    join runs using (run_id)
    where node_intervals.instance_type is not null
),

per_type as (
    select
        run_id,
        instance_type,
        count(distinct machine_id)                                        as instances,
        max(price_per_hour)                                               as price_per_hour,
        sum(provisioned_s) / 3600                                         as node_hours,
        sum(ceil(provisioned_s / billing_s) * billing_s / 3600 * price_per_hour) as cost_usd
    from intervals
    group by run_id, instance_type
),

final as (
    select
        per_type.*,
        cost_usd / nullif(sum(cost_usd) over (partition by run_id), 0) as cost_share
    from per_type
)

select * from final
order by run_id, cost_usd desc, instance_type
