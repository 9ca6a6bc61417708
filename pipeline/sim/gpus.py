"""GPU devices in the event-driven replay: which devices each running task holds.

A machine's ``gpu`` counts its devices; a task asks for a share of one device (``gpu``
below 1: GPU sharing, the share must fit on a single device) or for whole devices. The core
keeps each node's per-device free share (milli-GPU, :attr:`GpuDevices.free`, -1 where a
node has no such device) and binds devices to each placement the policy returns: a share
goes to the tightest device that fits it (least free share at or above it, lowest index on
ties), whole devices to the lowest-numbered fully free ones, as the FGD paper's simulator
binds them (:func:`device_mask`, which the GPU placement policies use too). A placement
whose GPU request fits the node's total free GPU but no device (a 0.6 share where 0.3 + 0.3
is free apart) is held back: the task stays pending, the node is marked changed, and the
count is kept (``gpu_held``). Policies see the devices without knowing them:
``view.nodes.alloc[:, 2]`` is the node's GPU minus its :meth:`~GpuDevices.room` (whole free
devices plus the largest free share of a partly used one), so the free GPU a policy
computes (``cap - alloc``) admits exactly the requests some device can take;
``view.nodes.gpu_free`` has the devices themselves. Devices are given back when their task
stops running for any reason (finished, preempted, killed, evicted), found at the next
scheduling point.

Speculative copies are bound like any placement (a copy of a GPU task holds its own
devices; one that fits none is held back).  Opportunistic containers never ask for GPUs:
over-subscription works on measured CPU and memory, and the core refuses an opportunistic
decision for a task that asks for a GPU.  GPU models (``gpu_spec``) are checked apart
(:mod:`pipeline.sim.models`).
"""

from __future__ import annotations

import numba
import numpy as np

from pipeline.sim.jit import helper
from pipeline.sim.tasks import RUNNING, TaskTable

MILLI = 1000  # milli-GPU in one whole GPU (and milli-cores in one core)


class GpuDevices:
    """Per-node device state and the devices each running task holds."""

    def __init__(self, counts: np.ndarray) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        width = max(int(counts.max(initial=0)), 1)
        self.free = np.where(np.arange(width)[None, :] < counts[:, None], MILLI, -1).astype(
            np.int64)
        self.held = 0  # placements held back: the GPU request fit no device
        # the bindings in force: slot, node, attempts at binding, device mask, share
        self._slot = np.zeros(0, np.int64)
        self._node = np.zeros(0, np.int64)
        self._attempt = np.zeros(0, np.int64)
        self._mask = np.zeros(0, np.int64)
        self._share = np.zeros(0, np.int64)

    def room(self) -> np.ndarray:
        """Per node, the GPU a request can use: whole free devices plus the largest free
        share of a partly used one.  Exact as one number: a share ``g`` < 1 fits some
        device iff ``g <= room``, and ``k`` whole devices are free iff ``k <= room``."""
        whole = (self.free == MILLI).sum(axis=1)
        partial = np.where((self.free >= 0) & (self.free < MILLI), self.free, 0).max(
            axis=1, initial=0)
        return whole + partial / MILLI

    def sync(self, tasks: TaskTable) -> None:
        """Give back the devices of tasks no longer running where they were bound."""
        if not len(self._slot):
            return
        t, slot = tasks, self._slot
        alive = ((t.state[slot] == RUNNING) & (t.node[slot] == self._node)
                 & (t.attempts[slot] == self._attempt))
        if alive.all():
            return
        gone = ~alive
        release(self._node[gone], self._mask[gone], self._share[gone], self.free)
        self._slot, self._node = self._slot[alive], self._node[alive]
        self._attempt, self._mask = self._attempt[alive], self._mask[alive]
        self._share = self._share[alive]

    def bind(self, req: np.ndarray, node: np.ndarray, pending: np.ndarray, tasks: TaskTable,
             dirty: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int, int]]]:
        """Devices for each placement ``(req, node)`` in order; placements whose GPU request
        fits no device are dropped.  Returns the kept pairs and the bindings made
        (slot, node, mask, share), which :meth:`commit` records once the core applied them
        (or :meth:`undo` gives back)."""
        self.sync(tasks)
        gpu = np.zeros(len(req))
        valid = (req >= 0) & (req < len(pending)) & (node >= 0) & (node < len(self.free))
        gpu[valid] = tasks.req[pending[req[valid]], 2]
        if not np.any(gpu > 0):
            return req, node, []
        mask = np.zeros(len(req), dtype=np.int64)
        share = np.zeros(len(req), dtype=np.int64)
        keep = bind_devices(np.asarray(node, np.int64), gpu, self.free, mask, share)
        dirty[node[~keep]] = True
        self.held += int((~keep).sum())
        hit = keep & (gpu > 0)
        made = list(zip(pending[req[hit]].tolist(), node[hit].tolist(), mask[hit].tolist(),
                        share[hit].tolist(), strict=True))
        return req[keep], node[keep], made

    def commit(self, made: list[tuple[int, int, int, int]], tasks: TaskTable) -> None:
        """Record bindings the core applied (their tasks now run)."""
        if not made:
            return
        slot, node, mask, share = (np.asarray(c, np.int64) for c in zip(*made, strict=True))
        self._slot = np.concatenate([self._slot, slot])
        self._node = np.concatenate([self._node, node])
        self._attempt = np.concatenate([self._attempt, tasks.attempts[slot].astype(np.int64)])
        self._mask = np.concatenate([self._mask, mask])
        self._share = np.concatenate([self._share, share])

    def undo(self, made: list[tuple[int, int, int, int]]) -> None:
        """Give back bindings the core did not apply (their gang was held back)."""
        if made:
            _, node, mask, share = (np.asarray(c, np.int64) for c in zip(*made, strict=True))
            release(node, mask, share, self.free)


@helper
def device_mask(free, want, whole):  # pragma: no cover (compiled)
    """The devices of one node (``free``: its free milli-GPU per device, -1: none) that a
    request binds, as a bit mask (bit d: device d), 0 when they are not free.  A share
    (``whole`` False, ``want`` milli-GPU below a whole one) goes to the tightest device
    that fits it: the least free share at or above ``want``, the lowest index on ties
    (the FGD simulator's ``allocateGpuIdBasedOnBestFit``); ``want`` whole devices
    (``whole`` True) to the lowest-numbered fully free ones (``AllocateExclusiveGpuId``).
    The one definition of the rule: the replay core binds with it, and so do the GPU
    placement policies (:func:`pipeline.policies.gpu.devices.choose_devices`)."""
    width = free.shape[0]
    if not whole:
        best = -1
        for d in range(width):
            if free[d] >= want and (best < 0 or free[d] < free[best]):
                best = d
        return np.int64(0) if best < 0 else np.int64(1) << best
    found = 0
    for d in range(width):
        if free[d] == MILLI:
            found += 1
    if found < want:
        return np.int64(0)
    bits = np.int64(0)
    taken = 0
    for d in range(width):
        if taken < want and free[d] == MILLI:
            bits |= np.int64(1) << d
            taken += 1
    return bits


@numba.njit(cache=True)
def bind_devices(node, gpu, free, mask, share):  # pragma: no cover (compiled)
    """Bind devices for each placement in order (``gpu`` 0: none needed) by
    :func:`device_mask`.  Fills ``mask`` (bit d: device d) and ``share`` (milli per
    device); returns which placements got their devices."""
    keep = np.ones(node.shape[0], dtype=np.bool_)
    for i in range(node.shape[0]):
        g = gpu[i]
        if g <= 0:
            continue
        nd = node[i]
        whole = g >= 1
        want = np.int64(np.round(g)) if whole else np.int64(np.round(g * MILLI))
        bits = device_mask(free[nd], want, whole)
        if bits == 0:
            keep[i] = False
            continue
        per = MILLI if whole else want
        for d in range(free.shape[1]):
            if (bits >> d) & 1:
                free[nd, d] -= per
        mask[i] = bits
        share[i] = per
    return keep


@numba.njit(cache=True)
def release(node, mask, share, free):  # pragma: no cover (compiled)
    """Give each binding's share back to its devices."""
    for i in range(node.shape[0]):
        for d in range(free.shape[1]):
            if (mask[i] >> d) & 1:
                free[node[i], d] += share[i]
