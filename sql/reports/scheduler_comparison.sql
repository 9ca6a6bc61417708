-- One row per run, for comparing schedulers on one trace and cluster: cost, utilization, job
-- and wait times, fairness, preemptions and the work they cost, and for runs whose policy has
-- queues (capacity-scheduler, fair-scheduler) how the queues fared against their guarantees.
-- `cluster` is the cluster mode (`fixed`, `elastic`); where a trace has runs on several
-- configurations of one mode, the cluster's own label (`CA m5.xlarge`) or else a short
-- hash of its configuration.
-- `jain_fairness` is across users, against each user's DRF fair share given its demand
-- (metrics).  `preemption_wasted_task_s` is the run time lost to preemptions: a task's
-- `wasted_s` counts preemptions and evictions (failed machines) alike, so a task with both
-- has it split in proportion to their counts.  Queue columns (null for policies without
-- queues): `leaves` and `leaves_used` (leaves that ran tasks), `min_share_of_guarantee` and
-- `max_share_of_guarantee` over the leaves that ran tasks (mean dominant share / guaranteed
-- share, queue_summary's `dominant_share_of_guarantee`; > 1 = borrowing idle capacity), and
-- `jain_queues` (queue_summary: across leaves, of the part of its guarantee each got, up to
-- what it asked for).
with summary as (
    select * from policy_summary
),

runs as (
    select run_id, cluster from runs
),

task_runs as (
    select * from task_runs
),

queue_summary as (
    select * from queue_summary
),

clusters as (
    select
        summary.run_id,
        summary.trace,
        coalesce(summary.cluster_mode, 'fixed') as cluster_mode,
        left(md5(coalesce(runs.cluster::varchar, '')), 6) as cluster_id,
        nullif(runs.cluster ->> 'label', '') as cluster_label
    from summary
    join runs using (run_id)
),

cluster_labels as (
    select
        run_id,
        case when count(distinct cluster_id) over (partition by trace, cluster_mode) = 1
             then cluster_mode
             else coalesce(cluster_label, cluster_mode || ' #' || cluster_id) end as cluster
    from clusters
),

preemption_losses as (
    select
        run_id,
        sum(coalesce(wasted_s, 0) * coalesce(preemptions, 0)
            / nullif(coalesce(preemptions, 0) + coalesce(evictions, 0), 0))
            as preemption_wasted_task_s
    from task_runs
    where coalesce(preemptions, 0) > 0
    group by run_id
),

queue_outcomes as (
    select
        run_id,
        count(*) as leaves,
        count(*) filter (where tasks > 0) as leaves_used,
        min(dominant_share_of_guarantee) filter (where tasks > 0) as min_share_of_guarantee,
        max(dominant_share_of_guarantee) filter (where tasks > 0) as max_share_of_guarantee,
        max(jain_queues) as jain_queues
    from queue_summary
    group by run_id
),

final as (
    select
        summary.run_id,
        summary.trace,
        cluster_labels.cluster,
        summary.policy,
        summary.label,
        summary.seed,
        queue_outcomes.run_id is not null as has_queues,
        summary.node_hours,
        summary.cost_usd,
        summary.util_alloc_cpu,
        summary.util_alloc_mem,
        summary.jct_p50_s,
        summary.jct_p95_s,
        summary.wait_p50_s,
        summary.wait_p95_s,
        summary.jain_fairness,
        summary.preemptions,
        summary.wasted_task_s,
        coalesce(preemption_losses.preemption_wasted_task_s, 0) as preemption_wasted_task_s,
        queue_outcomes.leaves,
        queue_outcomes.leaves_used,
        queue_outcomes.min_share_of_guarantee,
        queue_outcomes.max_share_of_guarantee,
        queue_outcomes.jain_queues
    from summary
    join cluster_labels using (run_id)
    left join preemption_losses using (run_id)
    left join queue_outcomes using (run_id)
)

select * from final
order by trace, cluster, policy, label, seed, run_id
