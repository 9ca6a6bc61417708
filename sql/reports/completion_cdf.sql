-- Per run: the distribution of job completion times (jobs whose tasks all finished) and of
-- task waits (first start - ready, tasks that started), as quantiles, for CDF charts.
-- Quantiles are linear interpolations (as quantile_cont) at fixed fractions, denser in the
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

fractions as (
    select unnest([0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6,
                   0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.98, 0.99,
                   0.995, 0.999, 1.0]) as fraction
),

-- quantile_cont by position in sorted order: value i (0-based) of n sorted, at
-- fraction * (n - 1), interpolated between its floor and ceiling.  A sort spills to disk
-- where quantile_cont holds every value of every run in memory (105 M values failed at
-- DuckDB's 2 GB limit).
ranked as (
    select
        run_id,
        measure,
        value_s,
        row_number() over (partition by run_id, measure order by value_s) - 1 as i,
        count(*) over (partition by run_id, measure) as n
    from measured
),

positions as (
    select run_id, measure, n, fraction, fraction * (n - 1) as pos
    from (select distinct run_id, measure, n from ranked) as groups
    cross join fractions
),

picked as (
    select ranked.run_id, ranked.measure, ranked.i, ranked.value_s
    from ranked
    semi join positions
        on ranked.run_id = positions.run_id
        and ranked.measure = positions.measure
        and (ranked.i = floor(positions.pos) or ranked.i = ceil(positions.pos))
),

quantiles as (
    select
        positions.run_id,
        positions.measure,
        positions.n,
        positions.fraction,
        lo.value_s + (hi.value_s - lo.value_s) * (positions.pos - floor(positions.pos))
            as value_s
    from positions
    join picked as lo
        on lo.run_id = positions.run_id and lo.measure = positions.measure
        and lo.i = floor(positions.pos)
    join picked as hi
        on hi.run_id = positions.run_id and hi.measure = positions.measure
        and hi.i = ceil(positions.pos)
),

final as (
    select
        quantiles.run_id,
        runs.trace,
        quantiles.measure,
        quantiles.n,
        quantiles.fraction,
        quantiles.value_s
    from quantiles
    join runs using (run_id)
)

select * from final
order by trace, run_id, measure, fraction
