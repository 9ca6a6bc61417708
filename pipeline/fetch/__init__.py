"""The fetch stage: download the official public files of a trace, resumable and verified."""

from pipeline.fetch.datasets import DATASETS, select
from pipeline.fetch.download import fetch

__all__ = ["DATASETS", "fetch", "select"]
