"""The ``tracereplay`` command line: thin verbs over the stage modules.

Every verb turns a :class:`TraceError` (a user mistake or bad input) into one line on stderr
and exit status 1; ``--help`` works on every verb.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from pipeline import __version__
from pipeline.cli_help import words_in_help
from pipeline.errors import TraceError, filesystem_error

words_in_help()
app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Replay public cluster traces through scheduler policies and measure what each costs.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tracereplay {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the version and exit.")] = False,
) -> None:
    """Replay public cluster traces through scheduler policies and measure what each costs."""


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Report TraceError as ``tracereplay: error: ...`` with exit status 1.

    File-system faults that no stage turned into a TraceError (a full disk, a read-only
    mount, a parent path that is a file) are reported the same way, naming the path when the
    error does; any other exception is a bug and keeps its traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TraceError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            typer.echo("tracereplay: interrupted", err=True)
            raise typer.Exit(130) from None
        except Exception as exc:
            error = filesystem_error(exc)
            if error is None:
                raise
            _fail(error)

    return wrapper


def _fail(error: TraceError) -> NoReturn:
    # One line whatever the reason's text holds (DuckDB and pyarrow messages span lines).
    text = " ".join(str(error).split())
    typer.echo(f"tracereplay: error: {text}", err=True)
    raise typer.Exit(1) from None


@app.command()
@user_errors
def generate(
    out: Annotated[Path, typer.Argument(help="Directory to write the raw trace into.")],
    fmt: Annotated[str, typer.Option(
        "--format", help="google2011, google2019, alibaba2018, alibaba-gpu2023 or swim."
    )] = "google2011",
    machines: Annotated[int, typer.Option(help="Number of machines.")] = 200,
    hours: Annotated[float, typer.Option(help="Length of the trace window in hours.")] = 24.0,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same bytes).")] = 0,
    load: Annotated[float, typer.Option(
        help="Offered load: requested cpu x run time over the cluster's cpu, on average "
             "(the diurnal peak is 4/3 of it).")] = 0.65,
    burst_load: Annotated[float, typer.Option(
        help="google2011: a tenant's burst of batch work, extra cpu load while it lasts "
             "(0 = none).")] = 0.0,
    burst_start_h: Annotated[float, typer.Option(help="google2011: when the burst starts.")
                             ] = 13.0,
    burst_hours: Annotated[float, typer.Option(help="google2011: how long it lasts.")] = 3.0,
    burst_user: Annotated[str, typer.Option(
        help="google2011: the bursting user's name (default: the most active user).")] = "",
    usage: Annotated[bool, typer.Option(
        "--usage/--no-usage",
        help="google2011: also write task_usage/ parts (measured usage per 5-minute window, "
             "shaped over each task's run).")] = False,
) -> None:
    """Write a synthetic trace in the raw published layout of FMT, shaped on the real trace."""
    from pipeline.generate import generate as run_generate

    options: dict[str, Any] = {"load": load}
    if usage:  # formats without usage series refuse it (one line naming --usage)
        options["usage"] = True
    if burst_load != 0:  # (a negative one is refused with the reason)
        options.update(burst_load=burst_load, burst_start_h=burst_start_h,
                       burst_hours=burst_hours, burst_user=burst_user)
    typer.echo(json.dumps(run_generate(out, fmt, machines=machines, hours=hours, seed=seed,
                                       **options), default=str))


@app.command()
@user_errors
def ingest(
    fmt: Annotated[str, typer.Argument(
        help="Source format: google2011, google2019, alibaba2017, alibaba2018, "
             "alibaba-gpu2020, alibaba-gpu2023, swim, sls or swf.")],
    src: Annotated[Path, typer.Argument(help="Directory holding the raw published files.")],
    out: Annotated[Path, typer.Argument(help="Canonical trace directory to write.")],
    progress: Annotated[bool, typer.Option(
        "--progress/--no-progress", help="Show how much raw data was read (stderr).")] = True,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", help="Adapter option KEY=VALUE (repeatable), e.g. swf: size=allocated; "
                      "recorded in the manifest's notes.")] = None,
) -> None:
    """Read the raw published files of FMT from SRC and write a canonical trace to OUT."""
    from pipeline.ingest.stage import ingest as run_ingest

    manifest = run_ingest(fmt, src, out, progress, parse_settings(settings))
    rejected = {t: sum(r.values()) for t, r in manifest.rows_rejected.items()}
    typer.echo(json.dumps({"out": str(out), "rows": manifest.rows,
                           "input_rows": manifest.input_rows, "rejected": rejected,
                           "dropped": manifest.dropped}))


@app.command()
@user_errors
def validate(
    trace: Annotated[Path, typer.Argument(help="Canonical trace directory to check.")],
) -> None:
    """Check a canonical trace directory (yours or ingested) against the contract."""
    from pipeline.trace.validate import validate as run_validate

    report = run_validate(trace)
    for problem in report.problems:
        typer.echo(f"{trace}: {problem}", err=True)
    if not report.ok:
        raise typer.Exit(1)
    typer.echo(json.dumps({"trace": str(trace), "ok": True, "rows": report.rows}))


@app.command()
@user_errors
def fetch(
    dataset: Annotated[str, typer.Argument(
        help="google2011, google2019, alibaba2017, alibaba2018, alibaba-gpu2020, "
             "alibaba-gpu2023 or swf.")],
    out: Annotated[Path, typer.Argument(help="Directory to download into (bucket layout).")],
    parts: Annotated[list[str] | None, typer.Option("--parts", help=(
        "Selectors: all, TABLE, TABLE:N, TABLE:A-B, or a file path; repeat or comma-join. "
        "Default (google2011): machine_events, schema.csv, job_events:0, task_events:0."
    ))] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="Download from this URL instead of the official location.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Download the official public files of DATASET into OUT (resumable, verified)."""
    from pipeline.fetch import fetch as run_fetch

    typer.echo(json.dumps(run_fetch(dataset, out, parts, base_url, progress)))


@app.command("bench-ingest")
@user_errors
def bench_ingest(
    fmt: Annotated[str, typer.Option("--format", help="Raw format to ingest.")] = "google2011",
    src: Annotated[Path | None, typer.Option(help="Raw trace to ingest (default: generate).")
                   ] = None,
    machines: Annotated[int, typer.Option(help="Machines of the generated trace.")] = 12_500,
    hours: Annotated[float, typer.Option(help="Hours of the generated trace.")] = 96.0,
    seed: Annotated[int, typer.Option(help="Seed of the generated trace.")] = 0,
) -> None:
    """Time one ingest (raw rows/s, rows per CPU-second, peak RSS) and print one JSON line."""
    from pipeline.ingest.bench import bench_ingest as run

    typer.echo(json.dumps(run(fmt, src, machines, hours, seed)))


def parse_settings(pairs: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` pairs with YAML-typed values (``0.8`` -> float, ``true`` -> bool)."""
    import yaml

    from pipeline.errors import UsageError

    settings: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected KEY=VALUE, got '{pair}'", field="--set")
        try:
            settings[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            settings[key.strip()] = value
    return settings


@app.command()
@user_errors
def replay(
    trace: Annotated[Path, typer.Argument(help="Canonical trace directory.")],
    policy: Annotated[str, typer.Option(help="Policy name (see `tracereplay policies`).")],
    out: Annotated[Path, typer.Option(help="Run directory to write.")],
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="KEY=VALUE", help=(
        "KEY=VALUE policy parameter or cluster option (price_per_hour, billing, node_cpu, "
        "node_mem, min_nodes, max_nodes, idle_s, ...; cluster-autoscaler: catalog, "
        "autoscaler_flags, vcpu_per_unit, gib_per_unit, safe_to_evict; karpenter: catalog, "
        "nodepool, vcpu_per_unit, gib_per_unit; every option: `tracereplay policies`); "
        "repeatable."))] = None,
    seed: Annotated[int, typer.Option(help="Seed of the run's random generator.")] = 0,
    cluster: Annotated[str, typer.Option(
        help="fixed (the trace's machines), elastic, cluster-autoscaler or karpenter.")] = "fixed",
    horizon_s: Annotated[float | None, typer.Option(
        help="Stop at this time instead of the trace window's end (tasks still open end "
             "'unfinished').")] = None,
    drain: Annotated[bool, typer.Option(
        "--drain", help="Run on past the window's end until every task ends, and measure "
                        "the whole run (censored tasks still stop at the window's end).")
                     ] = False,
    progress: Annotated[bool, typer.Option(
        "--progress/--no-progress", help="Show how far the replay got (stderr).")] = True,
    sched_interval_s: Annotated[float, typer.Option(
        help="Scheduling points on this grid (s): the policy sees what arrived meanwhile as "
             "one batch (YARN's 1-s NodeManager heartbeat); 0: at every event "
             "(docs/timing.md).")] = 1.0,
) -> None:
    """Replay one canonical trace through one policy into a run directory.

    Cost and utilization are measured over the trace's observation window (its manifest's
    window_start_s..window_end_s); work not done by its end is reported as backlog.
    """
    from pipeline.replay.options import CLUSTER_PARAMS
    from pipeline.replay.stage import replay as run_replay

    settings = parse_settings(set_)
    cluster_options = {k: v for k, v in settings.items() if k in CLUSTER_PARAMS}
    params = {k: v for k, v in settings.items() if k not in CLUSTER_PARAMS}
    result = run_replay(trace, policy, params, seed, out, cluster=cluster,
                        cluster_options=cluster_options, sched_interval_s=sched_interval_s,
                        horizon_s=horizon_s, drain=drain, progress=progress)
    typer.echo(json.dumps({"run_id": result.run_id, "out": str(result.out_dir),
                           "metrics": result.metrics}))


@app.command()
@user_errors
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """List policy names with their parameters, defaults and a one-line description."""
    from pipeline.policies import describe_policies
    from pipeline.replay.options import describe_replay_options

    described = [*describe_policies(), describe_replay_options()]
    if as_json:
        typer.echo(json.dumps(described, indent=1))
        return
    for policy in described:
        typer.echo(f"{policy['name']}: {policy['summary']}")
        typer.echo(f"  source: {policy['source']}")
        for p in policy["params"]:
            extra = f" choices={p['choices']}" if "choices" in p else ""
            typer.echo(f"  --set {p['name']}={p['default']}  ({p['type']}{extra}) {p['help']}")


@app.command()
@user_errors
def bench(
    policy: Annotated[str, typer.Option(help="Policy to time.")] = "yarn-uniform",
    machines: Annotated[int, typer.Option(help="Nodes of the synthetic cluster.")] = 12_500,
    tasks: Annotated[int, typer.Option(help="Tasks of the synthetic workload.")] = 1_000_000,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic workload.")] = 0,
    cluster: Annotated[str, typer.Option(
        help="fixed, elastic, cluster-autoscaler or karpenter.")] = "fixed",
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="KEY=VALUE",
                                                   help="Policy or cluster option; repeatable.")
                    ] = None,
    scale: Annotated[str | None, typer.Option(
        help="Task counts, e.g. 1e6,5e6,40e6: run each through workload, replay and load, "
             "each stage in its own process, and print one JSON line per stage (tasks/s, "
             "peak RSS).")] = None,
    gpu: Annotated[bool, typer.Option(
        "--gpu/--no-gpu", help="Give 40% of the machines 8 GPU devices and 30% of the tasks "
        "a GPU request (a share of one device, or whole devices).")] = False,
) -> None:
    """Time the replay core on a generated workload; print one JSON line."""
    if scale is not None:
        from pipeline.bench.scale import parse_counts, scale_bench

        for record in scale_bench(parse_counts(scale), policy, machines, seed,
                                  parse_settings(set_), cluster):
            typer.echo(json.dumps(record))
        return
    from pipeline.bench.run import bench as run_bench

    typer.echo(json.dumps(run_bench(policy, machines, tasks, seed, parse_settings(set_),
                                    cluster, gpu=gpu)))


@app.command()
@user_errors
def sweep(
    params: Annotated[Path, typer.Option(help="params.yaml with a 'sweep' section.")
                      ] = Path("params.yaml"),
    scheduler: Annotated[str | None, typer.Option(help=(
        "Address of a dask.distributed scheduler (tcp://host:8786); 'serial' to run in this "
        "process; default: a local cluster of worker processes."))] = None,
    workers: Annotated[int | None, typer.Option(help="Local cluster worker processes.")
                       ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    trace: Annotated[str | None, typer.Option(
        help="Run only this trace of sweep.traces (dvc.yaml runs one stage per trace).")
                     ] = None,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Also remove run directories under runs_dir that this sweep does not "
                        "hold and did not make (another grid's, copied in by hand).")] = False,
) -> None:
    """Replay traces x policies x parameter grid x seeds in parallel, skipping finished runs.

    Runs this params file made before and its grid no longer holds are removed (and listed),
    as are the temporary directories killed runs left; other runs under runs_dir are kept
    unless --prune.
    """
    from pipeline.sweep import sweep as run_sweep

    typer.echo(json.dumps(short_result(run_sweep(params, scheduler, workers, progress, trace,
                                                 prune))))


@app.command()
@user_errors
def load(
    runs: Annotated[list[Path] | None, typer.Argument(help=(
        "Run directories, directories holding run directories, or a sweep index.json."))
                    ] = None,
    db: Annotated[Path, typer.Option(help="DuckDB warehouse file.")] = Path(
        "data/warehouse.duckdb"),
    baseline: Annotated[str | None, typer.Option(help="Baseline policy stored for views.")
                        ] = None,
    params: Annotated[Path | None, typer.Option(
        help="Also load every run of this params file's sweep (each trace's index.json).")
                      ] = None,
    summary: Annotated[Path | None, typer.Option(
        help="Also write what was loaded (run ids, rows, views) to this JSON file: the same "
             "for the same runs, unlike the database file's bytes (dvc tracks it).")] = None,
) -> None:
    """Load run directories into the DuckDB warehouse (idempotent, one transaction)."""
    from pipeline.sweep import sweep_runs
    from pipeline.warehouse import load as run_load

    paths = expand_runs(list(runs or []))
    if params is not None:
        paths = [*sweep_runs(params), *paths]
    result = run_load(paths, db, baseline=baseline, progress=True)
    if summary is not None:
        write_json_atomic(summary, load_summary(paths, result))
    typer.echo(json.dumps(short_result(result), default=str))


def short_result(result: dict[str, Any]) -> dict[str, Any]:
    """A verb's result line with its lists counted (``run_ids``: 102 ids), not printed: the
    ``--summary`` file, the warehouse and the run directories hold them."""
    return {key: len(value) if isinstance(value, list) else value
            for key, value in result.items()}


def load_summary(paths: list[Path], result: dict[str, Any]) -> dict[str, Any]:
    """What a load put in the warehouse, the same for the same results: rows, views, and each
    run's content digest (run ids stay when only the code that made a run changed)."""
    from pipeline.trace.identity import files_digest

    runs = {}
    for path in paths:
        meta = json.loads((Path(path) / "run.json").read_text())
        files = [f for f in sorted(Path(path).rglob("*")) if f.is_file()
                 and f.name != "provenance.json"]
        runs[str(meta["run_id"])] = files_digest(Path(path), files)
    return {"rows": result["rows"], "views": result["views"], "runs": dict(sorted(runs.items()))}


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as sorted JSON to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def expand_runs(paths: list[Path]) -> list[Path]:
    """Run directories named directly, found one level down, or listed in a sweep's
    index.json (every sweep's runs there; entries are relative to the index's directory)."""
    from pipeline.sweep import read_index

    runs: list[Path] = []
    for path in paths:
        if path.is_file() and path.suffix == ".json":
            listed = {r for entry in read_index(path).values() for r in entry.get("runs", [])}
            runs.extend(path.parent / p for p in sorted(listed))
        elif (path / "run.json").is_file() or not path.is_dir():
            runs.append(path)
        else:
            runs.extend(sorted(p.parent for p in path.rglob("run.json")))
    return runs


@app.command()
@user_errors
def sql(
    query: Annotated[str, typer.Argument(
        help="SQL text, a file, or the name of a report query, check or table.",
        metavar="QUERY")],
    db: Annotated[Path, typer.Option(help="DuckDB warehouse file.", metavar="FILE")] = Path(
        "data/warehouse.duckdb"),
    max_rows: Annotated[int | None, typer.Option(help="Print at most this many rows.")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="table (aligned, long cells shortened), csv, json (one object per "
                         "row) or markdown.", metavar="FORMAT")] = "table",
) -> None:
    """Run SQL (text, a file, or a report/check name from sql/) and print the result."""
    from pipeline.warehouse import sql as run_sql
    from pipeline.warehouse.query import render

    columns, rows = run_sql(db, query, max_rows=max_rows)
    typer.echo(render(columns, rows, fmt))


@app.command()
@user_errors
def report(
    db: Annotated[Path, typer.Option(help="DuckDB warehouse file.")],
    out: Annotated[Path, typer.Option(help="Report directory to write.")],
    baseline: Annotated[str, typer.Option(help="Policy the others are compared with.")
                        ] = "yarn-uniform",
    tolerance: Annotated[float, typer.Option(help=(
        "How much slower (p95 job time) and how much more work left undone than the status "
        "quo a setting may be and still count as a saving (0.1 = 10%)."))] = 0.1,
) -> None:
    """Write the cost-savings report: HTML (offline), PNG charts and a Markdown summary."""
    from pipeline.report import report as run_report

    typer.echo(json.dumps(short_result(run_report(db, out, baseline, tolerance, progress=True)),
                          default=str))


def main() -> None:
    """Entry point for ``python -m pipeline``."""
    sys.exit(app())
