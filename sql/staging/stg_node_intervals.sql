-- One run's node_intervals.parquet (`src_node_intervals`), cast to warehouse types;
-- NaN -> NULL.  Columns beyond the contract's are kept as they are.
with source as (
    select * from src_node_intervals
),

final as (
    select
        cast(run_id as varchar)     as run_id,
        cast(machine_id as varchar) as machine_id,
        if(isnan(cast(up_s as double)), null, cast(up_s as double))     as up_s,
        if(isnan(cast(down_s as double)), null, cast(down_s as double)) as down_s,
        if(isnan(cast(cpu as double)), null, cast(cpu as double))       as cpu,
        if(isnan(cast(mem as double)), null, cast(mem as double))       as mem,
        source.* exclude (run_id, machine_id, up_s, down_s, cpu, mem)
    from source
)

select * from final
