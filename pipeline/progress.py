"""Progress of long work, shown the way the output is read.

On a terminal: a tqdm bar, redrawn in place.  Elsewhere (a log file, CI, ``dvc repro``
piped somewhere): a plain line every ``LOG_EVERY_S`` seconds, with the time taken and the
time left at the pace so far (as the bar shows it), and one at the end of work that took
that long, so a long stage is visibly alive without filling the log with bar redraws
(and a short one, or one that fails, prints nothing but its result or its one-line error).
Progress goes to stderr; stdout stays for the verbs' JSON results.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

from pipeline.humanize import duration

LOG_EVERY_S = 30.0


class Progress:
    """Position ``done`` of ``total`` (in ``unit``s), described by ``desc``."""

    def __init__(self, total: float, desc: str, unit: str = "", enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.total, self.desc, self.unit = float(total), desc, unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0.0
        self._bar: tqdm | None = None
        self._started = self._logged = time.monotonic()
        self._lines = 0
        if enabled and self.stream.isatty():
            self._bar = tqdm(total=self.total, desc=desc, unit=unit, file=self.stream,
                             dynamic_ncols=True, leave=False,
                             bar_format="{l_bar}{bar}| {n:,.0f}/{total:,.0f} {unit} "
                                        "[{elapsed}<{remaining}]")

    def update(self, done: float) -> None:
        """Move to position ``done`` (absolute)."""
        self.done = float(done)
        if self._bar is not None:
            self._bar.update(max(0.0, min(self.done, self.total) - self._bar.n))
        elif self.enabled and time.monotonic() - self._logged >= LOG_EVERY_S:
            self._line(f"{self._share()} ({self.done:,.0f}/{self.total:,.0f} {self.unit}"
                       f"{self._pace()})")

    def close(self, failed: bool = False) -> None:
        """Finish the display (a last line when not on a terminal, if it wrote any)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self._lines and not failed:
            self._line(f"done in {time.monotonic() - self._started:,.1f} s")
        self.enabled = False

    def _share(self) -> str:
        return f"{100 * min(self.done / self.total, 1.0):.0f}%" if self.total > 0 else "?"

    def _pace(self) -> str:
        """``, 2 min taken, about 31 min left`` (the left part once something is done): a
        long run's log says when to come back, and a hopeless one says so early."""
        taken = time.monotonic() - self._started
        text = f", {duration(taken)} taken"
        if 0 < self.done < self.total:
            text += f", about {duration(taken * (self.total - self.done) / self.done)} left"
        return text

    def _line(self, what: str) -> None:
        self._logged = time.monotonic()
        self._lines += 1
        print(f"{self.desc}: {what}", file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(failed=exc[0] is not None)

