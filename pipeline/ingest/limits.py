"""What no real cluster trace can hold: the bounds past which adapters reject a value.

A value past one of these is a corrupt file or a unit mistake (``1e30`` run time, a node with
more memory than any machine ever built), never a measurement: the row is rejected and
counted under ``above_physical_limit:<field>`` (or the adapter's own name for it), like every
other reason, instead of reaching a replay.  The bounds are wide on purpose, so that only
the impossible is rejected:

- :data:`MAX_SPAN_S`: 30 years.  No published trace spans more (the longest Parallel Workloads
  Archive logs cover a few years; Google and Alibaba traces days to a month), so no task runs,
  waits or asks for longer, and no time from a trace's start is later.
- :data:`MAX_EPOCH_S`: the year 2200, for traces that stamp absolute times (Rumen's epoch ms).
- :data:`MAX_MACHINE_CORES` (100,000), :data:`MAX_MACHINE_MEM_MIB` (1 PiB) and
  :data:`MAX_MACHINE_GPUS` (1,024): one machine or pod never had more (the largest
  single-system-image machines have a few thousand cores and tens of TiB of memory; GPU
  servers 8 to 16 GPUs).
- :data:`MAX_PROCESSORS` (10^8): a whole HPC machine's processors (the largest have about
  10^7 cores).
- :data:`MAX_NORMALIZED`: 1.0, for traces whose capacities are fractions of their largest
  machine (Google 2019: "the capacity of a machine with this largest memory size will be
  reported as 1.0").
"""

from __future__ import annotations

YEAR_S = 365.25 * 86400.0
MAX_SPAN_S = 30 * YEAR_S
MAX_EPOCH_S = (2200 - 1970) * YEAR_S
MAX_MACHINE_CORES = 100_000
MAX_MACHINE_MEM_MIB = 2.0**30
MAX_MACHINE_GPUS = 1024
MAX_PROCESSORS = 10**8
MAX_NORMALIZED = 1.0
MAX_TASKS = 10**9  # tasks (containers) one trace can hold: Google 2019's eight cells ~1e9
REASON = "above_physical_limit"


def reason(field: str) -> str:
    """The ledger reason of a value of ``field`` past its bound."""
    return f"{REASON}:{field}"
