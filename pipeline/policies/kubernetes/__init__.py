"""Kubernetes: kube-scheduler's filter and score cycle (``kube-scheduler``).

Source: Kubernetes v1.31, ``pkg/scheduler`` (``schedule_one.go``: the scheduling cycle,
``numFeasibleNodesToFind``, ``selectHost``; ``framework/plugins/noderesources``: the
``NodeResourcesFit`` filter and scoring strategies, ``NodeResourcesBalancedAllocation``).
The rules modelled, and what is left out, are in ``docs/families/kubernetes.md``.
"""
