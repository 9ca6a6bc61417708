"""The running originals as the speculation rules see them: columns gathered on first use.

``view.running`` lists every running container, speculative copies included.  The rules
look at *originals* (a copy is never itself copied); a copy only counts where a rule says
so (LATE's node progress).  Columns are gathered once per call and only when a rule reads
them, so a call that returns early pays for little.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from pipeline.policies.layers.speculation.groups import N_KINDS, Groups, category
from pipeline.policies.layers.speculation.progress import progress_rate, progress_score
from pipeline.sim.interface import RunningView


class RunningTasks:
    """Running originals (``index``: their positions in ``view.running``) at ``now``."""

    def __init__(self, running: RunningView, index: np.ndarray, now: float,
                 phases: tuple[float, float, float], stopping: np.ndarray,
                 n_jobs_known: int, copy_index: np.ndarray | None = None) -> None:
        self.view = running
        self.index = index
        self.copy_index = np.zeros(0, dtype=np.int64) if copy_index is None else copy_index
        self.now = now
        self.phases = phases
        self.stopping = stopping  # positions in view.running the inner policy stops now
        self.n_jobs_known = n_jobs_known

    def __len__(self) -> int:
        return len(self.index)

    def _col(self, name: str) -> np.ndarray:
        return np.asarray(getattr(self.view, name))[self.index]

    @cached_property
    def kind(self) -> np.ndarray:
        return self._col("kind")

    @cached_property
    def job(self) -> np.ndarray:
        return self._col("job")

    @cached_property
    def node(self) -> np.ndarray:
        return self._col("node")

    @cached_property
    def elapsed_s(self) -> np.ndarray:
        return self.now - self._col("start_s")

    @cached_property
    def ps(self) -> np.ndarray:
        """Progress score (:func:`progress_score`)."""
        return progress_score(self.kind, self._col("progress"), self.phases)

    @cached_property
    def rate(self) -> np.ndarray:
        """Progress rate, PS per second running."""
        return progress_rate(self.ps, self.elapsed_s)

    @cached_property
    def has_copy(self) -> np.ndarray:
        return self._col("has_copy").astype(bool)

    @cached_property
    def copies(self) -> np.ndarray:
        return self._col("copies")

    @cached_property
    def open(self) -> np.ndarray:
        """Tasks a copy may be launched for at all: no copy running, not being stopped by
        the inner policy in this call, not opportunistic, not done."""
        # (an opportunistic container may be killed or paused by its NodeManager at any
        # time: no copy is made of one; read here, only when a rule looks)
        ok = ~self.has_copy & (self.ps < 1.0) & ~self._col("opportunistic").astype(bool)
        if len(self.stopping):
            ok &= ~np.isin(self.index, self.stopping)
        return ok

    def open_at(self, pos: np.ndarray, ps: np.ndarray) -> np.ndarray:
        """:attr:`open` for the originals at ``pos`` only, given their PS."""
        ok = ~self.has_copy[pos] & (ps < 1.0) & ~np.asarray(
            self.view.opportunistic)[self.index[pos]].astype(bool)
        if len(self.stopping):
            ok &= ~np.isin(self.index[pos], self.stopping)
        return ok

    def score_at(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PS and start time of the originals at ``pos`` only (gathered for these alone:
        cheaper than :attr:`ps` when a rule looks at a few)."""
        if "ps" in self.__dict__:
            return self.ps[pos], self.now - self.elapsed_s[pos]
        sub = self.at(pos)
        ps = progress_score(np.asarray(sub.kind), np.asarray(sub.progress), self.phases)
        return ps, np.asarray(sub.start_s, dtype=np.float64)

    @cached_property
    def groups(self) -> Groups:
        """(job, kind) categories of the running originals."""
        space = (max(self.n_jobs_known, int(self.job.max()) + 1 if len(self) else 0)
                 * N_KINDS)
        return Groups(category(self.job, self.kind), space=space)

    def node_progress(self, done: np.ndarray | None, n_nodes: int) -> np.ndarray:
        """LATE's node progress: tasks finished on each node (1 each, ``done``) plus the PS
        of the containers running there, copies included."""
        total = np.zeros(n_nodes) if done is None else np.asarray(done, dtype=np.float64)
        total = total + np.bincount(self.node, weights=self.ps, minlength=n_nodes)[:n_nodes]
        if len(self.copy_index):
            at = self.copy_index
            ps = progress_score(np.asarray(self.view.kind)[at],
                                np.asarray(self.view.progress)[at], self.phases)
            total += np.bincount(np.asarray(self.view.node)[at], weights=ps,
                                 minlength=n_nodes)[:n_nodes]
        return total

    def at(self, pos: np.ndarray) -> RunningView:
        """``view.running`` restricted to the originals at ``pos`` (their req, inputs,
        rows gathered for these only)."""
        return self.view.subset(self.index[pos])
