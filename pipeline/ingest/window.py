"""The observation window an ingested trace states in its manifest, and where it came from.

Adapters know their trace's window: the published span of the full trace (Alibaba 2017: 24 h,
Alibaba 2018: 8 days), or the span of the parts read (Google 2011: its parts are split by
time, so the last event read ends what was read).  A trace written by ``tracereplay
generate`` states its own window in ``generated.json`` beside the raw files, which takes
precedence: a generated day of Alibaba 2018 is one day, not eight.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.errors import TraceError
from pipeline.trace.manifest import Manifest

GENERATED = "generated.json"


def generated_window(src: Path) -> tuple[float, float] | None:
    """The window ``generated.json`` in ``src`` states, or None for a real download."""
    path = Path(src) / GENERATED
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        start, end = float(data["window_start_s"]), float(data["window_end_s"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TraceError(f"unreadable window ({exc})", path) from exc
    if not (0 <= start < end < float("inf")):
        raise TraceError(f"window {start}..{end} is not a span of time", path)
    return start, end


def set_window(manifest: Manifest, src: Path, start_s: float, end_s: float,
               source: str) -> tuple[float, float]:
    """Record the window in ``manifest`` (``generated.json`` wins over the adapter's own);
    return the one recorded."""
    stated = generated_window(src)
    if stated is not None:
        start_s, end_s = stated
        source = f"stated by {GENERATED} (a generated trace)"
    manifest.window_start_s, manifest.window_end_s = float(start_s), float(end_s)
    manifest.window_source = source
    return manifest.window_start_s, manifest.window_end_s
