-- Per run and job-size bin: how local the reads of the jobs of that size were.  A job's size
-- is its number of tasks with input data that started (for MapReduce jobs: its maps; the
-- tasks whose `task_runs.locality` is known), binned as the delay-scheduling paper bins
-- Facebook's jobs by number of maps (Zaharia et al., EuroSys 2010, Table 1 and Fig. 1):
-- 1, 2-10, 11-50, 51-150, 151-500, >500.  `locality_node`/`_rack`/`_any` are fractions of
-- the bin's tasks with input data (task-weighted, as the run's `locality_*` metrics), by
-- where their last attempt ran.  Only bins holding a job are listed; runs without input
-- data have no rows.
with task_runs as (
    select * from task_runs
),

runs as (
    select * from runs
),

bins as (
    select *
    from (values
        (1, '1', 1, 1),
        (2, '2-10', 2, 10),
        (3, '11-50', 11, 50),
        (4, '51-150', 51, 150),
        (5, '151-500', 151, 500),
        (6, '>500', 501, null)
    ) as b(bin_order, bin, min_tasks, max_tasks)
),

jobs as (
    select
        run_id,
        job_id,
        count(*)                                     as tasks_with_inputs,
        count(*) filter (where locality = 'node')    as node_tasks,
        count(*) filter (where locality = 'rack')    as rack_tasks,
        count(*) filter (where locality = 'any')     as any_tasks
    from task_runs
    where locality is not null
    group by run_id, job_id
),

binned as (
    select jobs.*, bins.bin, bins.bin_order
    from jobs
    join bins
      on jobs.tasks_with_inputs >= bins.min_tasks
     and (bins.max_tasks is null or jobs.tasks_with_inputs <= bins.max_tasks)
),

final as (
    select
        binned.run_id,
        runs.trace,
        binned.bin,
        binned.bin_order,
        count(*)                                                 as jobs,
        sum(binned.tasks_with_inputs)                            as tasks_with_inputs,
        sum(binned.node_tasks) / sum(binned.tasks_with_inputs)   as locality_node,
        sum(binned.rack_tasks) / sum(binned.tasks_with_inputs)   as locality_rack,
        sum(binned.any_tasks) / sum(binned.tasks_with_inputs)    as locality_any
    from binned
    join runs using (run_id)
    group by binned.run_id, runs.trace, binned.bin, binned.bin_order
)

select * from final
order by trace, run_id, bin_order
