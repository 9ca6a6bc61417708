-- One row per run and leaf queue (runs whose policy has queues): guarantee, mean and peak
-- allocated share (over the time buckets of queue_share_over_time; memory, and dominant =
-- the larger of cpu and memory), share of guarantee (mean share / guaranteed share; > 1 =
-- borrowing idle capacity), preemptions, the work lost (`wasted_task_s`: preemptions and
-- evictions; `preemption_wasted_task_s`: preemptions only, a task with both split in
-- proportion to their counts), how long jobs waited for their first container (this
-- includes waiting for AM room: maximum-am-resource-percent and application limits), and
-- two Jain indices: jain_users across the queue's users of memory-seconds, and jain_queues
-- across the run's leaves of dominant share / guaranteed share (1 = every queue got the
-- same multiple of its guarantee).  Jain: (sum x)^2 / (n * sum x^2).
with leaves as (
    select run_id, queue, guaranteed_share, max_share from queues where leaf
),

task_runs as (
    select * from task_runs
),

tasks as (
    select task_runs.*
    from task_runs
    join leaves using (run_id, queue)
),

shares as (
    select
        run_id,
        queue,
        avg(mem_share) as mean_mem_share,
        max(mem_share) as peak_mem_share,
        avg(dominant_share) as mean_dominant_share,
        max(dominant_share) as peak_dominant_share
    from queue_share_over_time
    group by run_id, queue
),

user_use as (
    select run_id, queue, "user", sum(mem * (coalesce(end_s, start_s) - start_s)) as mem_s
    from tasks
    where start_s is not null
    group by run_id, queue, "user"
),

user_fairness as (
    select
        run_id,
        queue,
        count(*) as users,
        if(sum(mem_s * mem_s) > 0,
           sum(mem_s) * sum(mem_s) / (count(*) * sum(mem_s * mem_s)), null) as jain_users
    from user_use
    group by run_id, queue
),

jobs as (
    select run_id, queue, job_id, min(submit_s) as submit_s,
           min(coalesce(first_start_s, start_s)) as first_start_s
    from tasks
    group by run_id, queue, job_id
),

job_waits as (
    select
        run_id,
        queue,
        count(*) as jobs,
        count(*) filter (where first_start_s is null) as jobs_never_started,
        avg(first_start_s - submit_s) as job_start_wait_mean_s,
        quantile_cont(first_start_s - submit_s, 0.95) as job_start_wait_p95_s
    from jobs
    group by run_id, queue
),

task_counts as (
    select
        run_id,
        queue,
        count(*) as tasks,
        coalesce(sum(preemptions), 0) as preemptions,
        coalesce(sum(wasted_s), 0) as wasted_task_s,
        coalesce(sum(coalesce(wasted_s, 0) * coalesce(preemptions, 0)
                     / nullif(coalesce(preemptions, 0) + coalesce(evictions, 0), 0)), 0)
            as preemption_wasted_task_s
    from tasks
    group by run_id, queue
),

per_queue as (
    select
        leaves.*,
        shares.mean_mem_share,
        shares.peak_mem_share,
        shares.mean_mem_share / nullif(leaves.guaranteed_share, 0) as share_of_guarantee,
        shares.mean_dominant_share,
        shares.peak_dominant_share,
        shares.mean_dominant_share / nullif(leaves.guaranteed_share, 0)
            as dominant_share_of_guarantee,
        coalesce(task_counts.tasks, 0) as tasks,
        coalesce(task_counts.preemptions, 0) as preemptions,
        coalesce(task_counts.wasted_task_s, 0) as wasted_task_s,
        coalesce(task_counts.preemption_wasted_task_s, 0) as preemption_wasted_task_s,
        job_waits.jobs,
        job_waits.jobs_never_started,
        job_waits.job_start_wait_mean_s,
        job_waits.job_start_wait_p95_s,
        user_fairness.users,
        user_fairness.jain_users
    from leaves
    left join shares using (run_id, queue)
    left join task_counts using (run_id, queue)
    left join job_waits using (run_id, queue)
    left join user_fairness using (run_id, queue)
),

final as (
    select
        runs.policy,
        per_queue.*,
        sum(dominant_share_of_guarantee) over w * sum(dominant_share_of_guarantee) over w
            / nullif(count(dominant_share_of_guarantee) over w
                     * sum(dominant_share_of_guarantee * dominant_share_of_guarantee) over w, 0)
            as jain_queues
    from per_queue
    join runs using (run_id)
    window w as (partition by per_queue.run_id)
)

select * from final
order by run_id, queue
