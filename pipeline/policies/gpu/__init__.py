"""GPU placement for GPU-sharing workloads: cluster state, fragmentation, FGD and baselines.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC 2023; semantics from the authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator, snapshot 8f3d641); see docs/semantics.md §6.

- ``devices``: ``GpuNodes`` (array state), ``Pod``, ``feasible``, ``choose_devices``, ``bind``
- ``typical``: the typical pods fragmentation is measured against
- ``frag``: compiled fragmentation kernels and FGD's per-node score
- ``base``: the ``GpuScorer`` interface and the seeded tie-breaking order
- ``fgd``, ``baselines``: the policies; ``scorers``: the ``SCORERS`` registry
- ``policy``: the registered policy names (``fgd``, ``gpu-best-fit``, ...) and the
  experiment's parameters; :mod:`pipeline.replay.gpu_loop` runs them
"""
