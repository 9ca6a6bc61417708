-- The GPU workload-inflation experiment (Weng et al., ATC'23: GPU allocation ratio against
-- the arrived workload): per trace, setting and whole percent of arrived workload (GPU
-- requested so far over GPU capacity), the mean over seeds of the GPU allocation ratio and
-- of the fragmentation (GPUs, and as a ratio of idle GPU); `seeds`: the runs that reached
-- that percent.  Runs of mode 'inflation' only (their gpu_curve.parquet).
with runs as (
    select run_id, trace, policy, seed from runs where mode = 'inflation'
),

labels as (
    select run_id, label from policy_summary
),

curve as (
    select * from gpu_curve
),

final as (
    select
        runs.trace,
        runs.policy,
        labels.label,
        curve.arrived_pct,
        avg(curve.alloc_ratio)    as alloc_ratio,
        avg(curve.frag_gpu)       as frag_gpu,
        avg(curve.frag_ratio)     as frag_ratio,
        count(distinct runs.seed) as seeds,
        sum(curve.pods)           as pods,
        sum(curve.dropped)        as dropped
    from curve
    join runs using (run_id)
    join labels using (run_id)
    group by runs.trace, runs.policy, labels.label, curve.arrived_pct
)

select * from final
order by trace, label, arrived_pct
