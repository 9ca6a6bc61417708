-- One row per run: what was replayed (trace, policy, params, seed) and its metrics as columns.
-- `label` names what was replayed apart from the seed, for charts: the policy, its parameters
-- (`policy k=v,k=v`), the cluster mode unless fixed (`[elastic]`), and where two different
-- configurations would still look alike, a short hash of the configuration (`#1a2b3c`).
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
        max(value) filter (where metric = 'jct_p50_s')           as jct_p50_s,
        max(value) filter (where metric = 'jct_p95_s')           as jct_p95_s,
        max(value) filter (where metric = 'jct_p99_s')           as jct_p99_s,
        max(value) filter (where metric = 'wait_p50_s')          as wait_p50_s,
        max(value) filter (where metric = 'wait_p95_s')          as wait_p95_s,
        max(value) filter (where metric = 'tasks_finished')      as tasks_finished,
        max(value) filter (where metric = 'tasks_unschedulable') as tasks_unschedulable,
        max(value) filter (where metric = 'preemptions')         as preemptions,
        max(value) filter (where metric = 'wasted_task_s')       as wasted_task_s
    from metrics
    group by run_id
),

described as (
    select
        *,
        array_to_string(
            list_sort(list_transform(
                coalesce(json_keys(params), []), lambda k: k || '=' || (params ->> k)
            )),
            ','
        ) as params_text,
        coalesce(cluster ->> 'mode', cluster ->> 'kind') as cluster_mode,
        -- what a run is apart from its seed
        left(md5(policy || ' ' || coalesce(params::varchar, '') || ' '
                 || coalesce(cluster::varchar, '')), 6) as config_id
    from runs
),

short_labels as (
    select
        *,
        policy
            || case when params_text = '' then '' else ' ' || params_text end
            || case when coalesce(cluster_mode, 'fixed') = 'fixed' then ''
                    else ' [' || cluster_mode || ']' end as short_label
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
        labelled.config_id,
        labelled.wall_s,
        labelled.code_version,
        labelled.created_at,
        metric_columns.* exclude (run_id)
    from labelled
    left join metric_columns using (run_id)
)

select * from final
order by trace, policy, params_text, seed, run_id
