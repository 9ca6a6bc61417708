"""The speculative-execution layer: any placement policy plus a speculation rule
(:mod:`.hadoop`, :mod:`.late`, :mod:`.mrv2`).

The layer sits between the core and the policy, without the policy knowing:

- the policy sees ``view.running`` without the speculative copies (it cannot preempt or
  weigh a copy), and its preempt and kill indices are mapped back to the full view;
- after the policy has decided, the rule looks at the running originals and launches
  copies (``spec_run``/``spec_node``) into the room the policy left on up nodes (Hadoop
  schedules speculative attempts after every task that is not running yet), each with its
  task's request, never on the node its original runs on, at most one per task;
- while originals run, the layer asks to be woken every ``spec_interval_s`` (hadoop, late:
  a TaskTracker heartbeat) or at the next speculator pass of a job (mrv2), and only looks
  at those times: a look costs O(running containers) in numpy, a few per simulated
  interval whatever the number of scheduling points;
- copies are made of guaranteed containers only, and are guaranteed themselves: an
  opportunistic container (:mod:`..opportunistic`) may be killed or paused by its
  NodeManager at any time, which the model does not race against a copy.  The layer
  stacks inside or outside the opportunistic one (:mod:`..stack`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from pipeline.policies.layers.base import Layered
from pipeline.policies.layers.speculation.hadoop import HadoopRule
from pipeline.policies.layers.speculation.late import LateRule
from pipeline.policies.layers.speculation.mrv2 import Mrv2Rule
from pipeline.policies.layers.speculation.placement import free_room
from pipeline.policies.layers.speculation.progress import parse_phases
from pipeline.policies.layers.speculation.running import RunningTasks
from pipeline.sim.interface import ClusterInfo, Decisions, Policy, RunningView, SchedView
from pipeline.sim.needs import Needs

EMPTY = np.zeros(0, dtype=np.int64)
Rule = HadoopRule | LateRule | Mrv2Rule


def make_rule(spec: dict[str, Any]) -> Rule:
    """The rule ``spec["spec"]`` names, built from the resolved ``spec_*`` values."""
    s = spec
    if s["spec"] == "hadoop":
        return HadoopRule(float(s["spec_gap"]), float(s["spec_lag_s"]))
    if s["spec"] == "late":
        return LateRule(float(s["spec_speculative_cap"]), str(s["spec_thresholds"]),
                        float(s["spec_slow_node_pct"]), float(s["spec_slow_task_pct"]),
                        float(s["spec_slow_node_threshold"]),
                        float(s["spec_slow_task_threshold"]), float(s["spec_lag_s"]))
    if s["spec"] == "mrv2":
        return Mrv2Rule(float(s["spec_retry_after_no_speculate_ms"]) / 1000.0,
                        float(s["spec_retry_after_speculate_ms"]) / 1000.0,
                        int(s["spec_minimum_allowed_tasks"]), float(s["spec_cap_total_tasks"]),
                        float(s["spec_cap_running_tasks"]))
    raise ValueError(f"no speculation rule {s['spec']!r}")


class Speculation(Layered):
    """``inner`` with speculative copies; ``spec`` holds the resolved ``spec_*`` values
    (the pass-throughs to ``inner``: :class:`pipeline.policies.layers.base.Layered`)."""

    def __init__(self, inner: Policy, spec: dict[str, Any]) -> None:
        super().__init__(inner, spec)
        self.spec = self.layer_params
        self.rule_: Rule | None = None
        self.phases_ = (0.5, 0.25, 0.25)
        self.next_look_s_ = -math.inf

    # -- the scheduling -----------------------------------------------------------------
    def own_needs(self, inner: Needs, cluster: ClusterInfo,
                  rng: np.random.Generator) -> Needs:
        """The rule; the running view and job statistics it reads (with ``inner``'s needs)."""
        self.phases_ = parse_phases(self.spec["spec_reduce_phases"])
        self.rule_ = make_rule(self.spec)
        self.next_look_s_ = -math.inf
        return inner.merged(running=True, job_stats=True)

    def decide(self, view: SchedView) -> Decisions:
        running = view.running
        if running is None:  # a core that builds no running view: nothing to speculate on
            return self.inner.decide(view)
        copy_pos = (np.flatnonzero(np.asarray(running.speculative)) if len(running)
                    else EMPTY)
        if len(copy_pos):
            originals = np.flatnonzero(~np.asarray(running.speculative))
            seen: RunningView = running.subset(originals)  # type: ignore[assignment]
        else:
            originals = np.arange(len(running), dtype=np.int64)
            seen = running
        inner_view = dataclasses.replace(
            view, running=seen if self.inner_needs_.running else None)
        d = self.inner.decide(inner_view)
        preempt = originals[np.asarray(d.preempt, dtype=np.int64)]
        kill = originals[np.asarray(d.kill, dtype=np.int64)]
        if len(originals) == 0:
            # the core calls again only when work waits or when woken: what the inner
            # policy starts now must be looked at later
            wake = d.wake_at_s
            if len(d.place_req):
                soon = view.now + self._interval_s()
                wake = soon if wake is None else min(float(wake), soon)
            return dataclasses.replace(d, preempt=preempt, kill=kill, wake_at_s=wake)
        jobs = view.jobs
        tasks = RunningTasks(running, originals, view.now, self.phases_,
                             np.concatenate([preempt, kill]),
                             0 if jobs is None else int(np.shape(jobs.arrived)[0]), copy_pos)
        spec_run, spec_node, wake = self._speculate(view, d, tasks)
        wake_at = wake if d.wake_at_s is None else min(float(d.wake_at_s), wake)
        return dataclasses.replace(d, preempt=preempt, kill=kill, spec_run=spec_run,
                                   spec_node=spec_node, wake_at_s=wake_at)

    def _interval_s(self) -> float:
        """Seconds between looks (mrv2: between a job's speculator passes)."""
        if isinstance(self.rule_, Mrv2Rule):
            return self.rule_.retry_no_s
        return float(self.spec["spec_interval_s"])

    def _speculate(self, view: SchedView, d: Decisions, tasks: RunningTasks
                   ) -> tuple[np.ndarray, np.ndarray, float]:
        """Copies to launch (running indices, nodes) and when to look again."""
        rule = self.rule_
        assert rule is not None, "setup() was not called"
        now = view.now
        if isinstance(rule, Mrv2Rule):
            if rule.next_wake(tasks) > now:
                return EMPTY, EMPTY, rule.next_wake(tasks)
        elif now < self.next_look_s_:
            return EMPTY, EMPTY, self.next_look_s_
        else:
            self.next_look_s_ = now + self._interval_s()
        room = self._room(view, d)
        pos, nodes = rule.launch(view, tasks, room)
        wake = rule.next_wake(tasks) if isinstance(rule, Mrv2Rule) else self.next_look_s_
        return tasks.index[pos], nodes, wake

    @staticmethod
    def _room(view: SchedView, d: Decisions) -> np.ndarray:
        """Room on each node after the inner policy's placements of this call."""
        placed = np.asarray(d.place_req, dtype=np.int64)
        req = (np.asarray(view.pending.req)[placed] if len(placed)
               else np.zeros((0, 3)))
        return free_room(view.nodes, req, np.asarray(d.place_node, dtype=np.int64))
