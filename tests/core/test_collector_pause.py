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


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _young_cycle(freed: list) -> None:
    """A garbage cycle in the young generation that says when the collector frees it."""
    import weakref

    c = _Cycle()
    weakref.finalize(c, freed.append, True)


def test_what_a_builds_start_allocates_is_made_old_and_the_young_garbage_before_it_freed():
    """young_made_old (Note [the collector pauses for a build]): the young garbage found at its
    start is collected as the end's collection would have; what is allocated inside (a first
    build's imports) goes to the oldest generation, which the end's collection does not walk."""
    from precompile_nb.collector import young_made_old

    freed: list = []
    with collector_paused():
        _young_cycle(freed)
        with young_made_old():
            assert freed == [True]
            made = [object(), {}]
        assert any(o is made for o in gc.get_objects(2))
        assert not any(o is made for o in gc.get_objects(0))


def test_nothing_is_made_old_without_a_pause_or_where_the_user_froze_objects(monkeypatch):
    from precompile_nb.collector import young_made_old

    def inside_a_build() -> tuple[list, list]:
        freed: list = []
        with collector_paused():
            _young_cycle(freed)
            with young_made_old():
                made = [{}]
            return freed, [any(o is made for o in gc.get_objects(0))]

    gc.disable()  # a collector the user switched off: no collection, nothing moved
    try:
        assert inside_a_build() == ([], [True])
        monkeypatch.setenv("PRECOMPILE_NB_GC_PAUSE", "0")  # the switch: no pause, nothing moved
        assert inside_a_build() == ([], [True])
        monkeypatch.delenv("PRECOMPILE_NB_GC_PAUSE")
        gc.enable()
        keep = [{}]
        gc.freeze()  # the user's frozen objects stay frozen
        try:
            before = gc.get_freeze_count()
            with collector_paused():
                with young_made_old():
                    pass
                assert gc.get_freeze_count() == before > 0
        finally:
            gc.unfreeze()
        del keep
    finally:
        gc.enable()
        gc.collect()


def test_objects_the_interpreter_froze_itself_do_not_stop_the_move(monkeypatch):
    """Note [the interpreter's own frozen objects]: Python 3.12 starts with its static types'
    tuples frozen. A count found at the import (here: made so by freezing, and told to the
    module as its import would have) still lets a build's start make its imports old; after
    it nothing is frozen, which a later build takes as nobody's freeze."""
    from precompile_nb import collector

    gc.collect()
    gc.freeze()
    try:
        monkeypatch.setattr(collector, "_OWN_FROZEN", gc.get_freeze_count())
        for _ in range(2):  # the first move thaws the interpreter's own; the second finds 0
            with collector_paused():
                with collector.young_made_old():
                    made = [{}]
                assert any(o is made for o in gc.get_objects(2))
                assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_a_freeze_made_before_the_import_is_never_thawed():
    """A process that froze its objects before importing precompile_nb (many: everything
    torch's import made) keeps them frozen through a build's start."""
    out = run_fresh("""
        import gc
        import torch
        gc.freeze()
        frozen = gc.get_freeze_count()
        from precompile_nb.collector import collector_paused, young_made_old
        with collector_paused():
            with young_made_old():
                made = [{}]
        print(gc.get_freeze_count() >= frozen, any(o is made for o in gc.get_objects(2)))
        """, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]


def test_a_first_build_leaves_inductors_objects_old_and_still_frees_its_garbage():
    out = run_fresh("""
        import gc
        import torch
        from precompile_nb import precompile
        ends = []
        gc.callbacks.append(lambda phase, info: ends.append((info["generation"], info.get(
            "collected", 0))) if phase == "stop" else None)
        code, cache = precompile(lambda x: torch.relu(x) * 2, torch.randn(8))
        from torch._inductor.compile_fx import compile_fx
        old = any(o is compile_fx for o in gc.get_objects(2))
        print(old, ends[-1][0], ends[-1][1] > 0, gc.isenabled())
        f = precompile.load(code, cache)
        torch.testing.assert_close(f(torch.ones(8)), torch.full((8,), 2.0))
        """, env={"PRECOMPILE_NB_LOWERING_REUSE": "0"}, timeout=600)  # no stored lowering taken
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "0", "True", "True"]


def test_a_build_that_can_take_a_stored_lowering_does_not_import_inductor_first(tmp_path):
    """Only a build whose lowering Inductor must make imports it at the start: one that finds
    an earlier process's lowering in the store takes it without Inductor's compile entry."""
    code = """
        import sys
        import torch
        from precompile_nb import precompile
        pair = precompile(lambda x: torch.relu(x) * 2, torch.randn(8))
        print("torch._inductor.compile_fx" in sys.modules)
        f = precompile.load(*pair)
        torch.testing.assert_close(f(torch.ones(8)), torch.full((8,), 2.0))
        """
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "PRECOMPILE_NB_LOWERING_REUSE": "1"}
    runs = [run_fresh(code, env=env, timeout=600) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert [r.stdout.split() for r in runs] == [["True"], ["False"]]
