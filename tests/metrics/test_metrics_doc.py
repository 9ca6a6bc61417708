"""docs/metrics.md documents every metric the replay writes."""

from __future__ import annotations

from pathlib import Path

from pipeline.metrics import METRICS

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_every_metric_is_documented() -> None:
    text = DOC.read_text()
    assert [name for name in METRICS if f"`{name}`" not in text] == []


def test_every_queue_fairness_column_is_documented() -> None:
    text = DOC.read_text()
    columns = ["jain_queues", "jain_users_usage", "dominant_share_of_guarantee",
               "mem_share_of_guarantee", "demand_dominant_share", "min_share_of_guarantee"]
    assert [c for c in columns if f"`{c}`" not in text] == []
