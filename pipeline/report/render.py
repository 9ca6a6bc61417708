"""Rendering report sections: a self-contained HTML page, Markdown tables and PNG charts.

The HTML page inlines the Vega, Vega-Lite and vega-embed JavaScript (bundled offline by
vl-convert), so it renders with no network.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

import altair as alt
import polars as pl
import vl_convert as vlc
from altair.utils.html import vl_version_for_vl_convert

from pipeline.report.fonts import FAMILY, css_font_faces, registered, themed
from pipeline.report.section import Section
from pipeline.warehouse.query import format_value

EMBED_OPTIONS = {"renderer": "svg", "actions": False}
STYLE = """
body { font-family: FAMILY, sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       padding: 0 1em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
p.lead { font-size: 1.2em; line-height: 1.45; background: #f3f7fb; border-left: 4px solid
         #4e79a7; padding: .7em 1em; }
table { border-collapse: collapse; font-size: 13px; margin: .8em 0; }
details > table { display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: 3px 8px; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #f4f4f4; text-align: left; }
.note { color: #555; }
ul.bullets li { margin: .3em 0; }
details { margin: .6em 0; }
summary { cursor: pointer; color: #345; }
.chart-error { color: #b00; }
summary.title { font-size: 1.17em; font-weight: bold; color: #222; margin: 1em 0 .5em; }
table.glance td { max-width: 420px; }
nav.toc li { margin: .3em 0; }
"""
EMBED_SCRIPT = """
// a contents link opens the folded section it points at
function openTarget() {
  const target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
  const folded = target && target.querySelector(':scope > details');
  if (folded) folded.open = true;
}
window.addEventListener('hashchange', openTarget);
openTarget();
for (const [id, spec] of CHARTS) {
  vegaEmbed('#' + id, spec, EMBED_OPTIONS).catch((err) => {
    const div = document.getElementById(id);
    div.className = 'chart-error';
    div.textContent = 'chart failed to render: ' + err;
  });
}
"""


def vl_version() -> str:
    """The Vega-Lite version (vl-convert's spelling) matching Altair's schema."""
    return vl_version_for_vl_convert()


def chart_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """A chart's Vega-Lite spec with its data inlined.  Altair refuses more than 5,000 rows
    by default, a guard for notebooks; a report chart's rows are bounded by construction
    (buckets, CDF points, settings; the status quo repeated in each panel), so none is
    refused here."""
    with alt.data_transformers.disable_max_rows():
        return chart.to_dict()


def chart_png(spec: dict[str, Any], scale: float = 2.0) -> bytes:
    """A Vega-Lite spec rendered to PNG, offline, in the project's own font (the same
    bytes whatever fonts the machine has: :mod:`pipeline.report.fonts`)."""
    registered()
    return vlc.vegalite_to_png(themed(spec), vl_version=vl_version(), scale=scale)


def html_page(title: str, intro: str, traces: Sequence[tuple[str, list[Section]]]) -> str:
    """The whole report as one HTML document with every chart and its JavaScript inlined:
    the first page's answers (:func:`glance_rows`), a table of contents, then per trace its
    first section open and the others folded (click a title to open it)."""
    body = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(intro)}</p>",
            html_glance(traces), html_contents(traces)]
    specs: list[tuple[str, dict[str, Any]]] = []
    for trace, sections in traces:
        body.append(f'<h2 id="{anchor(trace)}">Trace {html.escape(trace)}</h2>')
        for i, section in enumerate(sections):
            chart_id = f"chart-{len(specs)}" if section.chart is not None else None
            body.append(html_section(section, chart_id, anchor(trace, section.key),
                                     folded=i > 0))
            if section.chart is not None and chart_id is not None:
                specs.append((chart_id, themed(chart_spec(section.chart))))
    bundle = vlc.javascript_bundle(vl_version=vl_version())
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{css_font_faces()}\n{STYLE.replace('FAMILY', repr(FAMILY))}</style>",
        f'<script type="text/javascript">\n{_script_safe(bundle)}\n</script>',
        "</head>",
        "<body>",
        *body,
        '<script type="text/javascript">',
        f"const EMBED_OPTIONS = {_json(EMBED_OPTIONS)};",
        f"const CHARTS = {_json(specs)};",
        EMBED_SCRIPT,
        "</script>",
        "</body>",
        "</html>",
    ])


def anchor(trace: str, key: str = "") -> str:
    """The HTML id of a trace (``trace-demo``) or of one of its sections (``demo-answer``)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", trace).strip("-") or "trace"
    return f"{slug}-{key}" if key else f"trace-{slug}"


def glance_rows(traces: Sequence[tuple[str, list[Section]]]) -> list[tuple[str, ...]]:
    """The first page: per trace and section with a :class:`Glance`, ``(trace, question,
    answer, caveat)``."""
    return [(trace, s.glance.question, s.glance.answer, s.glance.caveat)
            for trace, sections in traces for s in sections if s.glance is not None]


def html_glance(traces: Sequence[tuple[str, list[Section]]]) -> str:
    """The first page's table, each trace linked to its details."""
    rows = "".join(
        f'<tr><td><a href="#{anchor(trace)}">{html.escape(trace)}</a></td>'
        + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"
        for trace, *cells in glance_rows(traces))
    head = "".join(f"<th>{c}</th>" for c in ("Trace", "Question", "Answer", "Caveat"))
    return (f'<section id="glance"><h2>At a glance</h2><table class="glance"><thead><tr>'
            f"{head}</tr></thead><tbody>{rows}</tbody></table></section>")


def html_contents(traces: Sequence[tuple[str, list[Section]]]) -> str:
    """A table of contents: each trace and its sections."""
    items = "".join(
        f'<li><a href="#{anchor(trace)}">{html.escape(trace)}</a>: '
        + " · ".join(f'<a href="#{anchor(trace, s.key)}">{html.escape(s.title)}</a>'
                     for s in sections) + "</li>"
        for trace, sections in traces)
    return f'<nav class="toc"><h2>Contents</h2><ul>{items}</ul></nav>'


def html_section(section: Section, chart_id: str | None, element_id: str = "",
                 folded: bool = False) -> str:
    """One section: heading, lead, note, bullets, chart placeholder, tables; ``folded``:
    closed under its title until the reader opens it."""
    title = html.escape(section.title)
    parts = [f'<section id="{element_id or section.key}">',
             f'<details><summary class="title">{title}</summary>' if folded
             else f"<h3>{title}</h3>"]
    if section.lead:
        parts.append(f'<p class="lead">{html.escape(section.lead)}</p>')
    if chart_id is not None:
        parts.append(f'<div class="chart" id="{chart_id}"></div>')
    if section.note:
        parts.append(f'<p class="note">{html.escape(section.note)}</p>')
    if section.bullets:
        items = "".join(f"<li>{html.escape(b)}</li>" for b in section.bullets)
        parts.append(f'<ul class="bullets">{items}</ul>')
    if section.table.width:
        parts.append(html_table(section.table))
    for title, shown, _ in section.details:
        parts.append(f"<details><summary>{html.escape(title)}</summary>"
                     f"{html_table(shown)}</details>")
    parts.append("</details></section>" if folded else "</section>")
    return "\n".join(parts)


_NUMERIC = re.compile(r"^[-+$]?[\d,.]+(e[-+]?\d+)?( ?(s|min|h|d|%|pts|\u00d7))?$|^\u2013$")


def _numeric_columns(frame: pl.DataFrame) -> list[bool]:
    """Per column: numbers (or text that reads as a number, e.g. "$1,234", "5.2 min")."""
    out = []
    for name, dtype in zip(frame.columns, frame.dtypes, strict=True):
        if dtype.is_numeric():
            out.append(True)
        elif dtype == pl.String:
            values = [v for v in frame[name].to_list() if v]
            out.append(bool(values) and all(_NUMERIC.match(v) for v in values))
        else:
            out.append(False)
    return out


def html_table(frame: pl.DataFrame) -> str:
    """``frame`` as an HTML table (numbers right-aligned)."""
    numeric = _numeric_columns(frame)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    rows = []
    for row in frame.iter_rows():
        cells = "".join(
            f'<td class="num">{html.escape(format_value(v))}</td>' if num
            else f"<td>{html.escape(format_value(v))}</td>"
            for v, num in zip(row, numeric, strict=True)
        )
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def markdown_table(frame: pl.DataFrame) -> str:
    """``frame`` as a GitHub Markdown table (numbers right-aligned)."""
    if not frame.columns:
        return ""
    numeric = _numeric_columns(frame)
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---:" if num else "---" for num in numeric) + "|"
    rows = [
        "| " + " | ".join(_md_cell(format_value(v)) for v in row) + " |"
        for row in frame.iter_rows()
    ]
    return "\n".join([head, rule, *rows])


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _json(value: Any) -> str:
    """JSON safe to place inside a <script> element."""
    return (json.dumps(value, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _script_safe(javascript: str) -> str:
    """JavaScript that cannot close its <script> element early."""
    return javascript.replace("</script", "<\\/script")
