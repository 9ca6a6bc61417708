"""A compiled open-addressing hash map from non-negative int64 keys to int64 values.

numba's typed dict costs about a microsecond per operation from compiled code and much more
from Python; trace folds do one lookup per raw row, so this map keeps keys and values in two
numpy arrays (linear probing, backward-shift deletion, so no tombstones) and the functions
below run inside other compiled code.  Growth happens between calls, from Python
(:meth:`IntMap.reserve`), so compiled code never reallocates.
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY = -1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SHIFT = np.uint64(29)


class IntMap:
    """Keys, values and a size cell; the arrays are passed to the compiled functions."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        size = 1 << max(4, int(capacity - 1).bit_length())
        self.keys = np.full(size, EMPTY, dtype=np.int64)
        self.values = np.zeros(size, dtype=np.int64)
        self.count = np.zeros(1, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.count[0])

    def reserve(self, extra: int) -> None:
        """Grow so ``extra`` more keys keep the load factor at or below one half."""
        need = 2 * (int(self.count[0]) + extra)
        if need <= len(self.keys):
            return
        bigger = IntMap(need)
        _rehash(self.keys, self.values, bigger.keys, bigger.values)
        self.keys, self.values = bigger.keys, bigger.values

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        """The keys and values present (in table order)."""
        used = self.keys != EMPTY
        return self.keys[used], self.values[used]


@numba.njit(cache=True, inline="always")
def home(key: int, mask: int) -> int:  # pragma: no cover - compiled
    """The probe start of ``key`` in a table of ``mask + 1`` entries."""
    return np.int64(((np.uint64(key) * _GOLDEN) >> _SHIFT) & np.uint64(mask))


@numba.njit(cache=True)
def find(keys: np.ndarray, key: int) -> int:  # pragma: no cover - compiled
    """Position of ``key``, or ``-1 - p`` where ``p`` is the empty position to insert it."""
    mask = keys.size - 1
    p = home(key, mask)
    while True:
        k = keys[p]
        if k == key:
            return p
        if k == EMPTY:
            return -1 - p
        p = (p + 1) & mask


@numba.njit(cache=True)
def insert_at(keys, values, count, p, key, value):  # pragma: no cover - compiled
    """Put ``key -> value`` at empty position ``p`` (from :func:`find`)."""
    keys[p] = key
    values[p] = value
    count[0] += 1


@numba.njit(cache=True)
def delete_at(keys, values, count, p):  # pragma: no cover - compiled
    """Remove the entry at position ``p``, shifting later entries of its probe run back."""
    mask = keys.size - 1
    i = p
    j = p
    while True:
        j = (j + 1) & mask
        if keys[j] == EMPTY:
            break
        h = home(keys[j], mask)
        # keys[j] may move to i only if its home is not cyclically within (i, j]
        if (i < j and i < h <= j) or (i > j and (h > i or h <= j)):
            continue
        keys[i] = keys[j]
        values[i] = values[j]
        i = j
    keys[i] = EMPTY
    count[0] -= 1


@numba.njit(cache=True)
def _rehash(keys, values, new_keys, new_values):  # pragma: no cover - compiled
    count = np.zeros(1, dtype=np.int64)
    for p in range(keys.size):
        if keys[p] != EMPTY:
            q = find(new_keys, keys[p])
            insert_at(new_keys, new_values, count, -1 - q, keys[p], values[p])
