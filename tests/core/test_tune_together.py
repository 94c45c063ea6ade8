"""The ranks' agreement before a CUDA graph with collectives is autotuned at precompile (Note
[every rank tunes a graph with collectives together] in core/tune_together.py), in one process:
what needs no second rank. The two-rank outcomes: tests/core/test_distributed.py."""
from __future__ import annotations

import warnings

import pytest

from precompile_nb.core import _compat
from precompile_nb.core import tune_together as tt


def test_without_a_job_or_switched_off_nothing_waits_and_the_reason_says_why(monkeypatch):
    monkeypatch.setattr(_compat, "job_store", lambda: None)
    assert "not initialized" in tt.why_not_together("all_reduce(...)", 60.0)
    monkeypatch.setenv("PRECOMPILE_NB_TUNE_TOGETHER", "off")
    assert tt.why_not_together("all_reduce(...)") == (
        "PRECOMPILE_NB_TUNE_TOGETHER=0: graphs with collectives are not tuned")


def test_a_job_of_one_rank_tunes_without_touching_the_store(monkeypatch):
    class NoStore:
        def __getattr__(self, name):
            raise AssertionError(f"store.{name} used in a job of one rank")

    monkeypatch.setattr(_compat, "job_store", lambda: (0, 1, NoStore()))
    assert tt.why_not_together("all_reduce(...)", 60.0) is None


def test_a_store_that_fails_costs_the_tuning_not_the_precompile_and_is_said(monkeypatch):
    class Broken:
        def set(self, key, value):
            raise RuntimeError("connection reset")

    monkeypatch.setattr(_compat, "job_store", lambda: (1, 2, Broken()))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        why = tt.why_not_together("all_reduce(...)", 60.0)
    assert why == "the job's key-value store failed (RuntimeError: connection reset)"
    assert [str(w.message) for w in said] == [
        f"precompile on rank 1: {why}; the load autotunes it at its first call"]


@pytest.mark.parametrize("seconds", [0.0, 60.0])
def test_precompile_on_one_rank_never_waits(monkeypatch, seconds):
    monkeypatch.setattr(_compat, "job_store", lambda: pytest.fail("the store was asked"))
    with tt.on_one_rank():
        assert tt.why_not_together("all_reduce(...)", seconds) is not None
    assert not getattr(tt._ALONE, "on", False)
