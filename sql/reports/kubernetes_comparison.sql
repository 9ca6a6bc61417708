-- Kubernetes runs (kube-scheduler on a Cluster Autoscaler or Karpenter cluster), each against the
-- status quo of its trace and seed: kube-scheduler's default scoring (LeastAllocated) with
-- Cluster Autoscaler on one node group, its default expander and pods it may evict (the
-- cheapest such run when there are several).  Per run: the scoring strategy, the cluster's
-- label, node-hours, cost and the percent saved against the status quo, pod scheduling
-- latency (wait from submission to start: p50, p95), p95 job completion, what the
-- autoscaler did (nodes added and deleted; `pods_evicted`: by Cluster Autoscaler's
-- scale-down or Karpenter's consolidation), the pods kube-scheduler preempted for
-- higher-priority ones (`pods_preempted`), the task time both threw away, and the work
-- left undone.
with summary as (
    select * from policy_summary
),

ca_metrics as (
    select
        run_id,
        max(value) filter (where metric = 'scale_ups')            as scale_ups,
        max(value) filter (where metric = 'nodes_added')          as nodes_added,
        max(value) filter (where metric = 'nodes_deleted')        as nodes_deleted,
        max(value) filter (where metric = 'nodes_drained')        as nodes_drained,
        max(value) filter (where metric = 'evictions_scale_down') as evictions_scale_down,
        max(value) filter (where metric = 'evictions_consolidation')
            as evictions_consolidation
    from metrics
    group by run_id
),

kube as (
    select
        summary.run_id, summary.trace, summary.label, summary.seed, summary.policy,
        coalesce(nullif(runs.params ->> 'scoring', ''), 'LeastAllocated')  as scoring,
        runs.cluster ->> 'label'                               as cluster_label,
        summary.node_hours, summary.cost_usd, summary.wait_p50_s, summary.wait_p95_s,
        summary.jct_p95_s, summary.tasks_finished, summary.backlog_task_s,
        summary.wasted_task_s, coalesce(summary.preemptions, 0) as pods_preempted,
        ca_metrics.scale_ups, ca_metrics.nodes_added, ca_metrics.nodes_deleted,
        ca_metrics.nodes_drained,
        coalesce(ca_metrics.evictions_scale_down, ca_metrics.evictions_consolidation)
            as pods_evicted,
        -- one node group, the default expander, evictable pods: 'CA <type>'
        regexp_full_match(coalesce(runs.cluster ->> 'label', ''), 'CA [^ ,]+')
            and coalesce(nullif(runs.params ->> 'scoring', ''), 'LeastAllocated') = 'LeastAllocated'
            and summary.policy = 'kube-scheduler'                 as status_quo
    from summary
    join runs using (run_id)
    left join ca_metrics using (run_id)
    where summary.cluster_mode in ('cluster-autoscaler', 'karpenter')
),

reference as (
    select trace, seed, arg_min(run_id, (cost_usd, run_id)) as ref_run_id
    from kube
    where status_quo
    group by trace, seed
),

final as (
    select
        kube.* exclude (status_quo),
        kube.run_id = reference.ref_run_id       as is_status_quo,
        reference.ref_run_id                     as status_quo_run_id,
        ref.cost_usd                             as status_quo_cost_usd,
        ref.wait_p95_s                           as status_quo_wait_p95_s,
        100 * (ref.cost_usd - kube.cost_usd) / nullif(ref.cost_usd, 0) as cost_saved_pct
    from kube
    left join reference using (trace, seed)
    left join kube as ref on ref.run_id = reference.ref_run_id
)

select * from final
order by trace, cost_usd, run_id
