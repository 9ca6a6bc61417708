"""Progress display: a bar on a terminal, a few plain lines elsewhere."""

from __future__ import annotations

import io

import pytest

from pipeline import progress as p


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
    log = io.StringIO()
    with p.Progress(100, "sweep", "runs", stream=log) as shown:
        shown.update(50)
    lines = log.getvalue().splitlines()
    assert lines[0] == "sweep: 50% (50/100 runs)" and lines[1].startswith("sweep: done in")


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
    log = io.StringIO()
    with pytest.raises(RuntimeError), p.Progress(10, "ingest", "parts", stream=log) as shown:
        shown.update(3)
        raise RuntimeError("disk full")
    assert log.getvalue().splitlines() == ["ingest: 30% (3/10 parts)"]
