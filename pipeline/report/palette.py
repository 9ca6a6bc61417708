"""One colour per setting, the same in every chart of a report.

A *setting* is a run's label without its cluster (``container-packing
high_memory_threshold=0.8``), so a setting has the same colour on the fixed and the elastic
cluster and charts split clusters by panel, not by colour.  Colours come from one list of
distinguishable hues, assigned in sorted order (numbers compared as numbers: ``skip_count=5``
before ``skip_count=20``), so no two settings of a report share a colour up to 20 settings.
The hues are Tableau 10 without its grey (grey stands for "several settings"), then eleven
picked greedily for the largest smallest colour difference (CIE76 in Lab) to all before them
and to greys: no two of the twenty are closer than 30 (a light and a dark blue were 10.5).

Charts that draw one line per setting draw at most :data:`PANEL_SIZE` settings and the
status quo per panel (:func:`panels`), in small multiples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import altair as alt
import polars as pl

HUES = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
        "#ff9da7", "#9c755f", "#0000ff", "#ff22dd", "#442299", "#00dd00", "#ff0000",
        "#cc88ff", "#bb1177", "#334400", "#0088ff", "#99cc22", "#aa44ff"]
GREYS = ["#777777", "#bbbbbb", "#444444", "#999999"]  # lines standing for several settings
PANEL_SIZE = 5  # settings per small multiple besides the status quo: at most six lines
LEGEND = alt.Legend(labelLimit=420, title="setting")
CLUSTER_SUFFIX = r" \[([^\]]+)\]$"  # a run label's ``[cluster]`` suffix
_CLUSTER = re.compile(CLUSTER_SUFFIX)


def setting(label: str) -> str:
    """The setting of a run label: the label without its ``[cluster]`` suffix."""
    return _CLUSTER.sub("", label)


def with_setting(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``setting`` column derived from its ``label``."""
    return frame.with_columns(pl.col("label").str.replace(CLUSTER_SUFFIX, "").alias("setting"))


def label_cluster() -> pl.Expr:
    """The cluster a run label names in its ``[cluster]`` suffix (null: none)."""
    return pl.col("label").str.extract(CLUSTER_SUFFIX, 1)


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


def panels(settings: Iterable[str], baseline: str, size: int = PANEL_SIZE) -> dict[str, str]:
    """Each setting's panel for charts of one line per setting: the settings in the report's
    order packed first-fit into panels of at most ``size``, a policy's settings kept
    together where they fit, each panel named by its policies; the status quo (``baseline``,
    the policy with no parameters) goes in every panel as the line the others are read
    against, so it is not a key here.  All in one panel ("all settings") when they fit."""
    names = [s for s in sorted(set(settings), key=natural_key) if s != baseline]
    if len(names) <= size:
        return {name: "all settings" for name in names}
    by_policy: dict[str, list[str]] = {}
    for name in names:
        by_policy.setdefault(name.split(" ")[0], []).append(name)
    groups: list[list[str]] = []
    for members in by_policy.values():
        for start in range(0, len(members), size):
            chunk = members[start:start + size]
            room = next((g for g in groups if len(g) + len(chunk) <= size), None)
            if room is None:
                groups.append(list(chunk))
            else:
                room += chunk
    titles = [_panel_name(group) for group in groups]
    titles = [t if titles.count(t) == 1 else f"{t} ({titles[:i].count(t) + 1})"
              for i, t in enumerate(titles)]
    return {name: title for group, title in zip(groups, titles, strict=True) for name in group}


def _panel_name(group: list[str]) -> str:
    """A panel's name: its policies in order (``capacity-scheduler, fair-scheduler``)."""
    policies = list(dict.fromkeys(name.split(" ")[0] for name in group))
    return ", ".join(policies)


def in_panels(curves: pl.DataFrame, baseline: str) -> tuple[pl.DataFrame, list[str]]:
    """``curves`` with a ``panel`` column (cluster and group of settings), the status quo's
    rows copied into every panel of its cluster, and the panels in the report's order."""
    clusters = sorted(set(curves["cluster"].to_list()), key=lambda c: (c != "fixed", c))
    order, parts = [], []
    for cluster in clusters:
        mine = curves.filter(pl.col("cluster") == cluster)
        shown = {s for s in mine["setting"].to_list() if s != baseline}
        groups = panels(shown, baseline)
        titles = list(dict.fromkeys(groups[s] for s in sorted(shown, key=natural_key)))
        for title in titles or ["all settings"]:
            panel = f"{cluster} cluster: {title}"
            order.append(panel)
            members = [s for s in shown if groups[s] == title] + [baseline]
            parts.append(mine.filter(pl.col("setting").is_in(members))
                         .with_columns(pl.lit(panel).alias("panel")))
    frame = (pl.concat(parts) if parts else curves.with_columns(pl.lit("").alias("panel")))
    return frame.with_columns(pl.when(pl.col("setting") == baseline).then(pl.lit("status quo"))
                              .otherwise(pl.lit("setting")).alias("status_quo")), order


# the status quo dashed, every other setting solid (``in_panels``' ``status_quo`` column)
STATUS_QUO_DASH = alt.StrokeDash("status_quo:N", title=None, legend=None,
                                 scale=alt.Scale(domain=["status quo", "setting"],
                                                 range=[[5, 3], [1, 0]]))


def panel_row(order: list[str]) -> alt.Row:
    """The row facet of :func:`in_panels`' panels, in their order, titled above each."""
    return alt.Row("panel:N", title=None, sort=order,
                   header=alt.Header(labelAngle=0, labelAlign="left", labelOrient="top",
                                     labelFontWeight="bold"))
