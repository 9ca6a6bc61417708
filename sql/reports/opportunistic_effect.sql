-- One row per run with an `opp_*` parameter (opportunistic containers, YARN-2877, and
-- over-allocation, YARN-1011), beside its base run: the same trace, policy, seed and cluster
-- with the same parameters once every `opp_*` key is removed (the lowest run_id when several;
-- base columns null when there is none).  What turning the layer on bought (used utilization
-- gained, in percentage points) and cost: opportunistic containers killed, paused and shed,
-- the run time their kills lost (`opp_wasted_task_s`, and its share of the run's task work:
-- `duration_s` summed over the tasks that started), NM queueing delay, and the slowdown of
-- the jobs it should not touch: per job finished entirely in both runs none of whose tasks
-- started an opportunistic container here, job completion time here / in the base run
-- (mean and p95).  Counts are 0, not null, here: every row is a run with the layer on.
-- docs/metrics.md defines every column.
with summary as (
    select * from policy_summary
),

runs as (
    select
        run_id, trace, policy, seed, params,
        coalesce(cluster::varchar, '') as cluster_text,
        coalesce(json_keys(params), []) as param_keys
    from runs
),

task_runs as (
    select * from task_runs
),

metrics as (
    select * from metrics
),

keyed as (
    select
        *,
        list_filter(param_keys, lambda k: starts_with(k, 'opp_')) as opp_keys,
        -- the parameters apart from the opportunistic layer, as comparable text
        array_to_string(list_sort(list_transform(
            list_filter(param_keys, lambda k: not starts_with(k, 'opp_')),
            lambda k: k || '=' || coalesce((params -> k)::varchar, 'null')
        )), ',') as base_params_text
    from runs
),

opp_runs as (
    select
        *,
        array_to_string(list_sort(list_transform(
            opp_keys, lambda k: k || '=' || coalesce(params ->> k, 'null'))), ',')
            as opp_settings
    from keyed
    where len(opp_keys) > 0
),

base_pairs as (
    select
        opp_runs.run_id,
        base.run_id as base_run_id,
        row_number() over (partition by opp_runs.run_id order by base.run_id) as preference
    from opp_runs
    join keyed as base
        on base.trace = opp_runs.trace
        and base.policy = opp_runs.policy
        and base.seed is not distinct from opp_runs.seed
        and base.cluster_text = opp_runs.cluster_text
        and base.base_params_text = opp_runs.base_params_text
        and len(base.opp_keys) = 0
),

pairs as (
    select opp_runs.*, base_pairs.base_run_id
    from opp_runs
    left join base_pairs on base_pairs.run_id = opp_runs.run_id and base_pairs.preference = 1
),

opp_metrics as (
    select
        run_id,
        max(value) filter (where metric = 'opp_started')       as opp_started,
        max(value) filter (where metric = 'opp_killed')        as opp_killed,
        max(value) filter (where metric = 'opp_paused')        as opp_paused,
        max(value) filter (where metric = 'opp_shed')          as opp_shed,
        max(value) filter (where metric = 'opp_finished')      as opp_finished,
        max(value) filter (where metric = 'opp_wasted_task_s') as opp_wasted_task_s,
        max(value) filter (where metric = 'opp_queue_p50_s')   as opp_queue_p50_s,
        max(value) filter (where metric = 'opp_queue_p95_s')   as opp_queue_p95_s
    from metrics
    group by run_id
),

task_work as (
    select run_id, sum(duration_s) as task_work_s
    from task_runs
    where coalesce(first_start_s, start_s) is not null
    group by run_id
),

jobs as (
    select
        run_id,
        job_id,
        bool_and(outcome = 'finished')                                       as done,
        max(end_s) - min(submit_s)                                           as jct_s,
        bool_or(coalesce(opp_starts, 0) > 0 or coalesce(opportunistic, false)) as touched
    from task_runs
    where run_id in (select run_id from pairs union select base_run_id from pairs)
    group by run_id, job_id
),

slowdowns as (
    select
        pairs.run_id,
        count(*)                                                       as guaranteed_jobs,
        avg(opp_job.jct_s / nullif(base_job.jct_s, 0))                 as guaranteed_slowdown_mean,
        quantile_cont(opp_job.jct_s / nullif(base_job.jct_s, 0), 0.95) as guaranteed_slowdown_p95
    from pairs
    join jobs as opp_job
        on opp_job.run_id = pairs.run_id and opp_job.done and not opp_job.touched
    join jobs as base_job
        on base_job.run_id = pairs.base_run_id and base_job.job_id = opp_job.job_id
        and base_job.done
    group by pairs.run_id
),

final as (
    select
        pairs.run_id,
        pairs.trace,
        pairs.policy,
        pairs.seed,
        summary.label,
        summary.cluster_mode,
        pairs.base_run_id,
        base.label                                                    as base_label,
        pairs.opp_settings,
        pairs.params ->> 'opp_by'                                     as opp_by,
        try_cast(pairs.params ->> 'opp_percent' as double)            as opp_percent,
        try_cast(pairs.params ->> 'opp_nm_queue' as double)           as opp_nm_queue,
        try_cast(pairs.params ->> 'opp_pause' as boolean)             as opp_pause,
        try_cast(pairs.params ->> 'opp_overalloc_cpu' as double)      as opp_overalloc_cpu,
        try_cast(pairs.params ->> 'opp_overalloc_mem' as double)      as opp_overalloc_mem,
        try_cast(pairs.params ->> 'opp_preempt_cpu' as double)        as opp_preempt_cpu,
        try_cast(pairs.params ->> 'opp_preempt_mem' as double)        as opp_preempt_mem,
        summary.util_used_cpu,
        base.util_used_cpu                                            as base_util_used_cpu,
        100 * (summary.util_used_cpu - base.util_used_cpu)            as util_used_cpu_gain_pts,
        summary.util_used_mem,
        base.util_used_mem                                            as base_util_used_mem,
        100 * (summary.util_used_mem - base.util_used_mem)            as util_used_mem_gain_pts,
        summary.util_alloc_cpu,
        base.util_alloc_cpu                                           as base_util_alloc_cpu,
        summary.util_alloc_mem,
        base.util_alloc_mem                                           as base_util_alloc_mem,
        coalesce(opp_metrics.opp_started, 0)                          as opp_started,
        coalesce(opp_metrics.opp_killed, 0)                           as opp_killed,
        coalesce(opp_metrics.opp_paused, 0)                           as opp_paused,
        coalesce(opp_metrics.opp_shed, 0)                             as opp_shed,
        coalesce(opp_metrics.opp_finished, 0)                         as opp_finished,
        coalesce(opp_metrics.opp_wasted_task_s, 0)                    as opp_wasted_task_s,
        task_work.task_work_s,
        coalesce(opp_metrics.opp_wasted_task_s, 0)
            / nullif(task_work.task_work_s, 0)                        as opp_wasted_share,
        opp_metrics.opp_queue_p50_s,
        opp_metrics.opp_queue_p95_s,
        case when pairs.base_run_id is not null
             then coalesce(slowdowns.guaranteed_jobs, 0) end          as guaranteed_jobs,
        slowdowns.guaranteed_slowdown_mean,
        slowdowns.guaranteed_slowdown_p95,
        summary.node_hours,
        base.node_hours                                               as base_node_hours
    from pairs
    join summary using (run_id)
    left join summary as base on base.run_id = pairs.base_run_id
    left join opp_metrics on opp_metrics.run_id = pairs.run_id
    left join task_work on task_work.run_id = pairs.run_id
    left join slowdowns on slowdowns.run_id = pairs.run_id
)

select * from final
order by trace, policy, opp_settings, seed, run_id
