"""Layers stacked on a base policy.

A layer is a policy that wraps another (:class:`~.base.Layered`), so any number stack: the
innermost is the base policy, each layer sees what the layers outside it pass down and
hands its decisions back up.  :data:`ORDER` is the order :func:`stack` uses, innermost
first: the opportunistic layer inside, speculation outside, so the speculation rules see
every running container of a job (opportunistic ones included, as Hadoop's speculator sees
all its attempts) and the opportunistic layer sees the originals only.  Copies are made of
guaranteed containers only, so the other order is valid too (the rules then compare tasks
with the job's guaranteed ones only); :func:`stack` takes it when asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.policies.layers.opportunistic.layer import Opportunistic
from pipeline.policies.layers.speculation.layer import Speculation
from pipeline.sim.interface import Policy

LAYER_CLASSES: dict[str, type[Opportunistic] | type[Speculation]] = {
    "opportunistic": Opportunistic, "speculation": Speculation}
ORDER: tuple[str, ...] = ("opportunistic", "speculation")


def stack(base: Policy, layers: dict[str, dict[str, Any]],
          order: Sequence[str] | None = None) -> Policy:
    """``base`` wrapped in each of ``layers`` (name -> resolved parameters), innermost
    first in ``order`` (:data:`ORDER` when not given); a layer appears at most once."""
    order = ORDER if order is None else tuple(order)
    unknown = sorted(set(layers) - set(LAYER_CLASSES))
    if unknown:
        raise ValueError(f"no layer {unknown[0]!r} (layers: {', '.join(LAYER_CLASSES)})")
    if len(set(order)) != len(order) or not set(layers) <= set(order):
        raise ValueError(f"layer order {list(order)} must list each layer of "
                         f"{sorted(layers)} once")
    policy: Any = base
    for name in order:
        if name in layers:
            policy = LAYER_CLASSES[name](policy, layers[name])
    return policy  # type: ignore[no-any-return]
