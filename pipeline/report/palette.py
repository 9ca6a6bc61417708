"""One colour per setting, the same in every chart of a report.

A *setting* is a run's label without its cluster (``container-packing
high_memory_threshold=0.8``), so a setting has the same colour on the fixed and the elastic
cluster and charts split clusters by panel, not by colour.  Colours come from one list of
distinguishable hues (Tableau 10, then its light variants), assigned in sorted order (numbers
compared as numbers: ``skip_count=5`` before ``skip_count=20``), so no two settings of a
report share a colour up to 20 settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import altair as alt
import polars as pl

HUES = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
        "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#aec7e8", "#ffbb78", "#98df8a",
        "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5"]
LEGEND = alt.Legend(labelLimit=420, title="setting")
_CLUSTER = re.compile(r" \[[^\]]+\]$")


def setting(label: str) -> str:
    """The setting of a run label: the label without its ``[cluster]`` suffix."""
    return _CLUSTER.sub("", label)


def with_setting(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``setting`` column derived from its ``label``."""
    return frame.with_columns(pl.col("label").str.replace(r" \[[^\]]+\]$", "").alias("setting"))


def natural_key(text: str) -> list[Any]:
    """``text`` as a sort key with its numbers as numbers (``skip_count=5`` before ``=20``)."""
    parts = re.split(r"(\d+(?:\.\d+)?)", text)
    return [(0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts)]


def by_label(frame: pl.DataFrame, *then: str | pl.Expr, column: str = "label",
             first: list[pl.Expr] | None = None) -> pl.DataFrame:
    """``frame`` sorted by ``first``, then ``column`` in :func:`natural_key` order, then
    ``then`` (tables list ``skip_count=3`` before ``=10``, as the charts do)."""
    if frame.is_empty() or column not in frame.columns:
        return frame
    names = sorted(set(frame[column].drop_nulls().to_list()), key=natural_key)
    rank = pl.col(column).replace_strict({n: i for i, n in enumerate(names)}, default=-1,
                                          return_dtype=pl.Int64)
    return frame.sort([*(first or []), rank, *then])


def settings_in_order(labels: Iterable[str]) -> list[str]:
    """The distinct settings of ``labels``, in the report's order (:func:`natural_key`)."""
    return sorted({setting(label) for label in labels}, key=natural_key)


def scale(labels: Iterable[str]) -> alt.Scale:
    """The colour scale of a report: every setting of ``labels`` with its own hue."""
    names = settings_in_order(labels)
    hues = [HUES[i % len(HUES)] for i in range(len(names))]
    return alt.Scale(domain=names, range=hues)


def color(labels: Iterable[str], legend: alt.Legend | None = LEGEND,
          shown: Iterable[str] | None = None) -> alt.Color:
    """The ``setting`` colour encoding with the report's scale; ``shown``: the labels the
    chart draws, so its legend lists only those settings."""
    if legend is not None and shown is not None:
        legend = alt.Legend(labelLimit=420, title="setting",
                            values=settings_in_order(shown))
    return alt.Color("setting:N", scale=scale(labels), legend=legend)
