-- HPC batch jobs by size (runs of traces read from Standard Workload Format logs: their
-- trace_facts source_format is 'swf'): per trace, setting and job size class (processors
-- asked for, in powers of four), the jobs that finished, their mean and largest wait (first
-- start - submit) and their mean bounded slowdown, max(1, response / max(run, 10 s)), over
-- every run (seed) of the setting.
with runs as (
    select run_id, trace
    from runs
    where trace_facts ->> 'source_format' = 'swf' and coalesce(mode, 'replay') = 'replay'
),

labels as (
    select run_id, policy, label from policy_summary
),

jobs as (
    select
        run_id,
        job_id,
        max(cpu)                       as processors,
        min(submit_s)                  as submit_s,
        min(coalesce(first_start_s, start_s)) as first_start_s,
        min(start_s)                   as start_s,
        max(end_s)                     as end_s,
        bool_and(outcome = 'finished') as done
    from task_runs
    where run_id in (select run_id from runs)
    group by run_id, job_id
),

classed as (
    select
        run_id,
        case when processors <= 1 then 1 when processors <= 4 then 2
             when processors <= 16 then 3 when processors <= 64 then 4
             when processors <= 256 then 5 else 6 end as size_order,
        first_start_s - submit_s as wait_s,
        greatest(1.0, (end_s - submit_s) / greatest(end_s - start_s, 10.0)) as bsld
    from jobs
    where done
),

final as (
    select
        runs.trace,
        labels.policy,
        labels.label,
        classed.size_order,
        ['1', '2-4', '5-16', '17-64', '65-256', '257+'][classed.size_order] as size_class,
        count(*)            as jobs,
        avg(classed.wait_s) as wait_mean_s,
        max(classed.wait_s) as wait_max_s,
        avg(classed.bsld)   as bsld_mean
    from classed
    join runs using (run_id)
    join labels using (run_id)
    group by runs.trace, labels.policy, labels.label, classed.size_order
)

select * from final
order by trace, label, size_order
