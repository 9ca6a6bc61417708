"""Compiled helpers for compiled loops: numba without its reference counting.

numba counts the references to every array a compiled function is handed, with atomic
updates on entry and on exit, even when the caller is compiled too.  A helper taking 17
arrays cost about 290 ns per call that way on this project's 2-core machine, against 2 ns
without, and its own work was a few array reads.  Helpers that run once per placement,
completion or container (the node index's search and update, the core's run bookkeeping,
the CapacityScheduler's checks per container) pay that millions of times per replay.

:func:`helper` compiles a function without reference counting.  It is for functions that
allocate nothing (numba refuses to compile one that does) and return no array (the caller
would release it once too often): they return scalars, tuples of scalars or nothing, and
the compiled functions they call follow the same rules (numba may compile those without
reference counting too).  Results are the same bits: only the bookkeeping of array
lifetimes goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from numba import njit

F = TypeVar("F", bound=Callable[..., object])


def helper(fn: F) -> F:
    """``numba.njit(cache=True)`` without the runtime's reference counting (see above)."""
    return njit(cache=True, _nrt=False)(fn)  # type: ignore[no-any-return]
