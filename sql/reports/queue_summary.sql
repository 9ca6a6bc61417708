-- One row per run and leaf queue (runs whose policy has queues): guarantee, mean and peak
-- allocated share (over the time buckets of queue_share_over_time; memory, and dominant =
-- the larger of cpu and memory), the mean share over the guaranteed share
-- (`dominant_share_of_guarantee`, and `mem_share_of_guarantee` for memory alone; > 1 =
-- borrowing idle capacity), preemptions, the work lost (`wasted_task_s`: preemptions and
-- evictions; `preemption_wasted_task_s`: preemptions only, a task with both split in
-- proportion to their counts), how long jobs waited for their first container (this
-- includes waiting for AM room: maximum-am-resource-percent and application limits), and
-- two Jain indices, Jain = (sum x)^2 / (n * sum x^2):
-- - jain_queues (the run's, on every leaf row; demand-aware): per time bucket, each leaf
--   that asked for anything is entitled to min(guaranteed share, its demand's dominant
--   share); x = min(1, dominant share held / that entitlement), so a leaf short of the
--   guarantee it asked for lowers it and borrowing idle capacity does not; the mean over
--   the buckets where some leaf held anything.  1 = every leaf got what it asked for up to
--   its guarantee.  (The capacity scheduler's own notion: its preemption policy protects
--   min(used + pending, guaranteed) of each queue.)
-- - jain_users_usage (per leaf; descriptive, not demand-aware): across the leaf's users of
--   each user's dominant usage over the run (the larger of its cpu-seconds and mem-seconds,
--   each over the run's provisioned cpu- or mem-seconds); 1 = its users used equal amounts,
--   lower also when users simply asked for different amounts.
with leaves as (
    select run_id, queue, guaranteed_share, max_share from queues where leaf
),

task_runs as (
    select * from task_runs
),

node_intervals as (
    select * from node_intervals
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

provisioned as (
    select run_id, sum((down_s - up_s) * cpu) as cpu_s, sum((down_s - up_s) * mem) as mem_s
    from node_intervals
    group by run_id
),

user_use as (
    select
        tasks.run_id,
        tasks.queue,
        tasks."user",
        greatest(
            sum(tasks.cpu * (coalesce(tasks.end_s, tasks.start_s) - tasks.start_s))
                / nullif(any_value(provisioned.cpu_s), 0),
            sum(tasks.mem * (coalesce(tasks.end_s, tasks.start_s) - tasks.start_s))
                / nullif(any_value(provisioned.mem_s), 0)
        ) as dominant_use
    from tasks
    join provisioned using (run_id)
    where tasks.start_s is not null
    group by tasks.run_id, tasks.queue, tasks."user"
),

user_fairness as (
    select
        run_id,
        queue,
        count(*) as users,
        if(sum(dominant_use * dominant_use) > 0,
           sum(dominant_use) * sum(dominant_use)
               / (count(*) * sum(dominant_use * dominant_use)), null) as jain_users_usage
    from user_use
    group by run_id, queue
),

-- Demand-aware Jain across leaves, bucket by bucket (see the header).
entitled as (
    select
        run_id,
        bucket,
        bucket_end_s - bucket_start_s as bucket_s,
        least(1.0, dominant_share / least(guaranteed_share, demand_dominant_share)) as x
    from queue_share_over_time
    where demand_dominant_share > 0 and guaranteed_share > 0
),

bucket_fairness as (
    select
        run_id,
        bucket_s,
        sum(x) * sum(x) / (count(*) * sum(x * x)) as jain
    from entitled
    group by run_id, bucket, bucket_s
    having sum(x * x) > 0
),

queue_fairness as (
    select run_id, sum(jain * bucket_s) / sum(bucket_s) as jain_queues
    from bucket_fairness
    group by run_id
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
        shares.mean_mem_share / nullif(leaves.guaranteed_share, 0) as mem_share_of_guarantee,
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
        user_fairness.jain_users_usage
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
        queue_fairness.jain_queues
    from per_queue
    join runs using (run_id)
    left join queue_fairness using (run_id)
)

select * from final
order by run_id, queue
