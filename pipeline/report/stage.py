"""The ``report`` stage: warehouse views -> report.html, charts/*.png and summary.md.

The output directory is written whole into a temporary directory and renamed into place,
so a failed report leaves the previous one untouched.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.errors import UsageError
from pipeline.progress import Progress
from pipeline.report.data import ReportData, read_report_data
from pipeline.report.gpu import gpu_sections
from pipeline.report.render import (
    anchor,
    chart_png,
    chart_spec,
    glance_rows,
    html_page,
    markdown_table,
)
from pipeline.report.section import Section
from pipeline.report.sections import trace_sections
from pipeline.trace.io import atomic_dir

TITLE = "tracereplay cost-savings report"
REPORT_FILES = ("report.html", "summary.md")


def report(db: Path, out: Path, baseline: str = "yarn-uniform",
           tolerance: float = 0.1, progress: bool = False) -> dict[str, Any]:
    """Write the cost-savings report of warehouse ``db`` into directory ``out``.

    ``tolerance``: how much slower (p95 job time) and how much more work left undone than
    the status quo a setting may be and still count as a saving (0.1 = 10%).
    ``out`` is replaced as a whole; to protect other files, an existing non-empty ``out``
    must be a previous report (hold report.html or summary.md).  ``progress``: show the
    traces and charts done so far (:mod:`pipeline.progress`).
    """
    out = Path(out)
    if not 0 <= tolerance <= 10:
        raise UsageError(f"must be between 0 and 10 (a fraction), got {tolerance}",
                         field="--tolerance")
    _check_replaceable(out)
    data = read_report_data(Path(db), baseline)
    traces = []
    with Progress(len(data.traces()), "report", "traces", enabled=progress) as shown:
        for trace in data.traces():
            traces.append((trace, _sections(data.for_trace(trace), tolerance)))
            shown.update(len(traces))
    intro = _intro(data, Path(db))
    with atomic_dir(out) as tmp:
        charts = write_charts(tmp / "charts", traces, progress)
        write_csvs(tmp / "tables", traces)
        (tmp / "report.html").write_text(html_page(TITLE, intro, traces))
        (tmp / "summary.md").write_text(summary_markdown(intro, traces))
    return {
        "out": str(out),
        "baseline": baseline,
        "traces": [t for t, _ in traces],
        "runs": _run_count(data),
        "html": str(out / "report.html"),
        "summary": str(out / "summary.md"),
        "charts": [str(out / "charts" / name) for name in charts],
    }


def _sections(data: ReportData, tolerance: float) -> list[Section]:
    """A trace's sections: the replays' (when it has some), then the GPU experiment's."""
    replays = trace_sections(data, tolerance) if data.has_replays else []
    return replays + gpu_sections(data)


def _run_count(data: ReportData) -> int:
    """Runs in the report: event replays and runs of the GPU experiment."""
    gpu = int(data.gpu_summary["seeds"].sum()) if data.gpu_summary.height else 0
    return data.summary.height + gpu


def _check_replaceable(out: Path) -> None:
    """Refuse to replace a non-empty directory that is not a previous report."""
    if out.exists() and not out.is_dir():
        raise UsageError("exists and is not a directory", out, field="--out")
    if out.is_dir() and any(out.iterdir()) and not any((out / f).exists() for f in REPORT_FILES):
        raise UsageError(
            "is not empty and holds no previous report; refusing to replace it "
            "(give a new or empty directory)", out, field="--out",
        )


def _intro(data: ReportData, db: Path) -> str:
    return (
        f"What each scheduling setting would cost on the workload of {len(data.traces())} "
        f"trace(s), replayed {_run_count(data)} times (warehouse {db}), against the "
        f"status quo: {data.baseline} on the trace's own machines. Tables round for reading; "
        "tables/*.csv and the warehouse hold the exact figures."
    )


def chart_name(trace: str, section: Section) -> str:
    """The PNG file name of a section's chart."""
    return f"{_slug(trace)}-{section.key}.png"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "trace"


def write_charts(directory: Path, traces: list[tuple[str, list[Section]]],
                 progress: bool = False) -> list[str]:
    """Render every chart to ``directory/NAME.png``; the file names."""
    directory.mkdir(parents=True, exist_ok=True)
    charts = [(trace, s) for trace, sections in traces for s in sections if s.chart is not None]
    names = []
    with Progress(len(charts), "report", "charts", enabled=progress) as shown:
        for trace, section in charts:
            assert section.chart is not None
            name = chart_name(trace, section)
            (directory / name).write_bytes(chart_png(chart_spec(section.chart)))
            names.append(name)
            shown.update(len(names))
    return names


def summary_markdown(intro: str, traces: list[tuple[str, list[Section]]]) -> str:
    """The report as Markdown: per trace and section, the lead, chart, notes and tables."""
    lines = [f"# {TITLE}", "", intro, "", "## At a glance", "",
             "| Trace | Question | Answer | Caveat |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in glance_rows(traces)]
    lines += ["", "Details per trace: " + ", ".join(
        f"[{trace}](#{anchor(trace)})" for trace, _ in traces) + ".", ""]
    for trace, sections in traces:
        lines += [f"## Trace {trace}", ""]
        for section in sections:
            lines += [f"### {section.title}", ""]
            if section.lead:
                lines += [f"**{section.lead}**", ""]
            if section.chart is not None:
                lines += [f"![{section.title}](charts/{chart_name(trace, section)})", ""]
            if section.note:
                lines += [section.note, ""]
            lines += [f"- {b}" for b in section.bullets] + ([""] if section.bullets else [])
            if section.table.width:
                lines += [markdown_table(section.table), ""]
            for title, shown, _ in section.details:
                lines += ["<details>", f"<summary>{title}</summary>", "",
                          markdown_table(shown), "", "</details>", ""]
    return "\n".join(lines)


def write_csvs(directory: Path, traces: list[tuple[str, list[Section]]]) -> list[str]:
    """Every table of the report, unrounded, as ``directory/<trace>-<section>[-n].csv``."""
    directory.mkdir(parents=True, exist_ok=True)
    names = []
    for trace, sections in traces:
        for section in sections:
            frames = [section.raw] if section.raw is not None else []
            frames += [raw for _, _, raw in section.details]
            for i, frame in enumerate(frames):
                name = f"{_slug(trace)}-{section.key}{'' if i == 0 else f'-{i}'}.csv"
                _scalars(frame).write_csv(directory / name)
                names.append(name)
    return names


def _scalars(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with nested columns (lists, structs) as JSON text, so CSV can hold them."""
    nested = [c for c, t in zip(frame.columns, frame.dtypes, strict=True) if t.is_nested()]
    return frame.with_columns(pl.col(c).map_elements(
        lambda v: json.dumps(v if not hasattr(v, "to_list") else v.to_list(), default=str),
        return_dtype=pl.String) for c in nested)
