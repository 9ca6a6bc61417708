-- Work each run did not do: tasks per final outcome other than finished, the resources the
-- unschedulable tasks asked for, and run time lost to kills and preemptions.
with summary as (
    select * from policy_summary
),

task_runs as (
    select * from task_runs
),

outcomes as (
    select
        run_id,
        count(*)                                                as tasks,
        count(*) filter (where outcome = 'finished')            as tasks_finished,
        count(*) filter (where outcome = 'unschedulable')       as tasks_unschedulable,
        count(*) filter (where outcome = 'unfinished')          as tasks_unfinished,
        count(*) filter (where outcome = 'killed')              as tasks_killed,
        count(*) filter (where outcome = 'preempted')           as tasks_preempted,
        coalesce(sum(cpu) filter (where outcome = 'unschedulable'), 0) as unschedulable_cpu,
        coalesce(sum(mem) filter (where outcome = 'unschedulable'), 0) as unschedulable_mem,
        max(cpu) filter (where outcome = 'unschedulable')       as largest_unschedulable_cpu,
        max(mem) filter (where outcome = 'unschedulable')       as largest_unschedulable_mem
    from task_runs
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
        outcomes.* exclude (run_id),
        outcomes.tasks_unschedulable / nullif(outcomes.tasks, 0) as unschedulable_frac,
        (outcomes.tasks - outcomes.tasks_finished) / nullif(outcomes.tasks, 0)
                                                                 as not_finished_frac,
        summary.wasted_task_s
    from summary
    join outcomes using (run_id)
)

select * from final
order by trace, policy, label, seed, run_id
