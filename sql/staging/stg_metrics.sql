-- One run's metrics.parquet (`src_metrics`), cast to warehouse types; NaN -> NULL.
-- Columns beyond the contract's are kept as they are.
with source as (
    select * from src_metrics
),

final as (
    select
        cast(run_id as varchar) as run_id,
        cast(metric as varchar) as metric,
        if(isnan(cast(value as double)), null, cast(value as double)) as value,
        cast(unit as varchar)   as unit,
        source.* exclude (run_id, metric, value, unit)
    from source
)

select * from final
