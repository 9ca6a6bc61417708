"""Node labels (partitions): which node belongs to which partition, and one node index each.

YARN (NodeLabel.md, Hadoop 3.3): "One node can have only one node partition ... By default,
nodes belong to DEFAULT partition (partition="")"; labels are created with ``yarn rmadmin
-addToClusterNodeLabels "x(exclusive=false),y"`` ("If user don't specify "(exclusive=...)",
exclusive will be true by default") and put on nodes with ``-replaceLabelsOnNode``.  Traces
carry no labels, so tracereplay takes both steps as one specification (a **tracereplay
extension**: the ``node_labels`` parameter, or the ``tracereplay.node-labels`` property of
the capacity-scheduler.xml; the parameter wins)::

    gpu:gpu;x(exclusive=false):25%;big:mem>=128

Entries ``label[(exclusive=true|false)]:selector`` are separated by ``;``.  Selectors:
``gpu`` (nodes with GPU capacity), ``P%`` (``round(P/100 * nodes)`` of the nodes still
unlabelled, drawn with the policy's seeded generator, so the same run labels the same
nodes), ``cpu>=V`` / ``mem>=V`` / ``gpu>=V`` (capacity in the trace's units at least
``V``).  Entries apply in order and a node keeps the first label that selects it.  Label
names follow Hadoop's rule (letters, digits, ``-`` and ``_``, not starting with ``-`` or
``_``).  Partition 0 is DEFAULT; label ``i`` of the specification is partition ``i + 1``.

Labels need a fixed cluster: the elastic cluster's autoscaler does not know them (it boots
the lowest free node slot for any waiting request), so a request that slot's partition
cannot serve would have the node bought, left idle and released over and over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from pipeline.errors import UsageError
from pipeline.policies.placement.nodeindex import NodeIndex
from pipeline.sim.interface import NodeView

LABEL_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,254}$")
_ENTRY = re.compile(r"^(?P<name>[^():]+?)\s*(?:\(\s*exclusive\s*=\s*(?P<excl>\w+)\s*\))?\s*"
                    r":\s*(?P<sel>.+)$")
_THRESHOLD = re.compile(r"^(?P<res>cpu|mem|gpu)\s*>=\s*(?P<value>[0-9.eE+-]+)$")
RESOURCE = {"cpu": 0, "mem": 1, "gpu": 2}


@dataclass(frozen=True)
class LabelSpec:
    """One cluster node label: name, exclusivity and the nodes it goes on (a selector)."""

    name: str
    exclusive: bool
    selector: str


def parse_node_labels(text: str, *, source: str) -> list[LabelSpec]:
    """Label specifications from ``node_labels`` text (UsageError naming ``source``)."""
    specs: list[LabelSpec] = []
    for raw in (e.strip() for e in text.split(";")):
        if not raw:
            continue
        m = _ENTRY.match(raw)
        if m is None:
            raise UsageError(f"{source}: entry {raw!r} is not "
                             "label[(exclusive=true|false)]:selector")
        name, excl = m["name"].strip(), (m["excl"] or "true").lower()
        if not LABEL_NAME.match(name):
            raise UsageError(f"{source}: {name!r} is not a valid node label name (letters, "
                             "digits, '-', '_'; not starting with '-' or '_')")
        if excl not in ("true", "false"):
            raise UsageError(f"{source}: entry {raw!r}: exclusive must be true or false")
        if any(s.name == name for s in specs):
            raise UsageError(f"{source}: node label {name!r} is defined twice")
        _check_selector(m["sel"].strip(), raw, source)
        specs.append(LabelSpec(name, excl == "true", m["sel"].strip()))
    return specs


def _check_selector(sel: str, raw: str, source: str) -> None:
    if sel == "gpu":
        return
    if sel.endswith("%"):
        try:
            share = float(sel[:-1])
        except ValueError:
            share = -1.0
        if not 0.0 <= share <= 100.0:
            raise UsageError(f"{source}: entry {raw!r}: {sel!r} is not a share in [0, 100]%")
        return
    m = _THRESHOLD.match(sel)
    try:
        ok = m is not None and np.isfinite(float(m["value"]))
    except ValueError:
        ok = False
    if not ok:
        raise UsageError(f"{source}: entry {raw!r}: selector {sel!r} is not gpu, P%, "
                         "cpu>=V, mem>=V or gpu>=V")


def assign_nodes(specs: list[LabelSpec], cap: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """Partition of every node slot (0 = DEFAULT, ``i + 1`` = ``specs[i]``)."""
    n = len(cap)
    part = np.zeros(n, dtype=np.int64)
    for i, spec in enumerate(specs):
        free = part == 0
        sel = spec.selector
        if sel == "gpu":
            hit = free & (cap[:, 2] > 0)
        elif sel.endswith("%"):
            pool = np.flatnonzero(free)
            k = min(round(float(sel[:-1]) / 100.0 * n), len(pool))
            hit = np.zeros(n, dtype=bool)
            hit[rng.choice(pool, size=k, replace=False) if k else pool[:0]] = True
        else:
            m = _THRESHOLD.match(sel)
            assert m is not None  # checked by parse_node_labels
            hit = free & (cap[:, RESOURCE[m["res"]]] >= float(m["value"]))
        part[hit] = i + 1
    return part


class Partitions:
    """Per-run partition state: each node's partition and one node index per partition.

    Labels go on nodes at the first scheduling point (node capacities are known then);
    each index only ever sees its partition's nodes, so "least allocated memory first"
    (the policy's node choice) is taken among that partition's up nodes.
    """

    def __init__(self, specs: list[LabelSpec], n_nodes: int) -> None:
        self.specs = specs
        self.names = ("", *(s.name for s in specs))
        self.exclusive = np.array([True, *(s.exclusive for s in specs)])
        self.n_nodes = n_nodes
        self.node_part = np.zeros(0, dtype=np.int64)
        self.slot_cap: np.ndarray | None = None  # every slot's capacity, once bound
        self.index: list[NodeIndex] = []

    @property
    def n(self) -> int:
        """Number of partitions, DEFAULT included."""
        return len(self.names)

    def bind(self, cap: np.ndarray, rng: np.random.Generator) -> None:
        """Label the nodes (once) and build the per-partition indexes."""
        if len(self.index):
            return
        self.slot_cap = np.array(cap, dtype=np.float64)
        self.node_part = assign_nodes(self.specs, self.slot_cap, rng)
        self.index = [NodeIndex(self.n_nodes, mask=self.node_part == p)
                      for p in range(self.n)]

    def refresh(self, nodes: NodeView, rng: np.random.Generator) -> None:
        """Bring every partition's index up to date with the view."""
        self.bind(nodes.cap, rng)
        for index in self.index:
            index.refresh(nodes)

    def totals(self, nodes: NodeView) -> tuple[np.ndarray, np.ndarray]:
        """(resource, free resource) of each partition's up nodes, (P, 3) each."""
        up = np.flatnonzero(nodes.up)
        part = np.take(self.node_part, up)
        caps = np.take(nodes.cap, up, axis=0)
        free = np.maximum(caps - np.take(nodes.alloc, up, axis=0), 0.0)
        total = np.empty((self.n, 3))
        avail = np.empty((self.n, 3))
        for r in range(3):
            total[:, r] = np.bincount(part, weights=caps[:, r], minlength=self.n)
            avail[:, r] = np.bincount(part, weights=free[:, r], minlength=self.n)
        return total, avail
