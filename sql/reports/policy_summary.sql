-- One row per run: what was replayed (trace, policy, params, seed) and its metrics as columns.
-- `label` names what was replayed apart from the seed, for charts: the policy, the parameters
-- whose values differ between the trace's runs of that policy (`policy k=v, k=v`; all of them
-- are in `params_text`; an `opp_*` parameter, or `spec`/`spec_*` (speculative execution),
-- only where the run set it and its value differs between the runs that set it), the cluster mode unless fixed (`[elastic]`; a Kubernetes cluster's own label, `[CA m5.2xlarge]`), and where two
-- different configurations would still look alike, a short hash of the configuration.
-- `params` are the settings the run used (configuration files included; `runs.settings`
-- says where each came from).  Metrics are over `measured_from_s`..`measured_to_s`: the
-- trace's window, or the whole run when it drained; the backlog is what was left undone.
with runs as (
    select * from runs
),

metrics as (
    select * from metrics
),

metric_columns as (
    select
        run_id,
        max(value) filter (where metric = 'node_hours')          as node_hours,
        max(value) filter (where metric = 'cost_usd')            as cost_usd,
        max(value) filter (where metric = 'util_alloc_cpu')      as util_alloc_cpu,
        max(value) filter (where metric = 'util_alloc_mem')      as util_alloc_mem,
        max(value) filter (where metric = 'util_used_cpu')       as util_used_cpu,
        max(value) filter (where metric = 'util_used_mem')       as util_used_mem,
        max(value) filter (where metric = 'jain_fairness')       as jain_fairness,
        max(value) filter (where metric = 'locality_node')       as locality_node,
        max(value) filter (where metric = 'locality_rack')       as locality_rack,
        max(value) filter (where metric = 'locality_any')        as locality_any,
        max(value) filter (where metric = 'data_read_rack_gb')   as data_read_rack_gb,
        max(value) filter (where metric = 'data_read_core_gb')   as data_read_core_gb,
        max(value) filter (where metric = 'jct_mean_s')          as jct_mean_s,
        max(value) filter (where metric = 'jct_p50_s')           as jct_p50_s,
        max(value) filter (where metric = 'jct_p95_s')           as jct_p95_s,
        max(value) filter (where metric = 'jct_p99_s')           as jct_p99_s,
        max(value) filter (where metric = 'wait_p50_s')          as wait_p50_s,
        max(value) filter (where metric = 'wait_p95_s')          as wait_p95_s,
        max(value) filter (where metric = 'job_wait_mean_s')     as job_wait_mean_s,
        max(value) filter (where metric = 'bsld_mean')           as bsld_mean,
        max(value) filter (where metric = 'bsld_p95')            as bsld_p95,
        max(value) filter (where metric = 'makespan_s')          as makespan_s,
        max(value) filter (where metric = 'tasks_finished')      as tasks_finished,
        max(value) filter (where metric = 'tasks_unschedulable') as tasks_unschedulable,
        max(value) filter (where metric = 'preemptions')         as preemptions,
        max(value) filter (where metric = 'wasted_task_s')       as wasted_task_s,
        max(value) filter (where metric = 'tasks_unfinished')    as tasks_unfinished,
        max(value) filter (where metric = 'tasks_censored')      as tasks_censored,
        max(value) filter (where metric = 'backlog_tasks')       as backlog_tasks,
        max(value) filter (where metric = 'backlog_task_s')      as backlog_task_s,
        max(value) filter (where metric = 'evictions')           as evictions,
        max(value) filter (where metric = 'tasks_preempted')     as tasks_preempted,
        max(value) filter (where metric = 'preemptions_per_task_p99')
            as preemptions_per_task_p99,
        max(value) filter (where metric = 'preemptions_per_task_max')
            as preemptions_per_task_max,
        max(value) filter (where metric = 'solver_rounds')       as solver_rounds,
        max(value) filter (where metric = 'solver_arcs_p50')     as solver_arcs_p50,
        max(value) filter (where metric = 'solver_ms_p50')       as solver_ms_p50,
        max(value) filter (where metric = 'solver_ms_p99')       as solver_ms_p99
    from metrics
    group by run_id
),

policy_keys as (
    select distinct trace, policy, unnest(coalesce(json_keys(params), [])) as key
    from runs
),

param_values as (
    -- every parameter any run of the trace and policy has, for each of those runs; `layer`:
    -- the key belongs to a layer any policy may add (opportunistic containers: `opp_*`;
    -- speculative execution: `spec`, `spec_*`), absent or off in the policy's plain runs
    select runs.run_id, runs.trace, runs.policy, policy_keys.key,
           -- speculation off (`spec=none`) is the plain run, as if `spec` were absent
           case when policy_keys.key = 'spec' and lower(runs.params ->> 'spec') = 'none'
                then null else runs.params ->> policy_keys.key end as value,
           starts_with(policy_keys.key, 'opp_') or policy_keys.key = 'spec'
               or starts_with(policy_keys.key, 'spec_') as layer
    from runs
    join policy_keys using (trace, policy)
),

varying_keys as (
    select trace, policy, key
    from param_values
    group by trace, policy, key
    -- a layer's parameter is absent (null) in the policy's plain runs: it names a run when
    -- its values differ between the runs that set it (and `opp_by` and `spec` always, which
    -- say the layer is on), not merely because the plain runs lack it
    having (not bool_or(layer) and count(distinct coalesce(value, chr(0))) > 1)
        or (bool_or(layer) and (key in ('opp_by', 'spec') or count(distinct value) > 1))
),

varying_params as (
    select
        run_id,
        array_to_string(list_sort(list(key || '=' || coalesce(value, 'null'))), ', ')
            as varying_text
    from param_values
    join varying_keys using (trace, policy, key)
    -- a run without a layer is the policy's plain run, not `opp_by=null,...`
    where not (layer and value is null)
    group by run_id
),

described as (
    select
        runs.*,
        coalesce(varying_params.varying_text, '') as varying_text,
        array_to_string(
            list_sort(list_transform(
                coalesce(json_keys(params), []), lambda k: k || '=' || (params ->> k)
            )),
            ','
        ) as params_text,
        coalesce(cluster ->> 'mode', cluster ->> 'kind') as cluster_mode,
        cast(cluster ->> 'price_per_hour' as double) as price_per_hour,
        -- what a run is apart from its seed
        left(md5(policy || ' ' || coalesce(params::varchar, '') || ' '
                 || coalesce(cluster::varchar, '')), 6) as config_id
    from runs
    left join varying_params using (run_id)
),

short_labels as (
    select
        *,
        policy
            || case when varying_text = '' then '' else ' ' || varying_text end
            || case when coalesce(cluster_mode, 'fixed') = 'fixed' then ''
                    else ' [' || coalesce(nullif(cluster ->> 'label', ''), cluster_mode)
                         || ']' end as short_label
    from described
),

labelled as (
    select
        *,
        -- runs of one trace that differ in more than the seed get different labels
        case when count(distinct config_id) over (partition by trace, short_label) = 1
             then short_label
             else short_label || ' #' || config_id end as label
    from short_labels
),

final as (
    select
        labelled.run_id,
        labelled.trace,
        labelled.policy,
        labelled.params,
        labelled.params_text,
        labelled.seed,
        labelled.label,
        labelled.cluster_mode,
        labelled.price_per_hour,
        labelled.config_id,
        labelled.window_end_s,
        labelled.measured_to_s,
        labelled.drained,
        labelled.wall_s,
        labelled.code_version,
        labelled.created_at,
        metric_columns.* exclude (run_id)
    from labelled
    left join metric_columns using (run_id)
)

select * from final
order by trace, policy, params_text, seed, run_id
