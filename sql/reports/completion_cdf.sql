-- Per run: the distribution of job completion times (jobs whose tasks all finished) and of
-- task waits (first start - ready, tasks that started), as quantiles, for CDF charts.
-- Quantiles are linear interpolations (as quantile_cont) at fixed fractions, denser in the
-- tail where the policies differ most.
with task_runs as (
    select * from task_runs
),

-- runs and measures by number: sorting and partitioning on text keys took DuckDB three to
-- four times as long as on integers (29-day trace: 85 s against 23 s per run)
run_codes as (
    select run_id, row_number() over (order by run_id) as r from runs
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
    select run_codes.r, m, value_s
    from (
        select run_id, 0 as m, value_s from jobs
        union all
        select run_id, 1 as m, value_s from waits
    ) as values_
    join run_codes using (run_id)
),

fractions as (
    select unnest([0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6,
                   0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.925, 0.95, 0.96, 0.97, 0.98, 0.99,
                   0.995, 0.999, 1.0]) as fraction
),

positions as (
    select r, m, n, fraction, fraction * (n - 1) as pos
    from (select r, m, count(*) as n from measured group by r, m) as groups
    cross join fractions
),

-- quantile_cont by position in sorted order: value i (0-based) of n sorted, at
-- fraction * (n - 1), interpolated between its floor and ceiling.  A sort spills to disk
-- where quantile_cont holds every value of every run in memory (105 M values failed at
-- DuckDB's 2 GB limit).  Only the values at the wanted positions are kept, by an equality
-- join (a join on "floor or ceiling" compared every value with every position).
wanted as (
    select r, m, cast(floor(pos) as bigint) as i from positions
    union
    select r, m, cast(ceil(pos) as bigint) as i from positions
),

picked as materialized (
    select ranked.r, ranked.m, ranked.i, ranked.value_s
    from (
        select r, m, value_s, row_number() over (partition by r, m order by value_s) - 1 as i
        from measured
    ) as ranked
    join wanted using (r, m, i)
),

quantiles as (
    select
        positions.r,
        positions.m,
        positions.n,
        positions.fraction,
        lo.value_s + (hi.value_s - lo.value_s) * (positions.pos - floor(positions.pos))
            as value_s
    from positions
    join picked as lo
        on lo.r = positions.r and lo.m = positions.m and lo.i = floor(positions.pos)
    join picked as hi
        on hi.r = positions.r and hi.m = positions.m and hi.i = ceil(positions.pos)
),

final as (
    select
        run_codes.run_id,
        runs.trace,
        case quantiles.m when 0 then 'job completion' else 'task wait' end as measure,
        quantiles.n,
        quantiles.fraction,
        quantiles.value_s
    from quantiles
    join run_codes using (r)
    join runs using (run_id)
)

select * from final
order by trace, run_id, measure, fraction
