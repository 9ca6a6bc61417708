"""Benchmark of the replay (``bench``: :mod:`.run`), its scale series (:mod:`.scale`) and the
canonical workload writers they use (:mod:`.workload`).

Nothing is imported here, so ``python -m pipeline.bench.run`` runs its module once (runpy
warned when the package had imported it already)."""
