"""Cluster Autoscaler's command-line flags, as users pass them (v1.31 ``main.go`` names and
defaults), read into :class:`~pipeline.sim.kubernetes.settings.AutoscalerSettings`.

The flags come from a file (one or more per line, ``--name=value`` or ``--name value``, the
way a Deployment's ``command:`` list or a shell script holds them; ``-`` list markers,
quotes and ``#`` comments are allowed) or from the ``autoscaler_flags`` string itself.
Durations are Go's (``10m``, ``1m30s``, ``500ms``).  ``--nodes=MIN:MAX:NAME`` (repeatable)
names a node group: NAME is an instance type of the catalog.  Flags that change nothing in a
replay (logging, cloud credentials, leader election, ...) are accepted and listed in the
run as not modelled; any other flag is a one-line error naming it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.sim.kubernetes.settings import EXPANDERS, AutoscalerSettings, NodeGroup

_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")

DURATIONS = {  # flag -> settings field
    "scan-interval": "scan_interval_s",
    "scale-down-unneeded-time": "unneeded_s",
    "scale-down-delay-after-add": "delay_after_add_s",
    "scale-down-delay-after-delete": "delay_after_delete_s",
    "new-pod-scale-up-delay": "new_pod_delay_s",
}
FLOATS = {"scale-down-utilization-threshold": "threshold",
          "scale-down-gpu-utilization-threshold": "gpu_threshold"}
INTS = {"max-nodes-total": "max_nodes_total",
        "max-scale-down-parallelism": "max_scale_down_parallelism",
        "max-drain-parallelism": "max_drain_parallelism",
        "scale-down-non-empty-candidates-count": "non_empty_candidates"}
BOOLS = {"scale-down-enabled": "scale_down_enabled"}
# accepted, but nothing in a replay depends on them
NOT_MODELLED = frozenset({
    "v", "logtostderr", "alsologtostderr", "stderrthreshold", "log-file", "cloud-provider",
    "cloud-config", "kubeconfig", "namespace", "leader-elect", "leader-elect-resource-name",
    "node-group-auto-discovery", "aws-use-static-instance-list", "balance-similar-node-groups",
    "skip-nodes-with-local-storage", "skip-nodes-with-system-pods", "max-node-provision-time",
    "scale-down-delay-after-failure", "scale-down-unready-time", "max-graceful-termination-sec",
    "expendable-pods-priority-cutoff", "write-status-configmap", "status-config-map-name",
    "address", "profiling", "max-inactivity", "max-failing-time", "estimator",
    "ignore-daemonsets-utilization", "daemonset-eviction-for-empty-nodes",
    "daemonset-eviction-for-occupied-nodes", "cordon-node-before-terminating",
    "scale-down-candidates-pool-ratio", "scale-down-candidates-pool-min-count",
    "max-empty-bulk-delete", "max-bulk-soft-taint-count", "max-bulk-soft-taint-time",
})


def parse_duration(text: str, flag: str) -> float:
    """Seconds in a Go duration string (``0`` alone is allowed, as in Go)."""
    s = text.strip()
    if s in ("0", "-0", "+0"):
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise UsageError(f"--{flag}: {text!r} is not a duration (e.g. 10m, 30s, 1m30s)",
                         field="autoscaler_flags")
    return total


def read_flags(value: str, base_dir: Path | None = None) -> tuple[str, ...]:
    """The flag tokens of ``value``: a file's (when it names one) or the string's own."""
    path = Path(value)
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    if value and not value.lstrip().startswith("-") and path.is_file():
        lines = []
        for line in path.read_text().splitlines():
            line = line.split(" #")[0] if not line.lstrip().startswith("#") else ""
            lines.append(line.strip().removeprefix("- ").strip())
        value = " ".join(lines)
    elif value and not value.lstrip().startswith("-"):
        raise UsageError("no such flags file (or flags that do not start with --)", value,
                         field="autoscaler_flags")
    try:
        tokens = shlex.split(value)
    except ValueError as exc:
        raise UsageError(f"flags cannot be split ({exc})", field="autoscaler_flags") from None
    if tokens and not tokens[0].startswith("-"):
        tokens = tokens[1:]  # the command itself (./cluster-autoscaler)
    return tuple(tokens)


def settings(tokens: tuple[str, ...], groups_default: tuple[NodeGroup, ...]
             ) -> tuple[AutoscalerSettings, tuple[str, ...]]:
    """Settings from flag ``tokens`` (``groups_default`` when no ``--nodes`` is given), and
    the flags accepted but not modelled."""
    got: dict[str, object] = {}
    groups: list[NodeGroup] = []
    ignored: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("-"):
            raise UsageError(f"{tok!r} is not a flag (flags start with --)",
                             field="autoscaler_flags")
        name, eq, val = tok.lstrip("-").partition("=")
        if not eq and name not in BOOLS and i + 1 < len(tokens) \
                and not tokens[i + 1].startswith("--"):
            val, i = tokens[i + 1], i + 1
        elif not eq and name in BOOLS:
            val = "true"
        i += 1
        if name == "nodes":
            groups.append(_node_group(val))
        elif name == "expander":
            got["expanders"] = _expanders(val)
        elif name in DURATIONS:
            got[DURATIONS[name]] = parse_duration(val, name)
        elif name in FLOATS:
            got[FLOATS[name]] = _number(val, name, float, 0.0, 1.0)
        elif name in INTS:
            got[INTS[name]] = _number(val, name, int, 0, None)
        elif name in BOOLS:
            if val.lower() not in ("true", "false", "1", "0"):
                raise UsageError(f"--{name}: expected true or false, got {val!r}",
                                 field="autoscaler_flags")
            got[BOOLS[name]] = val.lower() in ("true", "1")
        elif name in NOT_MODELLED:
            ignored.append(name)
        else:
            raise UsageError(f"--{name} is not a Cluster Autoscaler flag this replay knows "
                             "(docs/families/kubernetes.md lists them)", field="autoscaler_flags")
    if "delay_after_delete_s" not in got:  # defaults to the scan interval
        got["delay_after_delete_s"] = got.get("scan_interval_s", 10.0)
    out = replace(AutoscalerSettings(), groups=tuple(groups) or groups_default, **got)
    if out.scan_interval_s <= 0:
        raise UsageError("--scan-interval must be > 0", field="autoscaler_flags")
    return out, tuple(sorted(set(ignored)))


def _node_group(val: str) -> NodeGroup:
    parts = val.split(":", 2)
    if len(parts) != 3:
        raise UsageError(f"--nodes={val}: expected MIN:MAX:NAME", field="autoscaler_flags")
    lo = _number(parts[0], "nodes", int, 0, None)
    hi = _number(parts[1], "nodes", int, 0, None)
    if lo > hi or hi < 1:
        raise UsageError(f"--nodes={val}: needs MIN <= MAX and MAX >= 1",
                         field="autoscaler_flags")
    return NodeGroup(parts[2], int(lo), int(hi))


def _expanders(val: str) -> tuple[str, ...]:
    names = tuple(v.strip() for v in val.split(",") if v.strip())
    bad = [n for n in names if n not in EXPANDERS]
    if bad or not names:
        raise UsageError(f"--expander: {bad[0] if bad else val!r} is not one of "
                         f"{', '.join(EXPANDERS)}", field="autoscaler_flags")
    return names


def _number(val: str, flag: str, kind: type, lo: float, hi: float | None) -> float:
    try:
        x = kind(val)
    except ValueError:
        raise UsageError(f"--{flag}: {val!r} is not a{'n integer' if kind is int else ' number'}",
                         field="autoscaler_flags") from None
    if x < lo or (hi is not None and x > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise UsageError(f"--{flag}: {val} must be {rng}", field="autoscaler_flags")
    return x
