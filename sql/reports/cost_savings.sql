-- Each run against the baseline policy's run on the same trace and seed: node-hours and
-- dollars saved (baseline minus run; positive = cheaper than the baseline) and percent.
-- The baseline policy is the session variable `baseline_policy` when set, else the
-- `settings` row `baseline_policy` (default yarn-uniform).  Where the baseline ran the same
-- trace and seed in several configurations, the one with default parameters ({}) on the
-- fixed cluster is used (the status quo), else the lowest run_id.  Runs with no baseline
-- run keep NULL savings.
with summary as (
    select * from policy_summary
),

baseline_setting as (
    select coalesce(
        getvariable('baseline_policy'),
        (select max(value) from settings where key = 'baseline_policy'),
        'yarn-uniform'
    ) as baseline_policy
),

baseline_candidates as (
    select
        summary.*,
        row_number() over (
            partition by summary.trace, summary.seed
            order by
                (summary.params_text = '') desc,
                (coalesce(summary.cluster_mode, 'fixed') = 'fixed') desc,
                summary.run_id
        ) as preference
    from summary
    join baseline_setting on summary.policy = baseline_setting.baseline_policy
),

baseline_runs as (
    select * from baseline_candidates where preference = 1
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
        baseline_runs.run_id                                  as baseline_run_id,
        summary.node_hours,
        baseline_runs.node_hours                              as baseline_node_hours,
        baseline_runs.node_hours - summary.node_hours         as node_hours_saved,
        100 * (baseline_runs.node_hours - summary.node_hours)
            / nullif(baseline_runs.node_hours, 0)             as node_hours_saved_pct,
        summary.cost_usd,
        baseline_runs.cost_usd                                as baseline_cost_usd,
        baseline_runs.cost_usd - summary.cost_usd             as cost_saved_usd,
        100 * (baseline_runs.cost_usd - summary.cost_usd)
            / nullif(baseline_runs.cost_usd, 0)               as cost_saved_pct
    from summary
    cross join baseline_setting
    left join baseline_runs
        on baseline_runs.trace = summary.trace
        and baseline_runs.seed is not distinct from summary.seed
)

select * from final
order by trace, seed, policy, label, run_id
