"""What a layer over any policy (opportunistic containers, speculation) passes through to
the policy it wraps: its parameters and settings (with the layer's own), its heartbeat, run
metrics and timings, and its queues."""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.policies.base import PolicyBase
from pipeline.policies.settings import Setting, parameter_settings


class Layered:
    """A policy ``inner`` with a layer whose resolved parameters are ``layer_params``."""

    def __init__(self, inner: PolicyBase, layer_params: dict[str, Any]) -> None:
        self.inner = inner
        self.layer_params = dict(layer_params)
        self.name = inner.name

    @property
    def decides_when_idle(self) -> bool:
        return bool(getattr(self.inner, "decides_when_idle", False))

    def get_params(self) -> dict[str, Any]:
        return {**self.inner.get_params(), **self.layer_params}

    def effective_settings(self, given: set[str]) -> dict[str, Setting]:
        return {**self.inner.effective_settings(given),
                **parameter_settings(self.layer_params, given)}

    def heartbeat_interval(self) -> float | None:
        return self.inner.heartbeat_interval()

    def run_metrics(self) -> dict[str, tuple[float | None, str]]:
        return self.inner.run_metrics()

    def run_timings(self) -> dict[str, float | None]:
        return self.inner.run_timings()

    def assigned_queues(self, user: np.ndarray, queue: np.ndarray) -> Any:
        return self.inner.assigned_queues(user, queue)

    def queue_rows(self, total: np.ndarray) -> Any:
        return self.inner.queue_rows(total)
