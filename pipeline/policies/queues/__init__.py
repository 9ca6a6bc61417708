"""Queue infrastructure shared by the queue-based policies (Capacity, Fair).

:mod:`~pipeline.policies.queues.tree` holds the hierarchical queue tree with absolute
shares; :mod:`~pipeline.policies.queues.placement` maps (user, trace queue) to a leaf;
:mod:`~pipeline.policies.queues.report` builds the ``queues.parquet`` table of a run.
"""

from pipeline.policies.queues.placement import (
    GroupProvider,
    HashGroups,
    LeafTable,
    MappingRule,
    QueuePlacement,
    StaticGroups,
    groups_provider,
    parse_mappings,
)
from pipeline.policies.queues.tree import (
    PERCENT,
    WEIGHT,
    QueueConfig,
    QueueTree,
    flat_tree,
    parse_inline,
)

__all__ = ["PERCENT", "WEIGHT", "GroupProvider", "HashGroups", "LeafTable", "MappingRule",
           "QueueConfig",
           "QueuePlacement", "QueueTree", "StaticGroups", "flat_tree", "groups_provider",
           "parse_inline", "parse_mappings"]
