"""Numbers and durations as people read them, shared by the report's tables and sentences and
by the progress lines of long stages (no dependencies, so any stage can import it cheaply)."""

from __future__ import annotations


def number(value: object, digits: int = 3) -> str:
    """A number to ``digits`` significant digits, thousands with separators: 0.25, 4,637."""
    v = float(value)  # type: ignore[arg-type]
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}" if abs(v) >= 0.001 else f"{v:.1e}"


def duration(value: object) -> str:
    """Seconds in the unit that reads best: 0.94 s, 5.2 min, 3.1 h, 2.5 d."""
    s = float(value)  # type: ignore[arg-type]
    if abs(s) < 60:
        return f"{number(s, 2)} s"
    if abs(s) < 3600:
        return f"{s / 60:.1f} min"
    if abs(s) < 2 * 86_400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86_400:.1f} d"
