-- Must return no rows: each task's speculative-execution record holds together (copies,
-- their run time and the run time lost are never negative; a task whose result came from a
-- copy had one; a task without copies has no copy run time, loss or copy machine; a task with
-- copies says where and when the last one started) and each run's spec_won metric is at
-- most its spec_launched.  Null columns (runs that predate speculation) pass.
with scope as (
    select * from check_scope
),

task_runs as (
    select * from task_runs where run_id in (select run_id from scope)
),

metrics as (
    select * from metrics where run_id in (select run_id from scope)
),

bad_rows as (
    select
        run_id,
        task_id,
        case
            when spec_copies < 0 then 'spec_copies ' || spec_copies || ' < 0'
            when spec_run_s < 0 then 'spec_run_s ' || spec_run_s || ' < 0'
            when spec_wasted_s < 0 then 'spec_wasted_s ' || spec_wasted_s || ' < 0'
            when spec_won and coalesce(spec_copies, 0) = 0 then 'spec_won without a copy'
            when spec_copies = 0 and spec_run_s > 0 then 'spec_run_s > 0 without a copy'
            when spec_copies = 0 and spec_wasted_s > 0 then 'spec_wasted_s > 0 without a copy'
            when spec_copies = 0 and spec_machine_id is not null
                then 'spec_machine_id without a copy'
            when spec_copies > 0 and (spec_machine_id is null or spec_start_s is null)
                then 'copies without spec_machine_id/spec_start_s'
        end as reason
    from task_runs
),

run_counts as (
    select
        run_id,
        max(value) filter (where metric = 'spec_launched') as spec_launched,
        max(value) filter (where metric = 'spec_won')      as spec_won
    from metrics
    group by run_id
),

final as (
    select run_id, task_id, reason from bad_rows where reason is not null
    union all
    select run_id, null as task_id,
           'spec_won ' || spec_won || ' > spec_launched ' || spec_launched as reason
    from run_counts
    where spec_won > spec_launched
)

select * from final
order by run_id, task_id, reason
