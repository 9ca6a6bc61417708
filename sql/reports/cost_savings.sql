-- Each run against the baseline policy's run on the same trace and seed: node-hours and
-- dollars saved (baseline minus run; positive = cheaper than the baseline) and percent.
-- The baseline policy is the session variable `baseline_policy` when set, else the
-- `settings` row `baseline_policy` (default yarn-uniform).  Like is compared with like: the
-- baseline run on the same cluster (same kind and options) is preferred, then one on the
-- same cluster kind, then the status quo (default parameters on the fixed cluster), then the
-- lowest run_id.  Runs with no baseline run keep NULL savings.
-- Runs are measured over the trace's window, so on the fixed cluster (the trace's own
-- machines, billed for the window) every policy costs the same: savings there are zero by
-- construction.  What a policy on an elastic cluster saves is against the fixed cluster:
-- `*_vs_fixed` compare each run with the baseline policy's run on the fixed cluster of the
-- same trace and seed (NULL when there is none).
with summary as (
    select policy_summary.*, runs.cluster::varchar as cluster_text
    from policy_summary
    join runs using (run_id)
),

baseline_setting as (
    select coalesce(
        getvariable('baseline_policy'),
        (select max(value) from settings where key = 'baseline_policy'),
        'yarn-uniform'
    ) as baseline_policy
),

baseline_candidates as (
    select summary.*
    from summary
    join baseline_setting on summary.policy = baseline_setting.baseline_policy
),

pairs as (
    select
        summary.run_id,
        candidate.run_id     as baseline_run_id,
        candidate.node_hours as baseline_node_hours,
        candidate.cost_usd   as baseline_cost_usd,
        row_number() over (
            partition by summary.run_id
            order by
                (candidate.cluster_text is not distinct from summary.cluster_text) desc,
                (coalesce(candidate.cluster_mode, 'fixed')
                    = coalesce(summary.cluster_mode, 'fixed')) desc,
                (candidate.params_text = '') desc,
                (coalesce(candidate.cluster_mode, 'fixed') = 'fixed') desc,
                candidate.run_id
        ) as preference
    from summary
    join baseline_candidates as candidate
        on candidate.trace = summary.trace
        and candidate.seed is not distinct from summary.seed
),

baseline_runs as (
    select * from pairs where preference = 1
),

fixed_runs as (
    select
        summary.run_id,
        candidate.node_hours as fixed_node_hours,
        candidate.cost_usd   as fixed_cost_usd,
        row_number() over (partition by summary.run_id
                           order by (candidate.params_text = '') desc, candidate.run_id)
            as preference
    from summary
    join baseline_candidates as candidate
        on candidate.trace = summary.trace
        and candidate.seed is not distinct from summary.seed
        and coalesce(candidate.cluster_mode, 'fixed') = 'fixed'
),

final as (
    select
        summary.run_id,
        summary.trace,
        summary.policy,
        summary.params,
        summary.seed,
        summary.label,
        baseline_setting.baseline_policy,
        baseline_runs.baseline_run_id,
        summary.node_hours,
        baseline_runs.baseline_node_hours,
        baseline_runs.baseline_node_hours - summary.node_hours  as node_hours_saved,
        100 * (baseline_runs.baseline_node_hours - summary.node_hours)
            / nullif(baseline_runs.baseline_node_hours, 0)      as node_hours_saved_pct,
        summary.cost_usd,
        baseline_runs.baseline_cost_usd,
        baseline_runs.baseline_cost_usd - summary.cost_usd      as cost_saved_usd,
        100 * (baseline_runs.baseline_cost_usd - summary.cost_usd)
            / nullif(baseline_runs.baseline_cost_usd, 0)        as cost_saved_pct,
        summary.cluster_mode,
        fixed_runs.fixed_node_hours,
        fixed_runs.fixed_node_hours - summary.node_hours        as node_hours_saved_vs_fixed,
        100 * (fixed_runs.fixed_node_hours - summary.node_hours)
            / nullif(fixed_runs.fixed_node_hours, 0)            as node_hours_saved_vs_fixed_pct,
        fixed_runs.fixed_cost_usd,
        fixed_runs.fixed_cost_usd - summary.cost_usd            as cost_saved_vs_fixed_usd,
        100 * (fixed_runs.fixed_cost_usd - summary.cost_usd)
            / nullif(fixed_runs.fixed_cost_usd, 0)              as cost_saved_vs_fixed_pct
    from summary
    cross join baseline_setting
    left join baseline_runs using (run_id)
    left join (select * from fixed_runs where preference = 1) as fixed_runs using (run_id)
)

select * from final
order by trace, seed, policy, label, run_id
