-- Per run: the distribution of job completion times (jobs whose tasks all finished) and of
-- task waits (first start - ready, tasks that started), as quantiles, for CDF charts.
-- Quantiles are linear interpolations (quantile_cont) at fixed fractions, denser in the
-- tail where the policies differ most.
with task_runs as (
    select * from task_runs
),

jobs as (
    select run_id, job_id, max(end_s) - min(submit_s) as value_s
    from task_runs
    group by run_id, job_id
    having bool_and(outcome = 'finished')
),

waits as (
    select run_id, first_start_s - ready_s as value_s
    from task_runs
    where first_start_s is not null and ready_s is not null
),

measured as (
    select run_id, 'job completion' as measure, value_s from jobs
    union all
    select run_id, 'task wait' as measure, value_s from waits
),

quantiles as (
    select
        run_id,
        measure,
        count(*) as n,
        quantile_cont(value_s, [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
                                0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95,
                                0.96, 0.97, 0.98, 0.99, 0.995, 0.999, 1.0]) as values_s,
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7,
         0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.98, 0.99, 0.995, 0.999, 1.0]
            as fractions
    from measured
    group by run_id, measure
),

final as (
    select
        quantiles.run_id,
        runs.trace,
        quantiles.measure,
        quantiles.n,
        unnest(quantiles.fractions) as fraction,
        unnest(quantiles.values_s) as value_s
    from quantiles
    join runs using (run_id)
)

select * from final
order by trace, run_id, measure, fraction
