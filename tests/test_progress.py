"""Progress display: a bar on a terminal, a few plain lines elsewhere."""

from __future__ import annotations

import io

import pytest

from pipeline import progress as p
from pipeline.humanize import duration


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_line_now_and_then_and_short_work_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()
    with p.Progress(1000, "replay drf", "s simulated", stream=log) as shown:
        for t in range(0, 1001, 10):
            shown.update(t)  # within LOG_EVERY_S: no line
    assert log.getvalue() == ""
    monkeypatch.setattr(p, "LOG_EVERY_S", 0.0)
    monkeypatch.setattr(p.time, "monotonic", lambda: 5.0)  # no time passes
    log = io.StringIO()
    with p.Progress(100, "sweep", "runs", stream=log) as shown:
        shown.update(50)
    lines = log.getvalue().splitlines()
    assert lines[0] == "sweep: 50% (50/100 runs, 0 s taken, about 0 s left)"
    assert lines[1] == "sweep: done in 0.0 s"


def test_a_terminal_gets_a_bar_and_disabled_prints_nothing() -> None:
    term = Terminal()
    with p.Progress(10, "sweep", "runs", stream=term) as shown:
        shown.update(4)
    assert "sweep:" in term.getvalue() and "/10 runs" in term.getvalue()  # a bar, redrawn
    quiet = io.StringIO()
    with p.Progress(10, "sweep", "runs", enabled=False, stream=quiet) as shown:
        shown.update(4)
    assert quiet.getvalue() == ""


def test_a_failure_leaves_the_last_word_to_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(p, "LOG_EVERY_S", 0.0)
    monkeypatch.setattr(p.time, "monotonic", lambda: 5.0)
    log = io.StringIO()
    with pytest.raises(RuntimeError), p.Progress(10, "ingest", "parts", stream=log) as shown:
        shown.update(3)
        raise RuntimeError("disk full")
    assert log.getvalue().splitlines() == ["ingest: 30% (3/10 parts, 0 s taken, about 0 s left)"]


def test_a_log_line_says_how_long_is_left_at_the_pace_so_far(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(p.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(p, "LOG_EVERY_S", 0.0)
    log = io.StringIO()
    shown = p.Progress(1000, "replay quincy", "s simulated", stream=log)
    now[0] += 600
    shown.update(10)  # 10 min for 1%: about 16.5 h left
    now[0] += 6600
    shown.update(0)  # nothing done yet: no estimate
    assert log.getvalue().splitlines() == [
        "replay quincy: 1% (10/1,000 s simulated, 10.0 min taken, about 16.5 h left)",
        "replay quincy: 0% (0/1,000 s simulated, 2.0 h taken)"]


@pytest.mark.parametrize(("seconds", "text"), [(0.0, "0 s"), (0.4, "0.4 s"), (59, "59 s"),
                                               (61, "1.0 min"), (5400, "1.5 h"),
                                               (30 * 3600, "30.0 h"), (9 * 86400, "9.0 d")])
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    """Progress lines and the report's tables say durations the same way."""
    assert duration(seconds) == text
