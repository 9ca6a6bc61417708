"""Short setting names for charts and tables: only the parameters that tell settings apart.

A run's warehouse label (``policy_summary.label``) names every parameter whose value differs
between the trace's runs of its policy; for a layer such as opportunistic containers that is
often seven parameters and 130 characters, which legends and axes cut (``opp_pause…``), so
two settings could not be told apart.  Here, per policy, when any of its labels is longer
than :data:`LIMIT`, the report names its settings by the fewest parameters that still tell
them apart (chosen greedily: first the parameter that splits the settings into the most
groups, then the next, in the label's order on ties).  ``yarn-uniform opp_by=priority,
opp_overalloc_cpu=0.8, opp_overalloc_mem=0.6, opp_pause=true, …`` becomes ``yarn-uniform
opp_overalloc_cpu=0.8, opp_pause=true``.  The cluster suffix (``[elastic]``) and the
configuration hash (``#1a2b3c``) stay; the report's settings table lists every parameter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

LIMIT = 48  # characters a legend shows whole at the report's label width
_LABEL = re.compile(r"^(?P<policy>\S+)(?: (?P<params>.*?))?(?P<suffix>(?: \[[^\]]+\])?"
                    r"(?: #[0-9a-f]+)?)$")


def short_labels(labels: Iterable[str], limit: int = LIMIT) -> dict[str, str]:
    """Each label of one trace -> its name in the report (itself when short enough)."""
    parsed = {label: _parse(label) for label in set(labels)}
    by_policy: dict[str, dict[str, dict[str, str]]] = {}
    longest: dict[str, int] = {}
    for label, parts in parsed.items():
        if parts is not None:
            by_policy.setdefault(parts[0], {})[parts[1]] = parts[2]
            longest[parts[0]] = max(longest.get(parts[0], 0), len(label))
    renamed: dict[str, str] = {}
    for policy, settings in by_policy.items():
        if longest[policy] <= limit:
            continue
        keys = distinguishing_keys(list(settings.values()))
        for text, params in settings.items():
            shown = ", ".join(f"{k}={params[k]}" for k in keys if k in params)
            renamed[text] = f"{policy} {shown}" if shown else policy
    return {label: label if parts is None or parts[1] not in renamed
            else renamed[parts[1]] + parts[3] for label, parts in parsed.items()}


def distinguishing_keys(settings: list[dict[str, str]]) -> list[str]:
    """The fewest keys (greedy) whose values, absent counted as a value, still tell every
    distinct setting of ``settings`` apart; in the order of their first appearance."""
    order = list(dict.fromkeys(k for params in settings for k in params))
    wanted = len({tuple(sorted(p.items())) for p in settings})
    chosen: list[str] = []
    while _groups(settings, chosen) < wanted:
        best = max((k for k in order if k not in chosen),
                   key=lambda k: (_groups(settings, [*chosen, k]), -order.index(k)))
        chosen.append(best)
    return [k for k in order if k in chosen]


def _groups(settings: list[dict[str, str]], keys: list[str]) -> int:
    return len({tuple(p.get(k) for k in keys) for p in settings})


def _parse(label: str) -> tuple[str, str, dict[str, str], str] | None:
    """``(policy, setting text, parameters, suffix)`` of a label; None when its parameters
    do not read as ``k=v, k=v`` (the label is then shown as it is)."""
    match = _LABEL.match(label)
    if match is None:
        return None
    policy, text, suffix = match["policy"], match["params"] or "", match["suffix"]
    params: dict[str, str] = {}
    for piece in text.split(", ") if text else []:
        key, sep, value = piece.partition("=")
        if not sep or not key or " " in key:
            return None
        params[key] = value
    return policy, f"{policy} {text}".rstrip(), params, suffix
