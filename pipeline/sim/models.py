"""GPU model constraints in the event-driven replay: which nodes a task may run on.

A machine's ``gpu_model`` names the model of its GPUs; a task's ``gpu_spec`` lists the
models it may use (openb's ``V100M16|V100M32``, PAI 2020's ``gpu_type``; empty: any).  The
replay codes them as bits, in the sorted order of the machines' model names: each node slot
has its model's bit (``view.nodes.gpu_model``; 0: the machine names no model), each task an
allowance mask (``view.pending.gpu_allow``; 0: any node).  A task may run on node ``n`` iff
``allow == 0 or allow & bits[n] != 0``.  Models a task names that no machine has give it
:data:`ABSENT`, a bit no node has: a task naming only such models fits nowhere, and is
recorded ``unschedulable`` when it arrives, never blocking others (the FGD paper's
simulator treats such pods the same way).

The shared placement searches honour the mask (:mod:`pipeline.policies.placement.nodeindex` and the
kernels built on it, the HPC pool, delay scheduling's and Quincy's fit tests), so every
policy places constrained tasks only where they may run.  The core still checks each
placement: one on a node of another model is held back (the task stays pending, the node
is marked changed) and counted (``gpu_model_held``), so a policy that ignored the mask
would lose that placement, never break the constraint.

Only fixed clusters have models: an elastic cluster's nodes come from one template that
names none, so there the constraint is not enforced (said in ``run.json`` and on stderr).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.sim.cluster import fits_some

MAX_MODELS = 62
ABSENT = np.int64(1) << np.int64(62)  # a model no machine has: no node carries this bit


def _bits(code: np.ndarray, missing: int) -> np.ndarray:
    """Model codes (-1: none) as bits: code ``c`` is ``1 << c``, -1 is ``missing``."""
    return np.where(code >= 0, np.left_shift(np.int64(1), np.maximum(code, 0)), missing)


def model_bits(models: pa.ChunkedArray | pa.Array | None) -> tuple[tuple[str, ...], np.ndarray]:
    """The machines' model names (sorted) and each machine's bit (0: no model named)."""
    if models is None or models.null_count == len(models):
        return (), np.zeros(0 if models is None else len(models), dtype=np.int64)
    names = tuple(sorted({m for m in models.to_pylist() if m}))
    if len(names) > MAX_MODELS:
        raise ValueError(f"{len(names)} GPU models: the replay codes at most {MAX_MODELS}")
    code = pc.fill_null(pc.index_in(models, value_set=pa.array(names, pa.string())), -1)
    return names, _bits(np.asarray(code.to_numpy(zero_copy_only=False), np.int64), 0)


def allow_masks(specs: pa.ChunkedArray | pa.Array, names: tuple[str, ...]) -> np.ndarray | None:
    """Per task, the bits of the models its ``gpu_spec`` names (0: none named; a model no
    machine has gives :data:`ABSENT`), or None when no task names one."""
    if isinstance(specs, pa.ChunkedArray):
        specs = specs.combine_chunks()
    n = len(specs)
    lengths = np.asarray(pc.fill_null(pc.list_value_length(specs), 0).to_numpy(
        zero_copy_only=False), dtype=np.int64)
    if not lengths.any():
        return None
    flat = pc.list_flatten(specs)  # the non-null lists' values, in row order
    code = pc.fill_null(pc.index_in(flat, value_set=pa.array(names, pa.string())), -1)
    bits = _bits(np.asarray(code.to_numpy(zero_copy_only=False), np.int64), ABSENT)
    owner = np.repeat(np.arange(n), lengths)
    allow = np.zeros(n, dtype=np.int64)
    np.bitwise_or.at(allow, owner, bits)
    return allow


def may_run(allow: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Whether each task (mask ``allow``) may run on the node of model ``bits``."""
    return (allow == 0) | ((allow & bits) != 0)


class GpuModels:
    """The nodes' model bits, and the core's checks of tasks against them."""

    def __init__(self, bits: np.ndarray, cap: np.ndarray) -> None:
        self.bits = np.asarray(bits, dtype=np.int64)
        self.cap = cap
        self.held = 0  # placements held back: the node's model is not one the task allows
        self._shapes: dict[int, np.ndarray] = {}

    def fits(self, req: np.ndarray, allow: np.ndarray) -> np.ndarray:
        """Whether each request fits some node of a model it allows (any node: True)."""
        ok = np.ones(len(req), dtype=np.bool_)
        for mask in np.unique(allow[allow != 0]).tolist():
            if mask not in self._shapes:
                nodes = may_run(np.int64(mask), self.bits)
                self._shapes[mask] = np.unique(self.cap[nodes], axis=0)
            rows = np.flatnonzero(allow == mask)
            ok[rows] = fits_some(req[rows], self._shapes[mask])
        return ok

    def check(self, req: np.ndarray, node: np.ndarray, slots: np.ndarray,
              allow: np.ndarray, dirty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Drop placements ``(req, node)`` (``req``: indices into the task ``slots``) on a
        node of a model the task does not allow (``allow``: the task table's masks);
        out-of-range pairs are left for the core's own check to report."""
        valid = (req >= 0) & (req < len(slots)) & (node >= 0) & (node < len(self.bits))
        bad = np.zeros(len(req), dtype=np.bool_)
        bad[valid] = ~may_run(allow[slots[req[valid]]], self.bits[node[valid]])
        if not bad.any():
            return req, node
        dirty[node[bad]] = True
        self.held += int(bad.sum())
        return req[~bad], node[~bad]
