-- The fairness / waiting trade-off per run: Jain's fairness indices against task queueing
-- delay and job completion time.  `jain_fairness` compares each user's allocation with its
-- DRF fair share given what it asked for (1 = every user got the same multiple of its fair
-- share; a cluster where every ready task runs scores 1); `jain_equal_share` compares users'
-- dominant shares with each other whatever they asked for (it also falls when users simply
-- ask for different amounts).  Both are time-weighted; docs/metrics.md defines them.
with summary as (
    select * from policy_summary
),

metrics as (
    select * from metrics
),

equal_share as (
    select run_id, max(value) as jain_equal_share
    from metrics
    where metric = 'jain_equal_share'
    group by run_id
),

final as (
    select
        summary.run_id,
        summary.trace,
        summary.policy,
        summary.params_text,
        summary.seed,
        summary.label,
        summary.jain_fairness,
        equal_share.jain_equal_share,
        summary.wait_p50_s,
        summary.wait_p95_s,
        summary.jct_p50_s,
        summary.jct_p95_s,
        summary.jct_p99_s,
        summary.preemptions
    from summary
    left join equal_share using (run_id)
)

select * from final
order by trace, policy, label, seed, run_id
