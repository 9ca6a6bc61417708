-- One run's queues.parquet (`src_queues`), cast to warehouse types.
-- Columns beyond the table's (policy-specific settings) are kept as they are.
with source as (
    select * from src_queues
),

final as (
    select
        cast(run_id as varchar)          as run_id,
        cast(queue as varchar)           as queue,
        cast(parent as varchar)          as parent,
        cast(leaf as boolean)            as leaf,
        cast(depth as integer)           as depth,
        cast(weight as double)           as weight,
        cast(guaranteed_share as double) as guaranteed_share,
        cast(max_share as double)        as max_share,
        cast(guaranteed_cpu as double)   as guaranteed_cpu,
        cast(max_cpu as double)          as max_cpu,
        cast(guaranteed_mem as double)   as guaranteed_mem,
        cast(max_mem as double)          as max_mem,
        cast(guaranteed_gpu as double)   as guaranteed_gpu,
        cast(max_gpu as double)          as max_gpu,
        source.* exclude (
            run_id, queue, parent, leaf, depth, weight, guaranteed_share, max_share,
            guaranteed_cpu, max_cpu, guaranteed_mem, max_mem, guaranteed_gpu, max_gpu
        )
    from source
)

select * from final
