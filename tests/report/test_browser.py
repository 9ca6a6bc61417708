"""The report renders in a real browser with no network: every chart draws an SVG.

Needs Chromium at /usr/bin/chromium (CI installs it); skipped otherwise.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.report.conftest import (
    LOCALITY_SECTIONS_WITH_CHARTS,
    QUEUE_SECTIONS_WITH_CHARTS,
    SECTIONS_WITH_CHARTS,
)

CHROMIUM = Path("/usr/bin/chromium")


def chromium() -> str:
    if CHROMIUM.exists():
        return str(CHROMIUM)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("Chromium is not installed (/usr/bin/chromium); `apt-get install chromium`")
    return found


def rendered_dom(browser: str, page: Path, profile: Path) -> str:
    """The page's DOM after its scripts ran, loaded from file:// with networking cut off."""
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={profile}",
         # anything that tried the network would fail: no proxy answers, no name resolves
         "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--virtual-time-budget=15000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=90, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize(("fixture", "sections"), [
    ("built_report", SECTIONS_WITH_CHARTS),
    ("queue_report", QUEUE_SECTIONS_WITH_CHARTS),  # the schedulers compared, queue shares
    ("locality_report", LOCALITY_SECTIONS_WITH_CHARTS),  # the locality trade-off, job sizes
])
def test_every_chart_renders_offline(fixture: str, sections: tuple[str, ...],
                                     request: pytest.FixtureRequest, tmp_path: Path) -> None:
    browser = chromium()
    built: tuple[Path, dict[str, Any]] = request.getfixturevalue(fixture)
    dom = rendered_dom(browser, built[0] / "report.html", tmp_path / "profile")
    assert 'class="chart-error"' not in dom
    pieces = re.split(r'(<div class="[^"]*\bchart\b[^"]*" id="chart-\d+")', dom)
    charts = [pieces[i] + pieces[i + 1].split("</section>")[0]
              for i in range(1, len(pieces), 2)]
    assert len(charts) == len(sections)
    for chart in charts:
        assert "<svg" in chart and 'class="marks"' in chart, chart[:300]
