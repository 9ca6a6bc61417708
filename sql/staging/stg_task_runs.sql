-- One run's task_runs.parquet (`src_task_runs`), cast to warehouse types; NaN -> NULL.
-- Columns beyond the contract's are kept as they are.
with source as (
    select * from src_task_runs
),

final as (
    select
        cast(run_id as varchar)     as run_id,
        cast(task_id as varchar)    as task_id,
        cast(job_id as varchar)     as job_id,
        cast("user" as varchar)     as "user",
        cast(queue as varchar)      as queue,
        cast(machine_id as varchar) as machine_id,
        if(isnan(cast(submit_s as double)), null, cast(submit_s as double)) as submit_s,
        if(isnan(cast(start_s as double)), null, cast(start_s as double))   as start_s,
        if(isnan(cast(end_s as double)), null, cast(end_s as double))       as end_s,
        cast(outcome as varchar)    as outcome,
        cast(attempts as integer)   as attempts,
        cast(locality as varchar)   as locality,
        if(isnan(cast(cpu as double)), null, cast(cpu as double))           as cpu,
        if(isnan(cast(mem as double)), null, cast(mem as double))           as mem,
        source.* exclude (
            run_id, task_id, job_id, "user", queue, machine_id, submit_s, start_s, end_s,
            outcome, attempts, locality, cpu, mem
        )
    from source
)

select * from final
