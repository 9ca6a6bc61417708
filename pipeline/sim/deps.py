"""Task dependencies (``depends_on``): a task becomes pending only once all its parents finished.

Memory stays bounded by open references, not by the trace: the replay stage counts, before
the run, how many children name each parent (``refs``); that a parent finished is remembered
only until its last child has arrived.  A parent that never finishes (unschedulable, killed,
missing from the trace, or itself blocked) leaves its children blocked; they end
``unfinished`` with no ``ready_s``, and are counted.
"""

from __future__ import annotations


class Dependencies:
    """Tracks which blocked slots wait on which parent task ids."""

    def __init__(self, refs: dict[str, int]) -> None:
        self.refs = dict(refs)
        self.finished: set[str] = set()
        self.failed: set[str] = set()
        self.waiting: dict[str, list[int]] = {}
        self.missing: dict[int, int] = {}
        self.slot_id: dict[int, str] = {}

    def is_parent(self, task_id: str) -> bool:
        """Whether some task names ``task_id`` in its ``depends_on``."""
        return task_id in self.refs or task_id in self.waiting

    def arrive(self, slot: int, parents: list[str]) -> bool:
        """Register a child in ``slot``; return True when all its parents already finished."""
        missing, doomed = 0, False
        for parent in dict.fromkeys(parents):
            if parent in self.failed:
                doomed = True
            elif parent not in self.finished:
                self.waiting.setdefault(parent, []).append(slot)
                missing += 1
        for parent in parents:  # the refs were counted per occurrence
            self._consume(parent)
        if doomed:
            self.missing[slot] = -1
            return False
        if missing:
            self.missing[slot] = missing
            return False
        return True

    def _consume(self, parent: str) -> None:
        left = self.refs.get(parent, 0) - 1
        if left > 0:
            self.refs[parent] = left
            return
        self.refs.pop(parent, None)
        self.finished.discard(parent)
        self.failed.discard(parent)

    def finish(self, slot: int) -> list[int]:
        """The parent in ``slot`` finished: return the child slots that became ready."""
        task_id = self.slot_id.pop(slot)
        if task_id in self.refs:
            self.finished.add(task_id)
        ready = []
        for child in self.waiting.pop(task_id, []):
            left = self.missing.get(child, 0)
            if left < 0:
                continue
            if left == 1:
                del self.missing[child]
                ready.append(child)
            else:
                self.missing[child] = left - 1
        return ready

    def fail(self, task_id: str, slot: int | None = None) -> None:
        """The parent ``task_id`` will never finish: its children can never run."""
        if slot is not None:
            self.slot_id.pop(slot, None)
        if task_id in self.refs:
            self.failed.add(task_id)
        for child in self.waiting.pop(task_id, []):
            self.missing[child] = -1
