"""What a report section is: a title, at most one chart, a lead, tables (one module, so
every family's section builder can make one without importing the others)."""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import polars as pl


@dataclass(frozen=True)
class Glance:
    """A section's answer on the report's first page: the question it answers, the answer
    in one or two sentences a cluster owner acts on, and the caveat that goes with it."""

    question: str
    answer: str
    caveat: str


@dataclass(frozen=True)
class Section:
    """One part of a trace's report; ``key`` names its chart and CSV files.

    ``lead``: a sentence shown first and large; ``bullets``: statements; ``table``: the main
    table (readable); ``raw``: the same rows unrounded, for the CSV; ``details``: folded
    tables ``(title, readable frame, raw frame)``; ``glance``: its line on the report's
    first page (the sections that answer a question a payer asks have one).
    """

    key: str
    title: str
    chart: alt.TopLevelMixin | None = None
    table: pl.DataFrame = field(default_factory=pl.DataFrame)
    note: str = ""
    lead: str = ""
    bullets: tuple[str, ...] = ()
    raw: pl.DataFrame | None = None
    details: tuple[tuple[str, pl.DataFrame, pl.DataFrame], ...] = ()
    glance: Glance | None = None
