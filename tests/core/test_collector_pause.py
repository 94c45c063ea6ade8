"""Note [the collector pauses for a build]: no automatic garbage collection while precompile
captures and lowers, while a load runs, or while the core is first imported; afterwards the
collector is as the user had it."""
from __future__ import annotations

import gc
import threading

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.collector import collector_paused
from tests.conftest import run_fresh

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


def _collections_during(call) -> list[int]:
    """The generation of every collection that starts while `call` runs, with the collector
    set to run at every allocation of a tracked object (unpaused, thousands of them)."""
    seen: list[int] = []

    def watch(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    old = gc.get_threshold()
    gc.callbacks.append(watch)
    gc.set_threshold(1)
    try:
        call()
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(watch)
    return seen


def test_a_load_runs_the_collector_a_few_times_at_most(monkeypatch):
    """A collector due at every allocation runs only in the steps around the paused load (and
    once at its end); unpaused it runs hundreds of times, and in a large process one of those
    runs is a full collection (Note [the collector pauses for a build])."""
    code, cache = precompile(lambda m, x: m(x).relu(), torch.nn.Linear(4, 3), torch.randn(2, 4))
    loaded = []
    assert len(_collections_during(lambda: loaded.append(precompile.load(code, cache)))) < 20
    assert gc.isenabled()
    m, x = torch.nn.Linear(4, 3), torch.randn(2, 4)
    torch.testing.assert_close(loaded[0](m, x), m(x).relu())

    monkeypatch.setenv("PRECOMPILE_NB_GC_PAUSE", "0")  # the switch leaves the collector alone
    assert len(_collections_during(lambda: precompile.load(code, cache))) > 100


def test_importing_the_core_pauses_the_collector():
    out = run_fresh("""
        import gc
        import precompile_nb.collector  # its own import is before the pause
        seen = []
        gc.callbacks.append(lambda phase, info: seen.append(phase))
        gc.set_threshold(1)
        from precompile_nb import precompile
        gc.set_threshold(700)
        print(seen.count("start"), gc.isenabled())
        """, timeout=300)
    assert out.returncode == 0, out.stderr
    collections, enabled = out.stdout.split()
    assert int(collections) < 20 and enabled == "True"  # unpaused: one per tracked object
