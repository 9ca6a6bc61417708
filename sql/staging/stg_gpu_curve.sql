-- One run's gpu_curve.parquet (`src_gpu_curve`), cast to warehouse types.
with source as (
    select * from src_gpu_curve
),

final as (
    select
        cast(run_id as varchar)      as run_id,
        cast(arrived_pct as integer) as arrived_pct,
        cast(alloc_ratio as double)  as alloc_ratio,
        cast(frag_gpu as double)     as frag_gpu,
        cast(frag_ratio as double)   as frag_ratio,
        cast(pods as bigint)         as pods,
        cast(dropped as bigint)      as dropped
    from source
)

select * from final
