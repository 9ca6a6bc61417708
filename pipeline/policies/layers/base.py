"""What a layer over any policy shares: a layer is itself a policy (``setup`` returns the
:class:`~pipeline.sim.needs.Needs` of the policy it wraps plus its own, ``decide`` calls
the wrapped policy's), so layers stack (:mod:`.stack`).  It passes through to the wrapped
policy its parameters and settings (with the layer's own), run metrics and timings, and
its queues."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.base import Param
from pipeline.policies.settings import Setting, parameter_settings
from pipeline.sim.interface import ClusterInfo, Decisions, Policy, SchedView
from pipeline.sim.needs import Needs


class Layered:
    """A policy ``inner`` (a base policy or another layer) with a layer whose resolved
    parameters are ``layer_params``.  Subclasses implement :meth:`own_needs` (what the
    layer adds to ``inner``'s needs) and :meth:`decide`."""

    def __init__(self, inner: Policy, layer_params: dict[str, Any]) -> None:
        self.inner: Any = inner
        self.layer_params = dict(layer_params)
        self.name = inner.name
        self.inner_needs_ = Needs()

    # -- the policy interface -----------------------------------------------------------
    def setup(self, cluster: ClusterInfo, rng: np.random.Generator) -> Needs:
        """Set up ``inner``, then the layer; return both their needs."""
        self.inner_needs_ = self.inner.setup(cluster, rng)
        return self.own_needs(self.inner_needs_, cluster, rng)

    def own_needs(self, inner: Needs, cluster: ClusterInfo,
                  rng: np.random.Generator) -> Needs:
        """Set up the layer's own state; return ``inner`` with what the layer needs."""
        raise NotImplementedError

    def decide(self, view: SchedView) -> Decisions:
        raise NotImplementedError

    # -- pass-throughs ------------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        return {**self.inner.get_params(), **self.layer_params}

    def effective_settings(self, given: set[str]) -> dict[str, Setting]:
        return {**self.inner.effective_settings(given),
                **parameter_settings(self.layer_params, given)}

    def run_metrics(self) -> dict[str, tuple[float | None, str]]:
        return self.inner.run_metrics()  # type: ignore[no-any-return]

    def run_timings(self) -> dict[str, float | None]:
        return self.inner.run_timings()  # type: ignore[no-any-return]

    def assigned_queues(self, user: np.ndarray, queue: np.ndarray) -> Any:
        return self.inner.assigned_queues(user, queue)

    def queue_rows(self, total: np.ndarray) -> Any:
        return self.inner.queue_rows(total)


def split_params(params: Mapping[str, Any] | None, is_layer: Callable[[str], bool]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``params`` split into the base policy's own and a layer's (``is_layer(key)``): each
    layer takes its keys off the replay's ``--set`` before the base policy sees the rest."""
    own = {k: v for k, v in (params or {}).items() if not is_layer(k)}
    layer = {k: v for k, v in (params or {}).items() if is_layer(k)}
    return own, layer


def typed_params(policy: str, raw: Mapping[str, Any], known: Mapping[str, Param], what: str
                 ) -> dict[str, Any]:
    """A layer's parameters ``raw`` checked against ``known`` (an unknown key is a one-line
    error naming the ``what`` parameters there are) and typed, defaults filled in."""
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise UsageError(f"policy '{policy}' has no parameter '{unknown[0]}' ({what} "
                         f"parameters: {', '.join(known)})")
    return {k: p.coerce(policy, k, raw[k]) if k in raw else p.default for k, p in known.items()}
