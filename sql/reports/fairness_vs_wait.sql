-- The fairness / waiting trade-off per run: Jain's fairness index against task queueing delay
-- and job completion time.
with summary as (
    select * from policy_summary
),

final as (
    select
        run_id,
        trace,
        policy,
        params_text,
        seed,
        label,
        jain_fairness,
        wait_p50_s,
        wait_p95_s,
        jct_p50_s,
        jct_p95_s,
        jct_p99_s,
        preemptions
    from summary
)

select * from final
order by trace, policy, label, seed, run_id
