-- One run's run.json (a one-row relation `src_runs` the loader builds), cast to warehouse types.
with source as (
    select * from src_runs
),

final as (
    select
        cast(run_id as varchar)                                        as run_id,
        cast(trace as varchar)                                         as trace,
        cast(trace_path as varchar)                                    as trace_path,
        cast(policy as varchar)                                        as policy,
        cast(params as json)                                           as params,
        cast(params_given as json)                                     as params_given,
        cast(settings as json)                                         as settings,
        cast(window_start_s as double)                                 as window_start_s,
        cast(window_end_s as double)                                   as window_end_s,
        cast(window_source as varchar)                                 as window_source,
        cast(measured_from_s as double)                                as measured_from_s,
        cast(measured_to_s as double)                                  as measured_to_s,
        cast(drained as boolean)                                       as drained,
        cast(trace_digest as varchar)                                  as trace_digest,
        cast(trace_facts as json)                                      as trace_facts,
        cast(seed as bigint)                                           as seed,
        cast(wall_s as double)                                         as wall_s,
        cast(code_version as varchar)                                  as code_version,
        -- ISO text with or without an offset, stored as UTC
        cast(timezone('UTC', cast(created_at as timestamptz)) as timestamp) as created_at,
        cast(cluster as json)                                          as cluster,
        cast(extra as json)                                            as extra,
        cast(trace_tasks as bigint)                                    as trace_tasks,
        cast(run_path as varchar)                                      as run_path,
        cast(mode as varchar)                                          as mode,
        cast(timezone('UTC', now()) as timestamp)                      as loaded_at
    from source
)

select * from final
