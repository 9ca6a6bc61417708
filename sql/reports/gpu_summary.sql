-- The GPU workload-inflation experiment per trace and setting, averaged over seeds: the GPU
-- allocation ratio and fragmentation when the arrived workload reached 100 % of GPU
-- capacity and at the end (130 % by default), the GPUs still unallocated when the first pod
-- failed to fit and the arrived workload then (min and max over seeds too), and the pods
-- no node could host.  Runs of mode 'inflation' only.
with runs as (
    select run_id, trace, policy, seed from runs where mode = 'inflation'
),

labels as (
    select run_id, label from policy_summary
),

metrics as (
    select * from metrics where run_id in (select run_id from runs)
),

per_run as (
    select
        run_id,
        max(value) filter (where metric = 'util_alloc_gpu')             as util_alloc_gpu,
        max(value) filter (where metric = 'gpu_fragmentation')          as gpu_fragmentation,
        max(value) filter (where metric = 'gpu_frag_gpus')              as gpu_frag_gpus,
        max(value) filter (where metric = 'util_alloc_gpu_end')         as util_alloc_gpu_end,
        max(value) filter (where metric = 'gpu_fragmentation_end')      as gpu_fragmentation_end,
        max(value) filter (where metric = 'gpu_unallocated_first_fail') as gpu_unallocated_first_fail,
        max(value) filter (where metric = 'gpu_arrived_first_fail')     as gpu_arrived_first_fail,
        max(value) filter (where metric = 'tasks_unschedulable')        as tasks_unschedulable,
        max(value) filter (where metric = 'gpu_tasks_unschedulable')    as gpu_tasks_unschedulable,
        max(value) filter (where metric = 'gpu_pods_arrived')           as gpu_pods_arrived
    from metrics
    group by run_id
),

final as (
    select
        runs.trace,
        runs.policy,
        labels.label,
        count(*)                                  as seeds,
        avg(util_alloc_gpu)                       as util_alloc_gpu,
        avg(gpu_fragmentation)                    as gpu_fragmentation,
        avg(gpu_frag_gpus)                        as gpu_frag_gpus,
        avg(util_alloc_gpu_end)                   as util_alloc_gpu_end,
        avg(gpu_fragmentation_end)                as gpu_fragmentation_end,
        avg(gpu_unallocated_first_fail)           as gpu_unallocated_first_fail,
        min(gpu_unallocated_first_fail)           as gpu_unallocated_first_fail_min,
        max(gpu_unallocated_first_fail)           as gpu_unallocated_first_fail_max,
        avg(gpu_arrived_first_fail)               as gpu_arrived_first_fail,
        avg(tasks_unschedulable)                  as tasks_unschedulable,
        avg(gpu_tasks_unschedulable)              as gpu_tasks_unschedulable,
        avg(gpu_pods_arrived)                     as gpu_pods_arrived
    from per_run
    join runs using (run_id)
    join labels using (run_id)
    group by runs.trace, runs.policy, labels.label
)

select * from final
order by trace, label
