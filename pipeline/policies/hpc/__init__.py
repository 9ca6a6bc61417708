"""HPC batch scheduling of rigid jobs: first-come-first-served and EASY backfilling.

- ``fcfs``: strict first-come-first-served, no backfilling;
- ``easy``: EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001);
- ``pool``: the free-capacity bookkeeping both share (one job = one task on one node;
  the Standard Workload Format's jobs run on one pool of processors).
"""

from pipeline.policies.hpc.easy import EasyBackfill
from pipeline.policies.hpc.fcfs import Fcfs

__all__ = ["EasyBackfill", "Fcfs"]
