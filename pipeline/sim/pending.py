"""The pending queue: slots, queue-entry times, requests and jobs in queue order, kept contiguous.

A growable buffer with a head and a tail: arrivals append at the tail (amortized O(1) each);
placed requests are removed by shifting the surviving entries *before* the last removed one
towards the tail and advancing the head, so a removal costs O(position of the last removed
entry), not O(queue length).  Views of the live part are handed to policies without copies.
"""

from __future__ import annotations

import numpy as np


class PendingQueue:
    """Pending requests in queue order (re-queued ones join at the back)."""

    def __init__(self, capacity: int = 1024) -> None:
        self._slots = np.zeros(capacity, dtype=np.int64)
        self._enter = np.zeros(capacity)
        self._req = np.zeros((capacity, 3))
        self._job = np.zeros(capacity, dtype=np.int32)
        self._head = self._tail = 0

    def __len__(self) -> int:
        return self._tail - self._head

    @property
    def slots(self) -> np.ndarray:
        return self._slots[self._head:self._tail]

    @property
    def enter(self) -> np.ndarray:
        return self._enter[self._head:self._tail]

    @property
    def req(self) -> np.ndarray:
        return self._req[self._head:self._tail]

    @property
    def job(self) -> np.ndarray:
        """Each entry's job code (the task table's dtype): policies read it at every call,
        and a gather of ~10^5 scattered table rows cost more than keeping it here."""
        return self._job[self._head:self._tail]

    def append(self, slots: np.ndarray, enter: np.ndarray, req: np.ndarray,
               job: np.ndarray) -> None:
        """Add entries at the back."""
        k = len(slots)
        if self._tail + k > len(self._slots):
            self._make_room(k)
        end = self._tail + k
        self._slots[self._tail:end] = slots
        self._enter[self._tail:end] = enter
        self._req[self._tail:end] = req
        self._job[self._tail:end] = job
        self._tail = end

    def _make_room(self, k: int) -> None:
        """Move the live part to the front, growing the buffer if it is still too small."""
        n = len(self)
        size = len(self._slots)
        if n + k > size // 2:
            size = max(2 * size, 2 * (n + k))
        for name in ("_slots", "_enter", "_req", "_job"):
            old = getattr(self, name)
            new = np.zeros((size, *old.shape[1:]), dtype=old.dtype)
            new[:n] = old[self._head:self._tail]
            setattr(self, name, new)
        self._head, self._tail = 0, n

    def remove(self, index: np.ndarray) -> np.ndarray:
        """Remove entries at queue positions ``index`` (unique); return their slots."""
        if len(index) == 0:
            return np.zeros(0, dtype=np.int64)
        index = np.sort(index)
        removed = self.slots[index].copy()
        last = int(index[-1]) + 1
        keep = np.ones(last, dtype=np.bool_)
        keep[index] = False
        kept = np.flatnonzero(keep)
        new_head = self._head + len(index)
        for arr in (self._slots, self._enter, self._req, self._job):
            prefix = arr[self._head:self._head + last]
            arr[new_head:self._head + last] = np.take(prefix, kept, axis=0)  # fast row gather
        self._head = new_head
        return removed
