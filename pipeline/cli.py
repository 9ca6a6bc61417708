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
from typing import Annotated, Any

import typer

from pipeline.errors import TraceError

app = typer.Typer(
    add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
    help="Replay public cluster traces through scheduler policies and measure what each costs.",
)


def user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Report TraceError as ``tracereplay: error: ...`` with exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TraceError as exc:
            typer.echo(f"tracereplay: error: {exc}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("tracereplay: interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper


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


def main() -> None:
    """Entry point for ``python -m pipeline``."""
    sys.exit(app())
