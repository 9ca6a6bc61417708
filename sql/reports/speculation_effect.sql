-- One row per run with speculative execution on (its `spec` parameter names a rule:
-- hadoop, late, mrv2), beside its base run: the same trace, policy, seed and cluster with
-- the same parameters once `spec` and every `spec_*` key are removed, and speculation off
-- (`spec` absent or 'none'; the lowest run_id when several; base columns null when there is
-- none).  What the copies bought (job completion time, mean, p50 and p95, with and without,
-- and the change in percent: negative = sooner) and what they cost: copies launched and won,
-- the run time of the attempts that lost (`spec_wasted_task_s`), and the copies' run time as
-- a percent of the tasks' own (`spec_extra_pct`: the extra capacity used).  Counts are 0,
-- not null, here: every row is a run with speculation on.  docs/metrics.md defines every
-- column.
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

metrics as (
    select * from metrics
),

keyed as (
    select
        *,
        case when lower(coalesce(params ->> 'spec', 'none')) = 'none' then null
             else params ->> 'spec' end as spec_rule,
        list_filter(param_keys, lambda k: starts_with(k, 'spec_')) as spec_keys,
        -- the parameters apart from speculation, as comparable text
        array_to_string(list_sort(list_transform(
            list_filter(param_keys, lambda k: k <> 'spec' and not starts_with(k, 'spec_')),
            lambda k: k || '=' || coalesce((params -> k)::varchar, 'null')
        )), ',') as base_params_text
    from runs
),

spec_runs as (
    select
        *,
        array_to_string(list_sort(list_transform(
            spec_keys, lambda k: k || '=' || coalesce(params ->> k, 'null'))), ',')
            as spec_settings
    from keyed
    where spec_rule is not null
),

base_pairs as (
    select
        spec_runs.run_id,
        base.run_id as base_run_id,
        row_number() over (partition by spec_runs.run_id order by base.run_id) as preference
    from spec_runs
    join keyed as base
        on base.trace = spec_runs.trace
        and base.policy = spec_runs.policy
        and base.seed is not distinct from spec_runs.seed
        and base.cluster_text = spec_runs.cluster_text
        and base.base_params_text = spec_runs.base_params_text
        and base.spec_rule is null
),

pairs as (
    select spec_runs.*, base_pairs.base_run_id
    from spec_runs
    left join base_pairs on base_pairs.run_id = spec_runs.run_id and base_pairs.preference = 1
),

run_metrics as (
    select
        run_id,
        max(value) filter (where metric = 'jct_mean_s')         as jct_mean_s,
        max(value) filter (where metric = 'jct_p50_s')          as jct_p50_s,
        max(value) filter (where metric = 'jct_p95_s')          as jct_p95_s,
        max(value) filter (where metric = 'tasks_finished')     as tasks_finished,
        max(value) filter (where metric = 'node_hours')         as node_hours,
        max(value) filter (where metric = 'spec_launched')      as spec_launched,
        max(value) filter (where metric = 'spec_won')           as spec_won,
        max(value) filter (where metric = 'spec_wasted_task_s') as spec_wasted_task_s,
        max(value) filter (where metric = 'spec_run_task_s')    as spec_run_task_s,
        max(value) filter (where metric = 'spec_extra_pct')     as spec_extra_pct
    from metrics
    where run_id in (select run_id from pairs union select base_run_id from pairs)
    group by run_id
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
        base_summary.label                                              as base_label,
        pairs.spec_rule,
        pairs.spec_settings,
        run.jct_mean_s,
        base.jct_mean_s                                                 as base_jct_mean_s,
        100 * (run.jct_mean_s - base.jct_mean_s) / nullif(base.jct_mean_s, 0)
            as jct_mean_change_pct,
        run.jct_p50_s,
        base.jct_p50_s                                                  as base_jct_p50_s,
        100 * (run.jct_p50_s - base.jct_p50_s) / nullif(base.jct_p50_s, 0)
            as jct_p50_change_pct,
        run.jct_p95_s,
        base.jct_p95_s                                                  as base_jct_p95_s,
        100 * (run.jct_p95_s - base.jct_p95_s) / nullif(base.jct_p95_s, 0)
            as jct_p95_change_pct,
        coalesce(run.spec_launched, 0)                                  as spec_launched,
        coalesce(run.spec_won, 0)                                       as spec_won,
        coalesce(run.spec_wasted_task_s, 0)                             as spec_wasted_task_s,
        coalesce(run.spec_run_task_s, 0)                                as spec_run_task_s,
        -- null metrics all round: the replay saw no copy (0); a null share alone: no task ran
        coalesce(run.spec_extra_pct,
                 case when run.spec_run_task_s is null then 0 end)      as spec_extra_pct,
        run.tasks_finished,
        base.tasks_finished                                             as base_tasks_finished,
        run.node_hours,
        base.node_hours                                                 as base_node_hours
    from pairs
    join summary using (run_id)
    left join summary as base_summary on base_summary.run_id = pairs.base_run_id
    left join run_metrics as run on run.run_id = pairs.run_id
    left join run_metrics as base on base.run_id = pairs.base_run_id
)

select * from final
order by trace, policy, spec_rule, spec_settings, seed, run_id
