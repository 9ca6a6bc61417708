"""What every policy class shares: declared parameters, a constructor that only stores them,
and the description ``tracereplay policies`` prints.

A policy class declares ``PARAMS`` (name -> :class:`Param` with default, type, range and a
one-line help; ``file=True`` for a parameter whose value is the path of a file that decides
the run, such as a scheduler configuration), a one-line ``summary`` and the ``source`` it
follows.  ``Policy(**params)`` stores the values and nothing else (scikit-learn's estimator
rule), so ``(name, params)`` rebuilds the same object; per-run state is made in ``setup``.
The interface it implements is documented in :mod:`pipeline.sim.interface`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.settings import Setting, parameter_settings
from pipeline.sim.interface import ClusterInfo, Decisions, SchedView
from pipeline.sim.needs import Needs

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Param:
    """One policy parameter: default, type, allowed range or choices, and a one-line help.

    ``file``: the value is a file path whose contents decide the run (a configuration
    file); run ids and sweep keys then hash the file's contents, not only its path.
    """

    default: Any
    help: str
    kind: type = float
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    file: bool = False

    def coerce(self, policy: str, name: str, value: Any) -> Any:
        """``value`` (a string from the command line, or a typed value) checked and typed."""
        where = f"policy '{policy}' parameter '{name}'"
        if value is None and self.default is None:  # an optional parameter left unset
            return None
        try:
            value = self._typed(value)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: expected {self.kind.__name__}, got {value!r}") from None
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{where}: {value!r} is not one of {', '.join(self.choices)}")
        if self.low is not None and value < self.low:
            raise UsageError(f"{where}: {value!r} is below the minimum {self.low:g}")
        if self.high is not None and value > self.high:
            raise UsageError(f"{where}: {value!r} is above the maximum {self.high:g}")
        return value

    def _typed(self, value: Any) -> Any:
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError(value)
        if self.kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if self.kind is float:
            if isinstance(value, bool):
                raise ValueError(value)
            out = float(value)
            if not np.isfinite(out):
                raise ValueError(value)
            return out
        return self.kind(value)


@dataclass(frozen=True)
class PreemptionProfile:
    """How the shared conformance suite switches a policy's preemption on, and the pacing
    its published rules promise.

    ``params``: parameters that turn preemption on with two equally entitled queues named
    after the trace queues ``a`` and ``b``; ``kill_wait_s``: the least time a container
    runs before it is preempted (schedulers warn, then kill after a fixed wait).
    """

    params: Mapping[str, Any]
    kill_wait_s: float


class PolicyBase:
    """Base class of the registered policies (see :mod:`pipeline.sim.interface`)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    source: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, Param]] = {}
    # the cluster kinds the policy can run on (a reference replay of the trace's own
    # placements needs the trace's machines)
    clusters: ClassVar[tuple[str, ...]] = ("fixed", "elastic")
    # True for a reference that is not a deployable choice (it knows the trace's own
    # decisions): reports show it beside the policies but never recommend it
    reference: ClassVar[bool] = False
    # None: the policy never preempts (the conformance suite then expects no preemption)
    preemption_profile: ClassVar[PreemptionProfile | None] = None

    def __init__(self, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.PARAMS))
        if unknown:
            raise UsageError(f"policy '{self.name}' has no parameter '{unknown[0]}' "
                             f"(parameters: {', '.join(self.PARAMS) or 'none'})")
        for key, param in self.PARAMS.items():
            setattr(self, key, params.get(key, param.default))

    def get_params(self) -> dict[str, Any]:
        """The parameter values this object was built with (defaults filled in)."""
        return {key: getattr(self, key) for key in self.PARAMS}

    def effective_settings(self, given: Collection[str]) -> dict[str, Setting]:
        """Every setting the run uses, with its source (:mod:`pipeline.policies.settings`):
        the parameters (``given`` = the names the user set), overlaid by what the
        policy's configuration files decide (:meth:`file_settings`)."""
        return {**parameter_settings(self.get_params(), given), **self.file_settings()}

    def file_settings(self) -> dict[str, Setting]:
        """Settings read from configuration files, replacing parameters of the same name
        (none by default; the policies that read a file override this)."""
        return {}

    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        """Prepare per-run state and say what the core must provide (:class:`Needs`); the
        default keeps the cluster facts and the generator and needs nothing more."""
        self.cluster_ = cluster
        self.rng_ = rng
        return Needs()

    def decide(self, view: SchedView) -> Decisions:
        raise NotImplementedError

    # -- optional reporting hooks (called after the run; policies without queues keep these)
    def run_metrics(self) -> dict[str, tuple[float | None, str]]:
        """Metrics the policy measured itself, ``name -> (value, unit)``, added to the run's
        metrics table.  They must be deterministic (the same run gives the same values):
        wall-clock figures go to :meth:`run_timings`.  None by default."""
        return {}

    def run_timings(self) -> dict[str, float | None]:
        """Wall-clock figures the policy measured (e.g. solver milliseconds), written to
        ``provenance.json`` beside ``wall_s``, not to the deterministic metrics.  None by
        default."""
        return {}

    def assigned_queues(self, user: np.ndarray,
                        queue: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]] | None:
        """Leaf queue code of each (user code, trace queue code) pair and the leaf names.

        ``None`` (the default) means the policy has no queues of its own, so
        ``task_runs.queue`` shows the trace's queue.  Codes index ``cluster.users`` and
        ``cluster.queues`` as given to ``setup``; a returned code of -1 means null.
        """
        return None

    def queue_rows(self, total: np.ndarray) -> dict[str, list[Any]] | None:
        """Rows of ``queues.parquet`` (see :mod:`pipeline.policies.queues.report`) for a
        cluster of ``total`` (cpu, mem, gpu), or ``None`` when the policy has no queues."""
        return None


def file_params(cls: type[PolicyBase]) -> list[str]:
    """Names of ``cls``'s parameters whose value is a file path (``Param(file=True)``)."""
    return [key for key, param in cls.PARAMS.items() if param.file]


def resolve_params(cls: type[PolicyBase], raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check and type ``raw`` against ``cls.PARAMS``; return every parameter with defaults."""
    raw = dict(raw or {})
    unknown = sorted(set(raw) - set(cls.PARAMS))
    if unknown:
        known = ", ".join(cls.PARAMS) or "none"
        raise UsageError(f"policy '{cls.name}' has no parameter '{unknown[0]}' (parameters: "
                         f"{known})")
    return {
        key: param.coerce(cls.name, key, raw[key]) if key in raw else param.default
        for key, param in cls.PARAMS.items()
    }
