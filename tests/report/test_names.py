"""Setting names and panels a reader can tell apart: short labels, distinct colours, at most
six lines per panel."""

from __future__ import annotations

import itertools

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from pipeline.report import answer_charts, palette
from pipeline.report.names import distinguishing_keys, short_labels

OPP = ("yarn-uniform opp_by=priority, opp_overalloc_cpu={cpu}, opp_overalloc_mem={mem}, "
       "opp_pause={pause}, opp_preempt_cpu={pre}, opp_preempt_mem={pre}")
DEMO = [OPP.format(cpu=c, mem=m, pause=p, pre=r) for c, m, p, r in (
    ("0.0", "0.0", "false", "1.0"), ("0.6", "0.6", "false", "0.9"),
    ("0.8", "0.6", "false", "0.9"), ("0.8", "0.6", "true", "0.9"))]


def test_long_labels_keep_only_the_parameters_that_tell_settings_apart() -> None:
    labels = ["yarn-uniform", "yarn-uniform [elastic]", "drf",
              *DEMO, *(f"{label} [elastic]" for label in DEMO)]
    names = short_labels(labels)
    assert names["yarn-uniform"] == "yarn-uniform" and names["drf"] == "drf"
    assert names[DEMO[0]] == "yarn-uniform opp_overalloc_cpu=0.0, opp_pause=false"
    assert names[DEMO[3]] == "yarn-uniform opp_overalloc_cpu=0.8, opp_pause=true"
    assert names[f"{DEMO[3]} [elastic]"] == (
        "yarn-uniform opp_overalloc_cpu=0.8, opp_pause=true [elastic]")
    assert len(set(names.values())) == len(labels)
    assert all(len(name) <= 62 for name in names.values())


def test_short_labels_are_left_alone() -> None:
    labels = ["delay-scheduling skip_count=3", "delay-scheduling skip_count=10 #1a2b3c",
              "quincy variant=QFP [elastic]", "recorded"]
    assert short_labels(labels) == {label: label for label in labels}


def test_a_configuration_hash_survives_shortening() -> None:
    label = DEMO[1] + " #abc123"
    assert short_labels([label, DEMO[2]])[label].endswith(
        "opp_overalloc_cpu=0.6 #abc123")


@given(st.lists(st.dictionaries(st.sampled_from("abcdef"), st.sampled_from(["0", "1", "2"]),
                                max_size=6), min_size=1, max_size=12))
def test_chosen_keys_tell_every_distinct_setting_apart(settings: list[dict[str, str]]) -> None:
    keys = distinguishing_keys(settings)
    full = {tuple(sorted(p.items())) for p in settings}
    assert len({tuple(p.get(k) for k in keys) for p in settings}) == len(full)
    labels = [("p " + ", ".join(f"{k}_long_parameter_name={v}" for k, v in sorted(p.items())))
              .rstrip() for p in settings]
    names = short_labels(labels)
    assert len(set(names.values())) == len(set(labels))


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour, as the palette's docstring measures it."""
    def linear(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = (linear(int(hex_colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x = (r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047
    y = r * 0.2126 + g * 0.7152 + b * 0.0722
    z = (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_no_two_setting_colours_look_alike() -> None:
    def distance(a: str, b: str) -> float:
        return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b), strict=True)) ** 0.5

    assert len(set(palette.HUES)) == 20
    closest = min(distance(a, b) for a, b in itertools.combinations(palette.HUES, 2))
    assert closest >= 30
    assert min(distance(h, g) for h in palette.HUES for g in palette.GREYS) >= 20


def test_panels_hold_at_most_five_settings_and_keep_a_policy_together() -> None:
    settings = ["yarn-uniform", *(f"delay-scheduling skip_count={k}" for k in (0, 1, 3, 10, 30)),
                "capacity-scheduler node_locality_delay=-1", "capacity-scheduler "
                "node_locality_delay=40", "fair-scheduler x=1", "fair-scheduler x=2",
                *(f"quincy variant={v}" for v in ("Q", "QF", "QFP"))]
    groups = palette.panels(settings, "yarn-uniform")
    assert "yarn-uniform" not in groups and len(groups) == len(settings) - 1
    sizes = {title: list(groups.values()).count(title) for title in groups.values()}
    assert max(sizes.values()) <= palette.PANEL_SIZE
    assert sizes == {"capacity-scheduler, fair-scheduler": 4, "delay-scheduling": 5,
                     "quincy": 3}
    few = palette.panels(["a", "b x=1", "b x=2"], "a")
    assert set(few.values()) == {"all settings"}


def test_distribution_panels_draw_at_most_six_lines() -> None:
    runs = pl.DataFrame({"run_id": [f"r{i}" for i in range(13)],
                         "label": ["yarn-uniform", *(f"quincy variant={i}" for i in range(7)),
                                   *(f"drf [elastic] x={i}" for i in range(5))],
                         "cluster_mode": ["fixed"] * 8 + ["elastic"] * 5})
    runs = runs.with_columns(pl.when(pl.col("cluster_mode") == "elastic")
                             .then(pl.format("drf x={} [elastic]", pl.int_range(pl.len())))
                             .otherwise(pl.col("label")).alias("label"))
    curves = pl.DataFrame({"run_id": runs["run_id"], "measure": "job completion",
                           "fraction": 1.0, "value_s": 10.0})
    spec = answer_charts.distribution_chart(curves, runs, runs["label"].to_list(),
                                            "yarn-uniform").to_dict()
    rows = next(iter(spec["datasets"].values()))
    per_panel: dict[str, set[str]] = {}
    for row in rows:
        per_panel.setdefault(row["panel"], set()).add(row["setting"])
    assert all(len(s) <= 6 for s in per_panel.values())
    assert all("yarn-uniform" in s for p, s in per_panel.items() if p.startswith("fixed"))
    assert sum(len(s - {"yarn-uniform"}) for s in per_panel.values()) == 12


def test_a_chart_past_altairs_row_guard_is_drawn() -> None:
    """Altair refuses charts of more than 5,000 rows unless told; the report's charts are
    bounded by construction and a 13-setting CDF with the status quo in every panel passed
    that guard (the default sweep's report failed on 5,400 rows)."""
    import altair as alt

    from pipeline.report.render import chart_spec

    chart = alt.Chart(pl.DataFrame({"x": range(6_000)})).mark_point().encode(x="x:Q")
    assert len(next(iter(chart_spec(chart)["datasets"].values()))) == 6_000
