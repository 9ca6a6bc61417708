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

from pipeline.errors import TraceError, filesystem_error

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Replay public cluster traces through scheduler policies and measure what each costs.",
)


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
    fmt: Annotated[str, typer.Option("--format", help="google2011 or alibaba2018.")
                   ] = "google2011",
    machines: Annotated[int, typer.Option(help="Number of machines.")] = 200,
    hours: Annotated[float, typer.Option(help="Length of the trace window in hours.")] = 24.0,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same bytes).")] = 0,
) -> None:
    """Write a synthetic trace in the raw published layout of FMT, shaped on the real trace."""
    from pipeline.generate import generate as run_generate

    typer.echo(json.dumps(run_generate(out, fmt, machines=machines, hours=hours, seed=seed),
                          default=str))


@app.command()
@user_errors
def ingest(
    fmt: Annotated[str, typer.Argument(help="Source format, e.g. google2011, alibaba2018.")],
    src: Annotated[Path, typer.Argument(help="Directory holding the raw published files.")],
    out: Annotated[Path, typer.Argument(help="Canonical trace directory to write.")],
) -> None:
    """Read the raw published files of FMT from SRC and write a canonical trace to OUT."""
    from pipeline.ingest.stage import ingest as run_ingest

    manifest = run_ingest(fmt, src, out)
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
    dataset: Annotated[str, typer.Argument(help="google2011, alibaba2017 or alibaba2018.")],
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
    set_: Annotated[list[str] | None, typer.Option("--set", help=(
        "KEY=VALUE policy parameter or cluster option (price_per_hour, billing, node_cpu, "
        "node_mem, min_nodes, max_nodes, initial_nodes, boot_delay_s, upscale_wait_s, "
        "idle_s); repeatable."))] = None,
    seed: Annotated[int, typer.Option(help="Seed of the run's random generator.")] = 0,
    cluster: Annotated[str, typer.Option(help="fixed (the trace's machines) or elastic.")
                       ] = "fixed",
    horizon_s: Annotated[float | None, typer.Option(
        help="Stop at this simulated time (tasks still open end 'unfinished').")] = None,
) -> None:
    """Replay one canonical trace through one policy into a run directory."""
    from pipeline.replay.options import CLUSTER_PARAMS
    from pipeline.replay.stage import replay as run_replay

    settings = parse_settings(set_)
    cluster_options = {k: v for k, v in settings.items() if k in CLUSTER_PARAMS}
    params = {k: v for k, v in settings.items() if k not in CLUSTER_PARAMS}
    result = run_replay(trace, policy, params, seed, out, cluster=cluster,
                        cluster_options=cluster_options, horizon_s=horizon_s)
    typer.echo(json.dumps({"run_id": result.run_id, "out": str(result.out_dir),
                           "metrics": result.metrics}))


@app.command()
@user_errors
def policies(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """List policy names with their parameters, defaults and a one-line description."""
    from pipeline.policies import describe_policies

    described = describe_policies()
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
    cluster: Annotated[str, typer.Option(help="fixed or elastic.")] = "fixed",
    set_: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE policy param.")
                    ] = None,
) -> None:
    """Time the replay core on a generated workload; print one JSON line."""
    from pipeline.bench.run import bench as run_bench

    typer.echo(json.dumps(run_bench(policy, machines, tasks, seed, parse_settings(set_),
                                    cluster)))


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
) -> None:
    """Replay traces x policies x parameter grid x seeds in parallel, skipping finished runs."""
    from pipeline.sweep import sweep as run_sweep

    typer.echo(json.dumps(run_sweep(params, scheduler, workers, progress)))


@app.command()
@user_errors
def load(
    runs: Annotated[list[Path], typer.Argument(help=(
        "Run directories, directories holding run directories, or a sweep index.json."))],
    db: Annotated[Path, typer.Option(help="DuckDB warehouse file.")],
    baseline: Annotated[str | None, typer.Option(help="Baseline policy stored for views.")
                        ] = None,
) -> None:
    """Load run directories into the DuckDB warehouse (idempotent, one transaction)."""
    from pipeline.warehouse import load as run_load

    typer.echo(json.dumps(run_load(expand_runs(runs), db, baseline=baseline), default=str))


def expand_runs(paths: list[Path]) -> list[Path]:
    """Run directories named directly, found one level down, or listed in an index.json."""
    runs: list[Path] = []
    for path in paths:
        if path.is_file() and path.suffix == ".json":
            runs.extend(index_runs(path))
        elif (path / "run.json").is_file() or not path.is_dir():
            runs.append(path)
        else:
            runs.extend(sorted(p.parent for p in path.rglob("run.json")))
    return runs


def index_runs(path: Path) -> list[Path]:
    """The run directories a sweep's ``index.json`` lists (a clear error if it is not one)."""
    try:
        index = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"not a sweep index: unreadable JSON ({exc})", path) from None
    runs = index.get("runs") if isinstance(index, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, str) and r for r in runs):
        raise TraceError("not a sweep index: expected an object whose 'runs' is a list of "
                         "run directory paths", path, field="runs")
    return [Path(r) for r in runs]


@app.command()
@user_errors
def sql(
    query: Annotated[str, typer.Argument(help="SQL text, a file, or a name from sql/.")],
    db: Annotated[Path, typer.Option(help="DuckDB warehouse file.")],
    max_rows: Annotated[int | None, typer.Option(help="Print at most this many rows.")] = None,
) -> None:
    """Run SQL (text, a file, or a report/check name from sql/) and print a table."""
    from pipeline.warehouse import format_table
    from pipeline.warehouse import sql as run_sql

    columns, rows = run_sql(db, query, max_rows=max_rows)
    typer.echo(format_table(columns, rows))


@app.command()
@user_errors
def report(
    db: Annotated[Path, typer.Option(help="DuckDB warehouse file.")],
    out: Annotated[Path, typer.Option(help="Report directory to write.")],
    baseline: Annotated[str, typer.Option(help="Policy the others are compared with.")
                        ] = "yarn-uniform",
) -> None:
    """Write the cost-savings report: HTML (offline), PNG charts and a Markdown summary."""
    from pipeline.report import report as run_report

    typer.echo(json.dumps(run_report(db, out, baseline), default=str))


def main() -> None:
    """Entry point for ``python -m pipeline``."""
    sys.exit(app())
