"""Chart bytes do not depend on the machine's fonts: every chart names the project's own
family, the renderer gets it from the package's files, and it covers what the report draws."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from io import BytesIO
from pathlib import Path
from typing import Any

from fontTools.ttLib import TTFont

from pipeline.report import fonts
from pipeline.report.fonts import FAMILY, font_files

RENDER = """
import sys
import altair as alt
import polars as pl
from pipeline.report.render import chart_png

frame = pl.DataFrame({"x": [1.0, 2.0, 3.0], "y": [0.1, -0.2, 0.3],
                      "label": ["a \\u00d7 b \\u2192 c", "\\u2264 5 \\u2013 6 \\u2014 7", "12%"]})
chart = alt.Chart(frame).mark_text(fontSize=13).encode(x="x:Q", y="y:Q", text="label:N")
chart = chart.properties(title="Utilization \\u00d7 2 \\u2212 1", width=300, height=160)
open(sys.argv[1], "wb").write(chart_png(chart.to_dict()))
"""
FONTS_CONF = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>{fonts}</dir></fontconfig>
"""


def _render(out: Path, home: Path, fontconfig: Path | None = None) -> bytes:
    root = Path(__file__).resolve().parents[2]
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)}
    if fontconfig is not None:
        env["FONTCONFIG_FILE"] = str(fontconfig)
    subprocess.run([sys.executable, "-c", RENDER, str(out)], check=True, env=env, cwd=root)
    return out.read_bytes()


def test_chart_bytes_do_not_depend_on_the_machines_fonts(tmp_path: Path) -> None:
    """The same chart rendered on this machine's fonts, and on a machine with none (a
    fontconfig that names an empty folder), gives the same PNG.  Before, charts were drawn
    in the machine's ``sans-serif`` (installing a browser's Liberation Sans changed every
    chart), and these two renders differed on any machine with a font."""
    home = tmp_path / "home"
    (tmp_path / "no-fonts").mkdir()
    home.mkdir()
    conf = tmp_path / "fonts.conf"
    conf.write_text(FONTS_CONF.format(fonts=tmp_path / "no-fonts"))
    assert _render(tmp_path / "a.png", home) == _render(tmp_path / "b.png", home, conf)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_font_covers_every_character_the_report_draws(
        built_report: tuple[Path, dict]) -> None:
    """A character the family lacks would be drawn in some machine font instead: every
    character of every chart spec of a report (titles, labels, data) is in its cmap."""
    page = (built_report[0] / "report.html").read_text()
    specs = json.loads(re.search(r"const CHARTS = (.*);\n", page).group(1))  # type: ignore[union-attr]
    text = "".join(s for _, spec in specs for s in _strings(spec))
    cmap = TTFont(BytesIO(font_files()["Regular"])).getBestCmap()
    missing = sorted({c for c in text if ord(c) >= 32 and ord(c) not in cmap})
    assert not missing, f"characters outside {FAMILY}: {missing}"
    assert all(spec["config"]["font"] == FAMILY for _, spec in specs)
    assert f"font-family: '{FAMILY}'" in page  # the page embeds the faces it draws in


def test_the_renamed_faces_are_the_same_bytes_every_time() -> None:
    fonts.font_files.cache_clear()
    first = fonts.font_files()
    fonts.font_files.cache_clear()
    assert fonts.font_files() == first
