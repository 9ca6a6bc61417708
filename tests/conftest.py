"""Shared test fixtures: where the real trace samples live (beside the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACES = REPO.parent / "shared" / "traces"


@pytest.fixture
def shared_traces() -> Path:
    """``../shared/traces`` (real samples; never copied into the repository)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not beside the repository")
    return SHARED_TRACES
