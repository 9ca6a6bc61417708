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


def inlined(fn: F) -> F:
    """A :func:`helper` that numba inlines into each compiled caller (``inline='always'``).

    For helpers that take whole named structures and run in a compiled loop.  A compiled
    call passes a NamedTuple argument field by field, every array as its seven or more
    words, and LLVM inlines only small helpers: a call of delay scheduling's
    per-heartbeat step with its five structures (about 70 arrays) cost about 135 ns even
    when it had nothing to do, and the delay scheduler's decision loop took 2.3 times as
    long as the same loop written with positional arrays.  Inlined, the structures' fields
    are plain values of the caller again.  Only call these from a :func:`helper` (a
    caller with reference counting would count every array read of the inlined body).
    """
    return njit(cache=True, _nrt=False, inline="always")(fn)  # type: ignore[no-any-return]
