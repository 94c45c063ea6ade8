"""Fixtures for the viewer tests: the two recorded reports (plain JSON, no torch)."""
from __future__ import annotations

import pytest
from viewer_data import load_report


@pytest.fixture
def report_eager() -> dict:
    return load_report("eager")


@pytest.fixture
def report_inductor() -> dict:
    return load_report("inductor")


@pytest.fixture(params=["eager", "inductor"])
def report(request) -> dict:
    return load_report(request.param)
