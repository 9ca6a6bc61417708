"""Progress display: a bar on a terminal, a few plain lines elsewhere."""

from __future__ import annotations

import io

import pytest

from pipeline import progress as p


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_line_at_start_end_and_not_every_update(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()
    with p.Progress(1000, "replay drf", "s simulated", stream=log) as shown:
        for t in range(0, 1001, 10):
            shown.update(t)  # within LOG_EVERY_S: no line
    lines = log.getvalue().splitlines()
    assert lines[0] == "replay drf: started" and lines[-1].startswith("replay drf: done in")
    assert len(lines) == 2
    monkeypatch.setattr(p, "LOG_EVERY_S", 0.0)
    log = io.StringIO()
    with p.Progress(100, "sweep", "runs", stream=log) as shown:
        shown.update(50)
    assert "sweep: 50% (50/100 runs)" in log.getvalue()


def test_a_terminal_gets_a_bar_and_disabled_prints_nothing() -> None:
    term = Terminal()
    with p.Progress(10, "sweep", "runs", stream=term) as shown:
        shown.update(4)
    assert "sweep:" in term.getvalue() and "/10 runs" in term.getvalue()  # a bar, redrawn
    quiet = io.StringIO()
    with p.Progress(10, "sweep", "runs", enabled=False, stream=quiet) as shown:
        shown.update(4)
    assert quiet.getvalue() == ""


def test_a_failure_is_reported_as_stopped() -> None:
    log = io.StringIO()
    with pytest.raises(RuntimeError), p.Progress(10, "ingest", "parts", stream=log):
        raise RuntimeError("disk full")
    assert log.getvalue().splitlines()[-1].startswith("ingest: stopped in")
