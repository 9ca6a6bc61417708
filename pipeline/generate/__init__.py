"""The generate stage: synthetic traces in the raw published layout of a public format.

``GENERATORS`` maps a format name to its generator; :func:`generate` checks the arguments and
writes atomically (a temporary directory beside ``out``, renamed when complete).  Output is a
pure function of the arguments: the same arguments give byte-identical files.

Beside the raw files, ``generated.json`` states what was generated and the observation
window (0 to ``hours``): the raw layouts have no place for it, and without it an adapter
would take the published trace's window (8 days for Alibaba 2018) or the last event's time.
Adapters read it (:mod:`pipeline.ingest.window`); real downloads have none.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.generate.alibaba2018 import generate_alibaba2018
from pipeline.generate.burst import Burst
from pipeline.generate.google2011 import generate_google2011
from pipeline.generate.google2019 import generate_google2019
from pipeline.generate.openb import generate_openb
from pipeline.generate.swf import generate_swf
from pipeline.generate.swim import generate_swim
from pipeline.ingest.window import GENERATED
from pipeline.trace.io import atomic_dir

GENERATORS: dict[str, Callable[..., dict]] = {
    "google2011": generate_google2011,
    "google2019": generate_google2019,
    "alibaba2018": generate_alibaba2018,
    "swim": generate_swim,
    "alibaba-gpu2023": generate_openb,
    "swf": generate_swf,
}


def generate(out: Path, fmt: str, machines: int = 200, hours: float = 24.0, seed: int = 0,
             **options: object) -> dict:
    """Write a synthetic ``fmt`` trace of ``machines`` machines over ``hours`` into ``out``.

    ``options`` go to the format's generator (``load`` for both, ``usage`` for google2011).
    Returns a summary: rows per table, files written, offered load.
    """
    if fmt not in GENERATORS:
        known = ", ".join(sorted(GENERATORS))
        raise UsageError(f"unknown format '{fmt}' (known: {known})", field="--format")
    if int(machines) != machines or machines < 1:
        raise UsageError(f"must be a whole number >= 1, got {machines}", field="--machines")
    if not math.isfinite(hours) or hours <= 0:
        raise UsageError(f"must be a number > 0, got {hours}", field="--hours")
    load = options.get("load", 0.65)
    if not isinstance(load, int | float) or not 0 < load <= 10:
        raise UsageError(f"must be a number in (0, 10], got {load!r}", field="load")
    _check_burst(options, hours)
    accepted = set(inspect.signature(GENERATORS[fmt]).parameters) - {"out", "machines",
                                                                      "hours", "seed"}
    unknown = sorted(set(options) - accepted)
    if "usage" in unknown:
        supported = ", ".join(f for f, g in sorted(GENERATORS.items())
                              if "usage" in inspect.signature(g).parameters)
        raise UsageError(f"{fmt} has no usage series to generate (--usage works with: "
                         f"{supported})", field="--usage")
    if unknown:
        raise UsageError(f"{fmt} takes no option {', '.join(unknown)} "
                         f"(options: {', '.join(sorted(accepted))})")
    with atomic_dir(Path(out)) as tmp:
        summary = GENERATORS[fmt](tmp, machines=int(machines), hours=float(hours),
                                  seed=int(seed), **options)
        stated = {"generator": "tracereplay generate", "format": fmt,
                  "machines": int(machines), "hours": float(hours), "seed": int(seed),
                  "options": dict(sorted(options.items())),
                  "window_start_s": 0.0, "window_end_s": float(hours) * 3600.0}
        (tmp / GENERATED).write_text(json.dumps(stated, indent=1, sort_keys=True) + "\n")
    return {"out": str(out), "seed": int(seed), **summary}


def _check_burst(options: dict[str, object], hours: float) -> None:
    """A one-line error for a burst that cannot be (negative, empty, after the window)."""
    keys = ("burst_load", "burst_start_h", "burst_hours", "burst_user")
    if not any(k in options for k in keys):
        return
    given = {k.removeprefix("burst_"): options[k] for k in keys if k in options}
    try:
        burst = Burst(**given)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc), field="--burst-*") from None
    if burst.load > 0 and burst.start_h >= hours:
        raise UsageError(f"the burst starts at {burst.start_h:g} h, after the {hours:g} h "
                         "window", field="--burst-start-h")
