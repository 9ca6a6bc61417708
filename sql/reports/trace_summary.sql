-- One row per trace (and content digest): what it is, as its runs recorded it (run.json's
-- trace_facts and window): source format, observation window, machines, jobs, tasks, units.
with runs as (
    select * from runs
),

final as (
    select
        trace,
        trace_digest,
        any_value(trace_facts ->> 'source_format')        as source_format,
        any_value(trace_facts ->> 'time_origin')          as time_origin,
        any_value(trace_facts -> 'units')                 as units,
        any_value(cast(trace_facts ->> 'machines' as bigint)) as machines,
        any_value(cast(trace_facts ->> 'jobs' as bigint)) as jobs,
        any_value(cast(trace_facts ->> 'tasks' as bigint)) as tasks,
        any_value(window_start_s)                         as window_start_s,
        any_value(window_end_s)                           as window_end_s,
        any_value(window_source)                          as window_source,
        count(*)                                          as runs
    from runs
    group by trace, trace_digest
)

select * from final
order by trace, trace_digest
