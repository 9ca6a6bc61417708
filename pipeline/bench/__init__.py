"""Benchmark of the replay (``bench``) and the canonical workload writers it uses."""

from pipeline.bench.run import bench
from pipeline.bench.workload import synthetic_workload, write_trace

__all__ = ["bench", "synthetic_workload", "write_trace"]
