"""Note [the collector pauses for a build]: no automatic garbage collection while precompile
captures and lowers; afterwards the collector is as the user had it."""
from __future__ import annotations

import gc
import threading

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import collector_paused

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")


def _seen_by_fn(seen: list):
    def fn(x):
        seen.append(gc.isenabled())  # runs while capture traces it
        return torch.relu(x) + 1
    return fn


def test_the_collector_is_paused_while_precompile_builds_and_restored_after(monkeypatch):
    seen: list = []
    assert gc.isenabled()
    code, cache = precompile(_seen_by_fn(seen), torch.randn(4), backend="eager")
    assert seen == [False]
    assert gc.isenabled()
    torch.testing.assert_close(precompile.load(code, cache)(torch.ones(4)), torch.full((4,), 2.))

    monkeypatch.setenv("PRECOMPILE_NB_GC_PAUSE", "0")
    seen.clear()
    precompile(_seen_by_fn(seen), torch.randn(4), backend="eager")
    assert seen == [True]


def test_a_collector_the_user_switched_off_stays_off():
    seen: list = []
    gc.disable()
    try:
        precompile(_seen_by_fn(seen), torch.randn(4), backend="eager")
        assert seen == [False] and not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_restore_the_collector_once_the_last_ends():
    first_in, second_out = threading.Event(), threading.Event()
    states = []

    def first():
        with collector_paused():
            first_in.set()
            second_out.wait(30)
            states.append(("first, after the second ended", gc.isenabled()))

    t = threading.Thread(target=first)
    t.start()
    assert first_in.wait(30)
    with collector_paused():
        states.append(("second", gc.isenabled()))
    second_out.set()
    t.join(30)
    assert states == [("second", False), ("first, after the second ended", False)]
    assert gc.isenabled()
