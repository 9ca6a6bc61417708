-- Must return no rows: in runs of the GPU workload-inflation experiment (tasks holding
-- gpu_devices; pods never leave there, so everything placed is held at the end), each
-- placed task holds as many devices as it asks for (one for a share below 1), every device
-- index exists on its node, no device is more than fully allocated (shares of one device
-- sum to at most 1, a whole-GPU task holds its devices alone), and the cpu and mem placed
-- on a node fit its capacity.
with scope as (
    select * from check_scope
),

placed as (
    select run_id, task_id, machine_id, gpu, cpu, mem, gpu_devices
    from task_runs
    where run_id in (select run_id from scope)
      and gpu_devices is not null and machine_id is not null
),

nodes as (
    select run_id, machine_id, cpu, mem, gpu
    from node_intervals
    where run_id in (select run_id from scope)
),

device_count as (
    select run_id, machine_id, task_id,
           'holds ' || len(gpu_devices) || ' devices for a request of ' || gpu as reason
    from placed
    where len(gpu_devices) <> (case when gpu > 0 and gpu < 1 then 1 else cast(gpu as integer) end)
),

held as (
    select run_id, machine_id, task_id, unnest(gpu_devices) as device,
           case when gpu < 1 then gpu else 1.0 end as share
    from placed
),

device_over as (
    select held.run_id, held.machine_id, min(held.task_id) as task_id,
           case when held.device >= nodes.gpu or held.device < 0
                then 'device ' || held.device || ' does not exist on the node'
                else 'device ' || held.device || ' allocated ' || sum(held.share) end as reason
    from held
    join nodes using (run_id, machine_id)
    group by held.run_id, held.machine_id, held.device, nodes.gpu
    having sum(held.share) > 1 + 1e-9 or held.device >= nodes.gpu or held.device < 0
),

node_over as (
    select placed.run_id, placed.machine_id, min(placed.task_id) as task_id,
           case when sum(placed.cpu) > nodes.cpu * (1 + 1e-9) then 'cpu over capacity'
                else 'mem over capacity' end as reason
    from placed
    join nodes using (run_id, machine_id)
    group by placed.run_id, placed.machine_id, nodes.cpu, nodes.mem
    having sum(placed.cpu) > nodes.cpu * (1 + 1e-9) or sum(placed.mem) > nodes.mem * (1 + 1e-9)
),

final as (
    select run_id, machine_id, task_id, reason from device_count
    union all
    select run_id, machine_id, task_id, reason from device_over
    union all
    select run_id, machine_id, task_id, reason from node_over
)

select * from final
order by run_id, machine_id, task_id
