"""Note [a lowering made once]: precompiling a graph an earlier precompile lowered (a cell run
again, a new process) takes that lowering whole: Inductor does not run and the artifact is the
same, byte for byte; anything in the key that differs lowers afresh."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import _compat, build, lowerings
from tests.conftest import cuda, run_fresh


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _step(m, x):
    loss = torch.tanh(m(x)).square().mean()
    loss.backward()
    return loss


def _counted(monkeypatch, name: str) -> list[int]:
    """A list that grows by one at each call of the door's `name`."""
    runs: list[int] = []
    original = getattr(_compat, name)

    def counted(*a, **k):
        runs.append(1)
        return original(*a, **k)

    monkeypatch.setattr(_compat, name, counted)
    return runs


@pytest.fixture
def inductor_runs(monkeypatch, tmp_path):
    """A store of its own for this test, and the list of every Inductor compile of a graph."""
    store = str(tmp_path / "lowerings")
    monkeypatch.setattr(_compat, "lowering_store_dir", lambda: store)
    return _counted(monkeypatch, "inductor_compile")


def _eager_step(m, x):
    m.zero_grad()
    loss = _step(m, x)
    return loss, [p.grad.clone() for p in m.parameters()]


def _check_like_eager(art, m, x) -> None:
    want, grads = _eager_step(m, x)
    m.zero_grad()
    got = precompile.load(art.python_code, art.cache)(m, x)
    torch.testing.assert_close(got, want)
    for p, g in zip(m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)


def test_precompiling_the_same_graph_again_runs_no_inductor_and_gives_the_same_artifact(
        inductor_runs):
    m, x = _mlp(), torch.randn(5, 8)
    first = build(_step, m, x)
    assert inductor_runs == [1] and lowerings.REUSED not in first.lowered.builds
    again = build(_step, m, x)
    assert inductor_runs == [1]  # taken whole: Inductor did not run again
    assert again.lowered.builds == {lowerings.REUSED: 1}
    assert again.python_code == first.python_code and again.cache == first.cache
    assert again.lowered.kernels == first.lowered.kernels
    _check_like_eager(again, m, x)


@cuda
def test_a_cuda_graph_is_taken_whole_with_its_launch_records_and_tuning(inductor_runs):
    m, x = _mlp().cuda(), torch.randn(64, 8, device="cuda")
    first = build(_step, m, x)
    again = build(_step, m, x)
    assert inductor_runs == [1] and again.lowered.builds == {lowerings.REUSED: 1}
    assert again.python_code == first.python_code and again.cache == first.cache
    assert again.lowered.launches == first.lowered.launches
    assert again.lowered.tuning == first.lowered.tuning
    _check_like_eager(again, m, x)


def test_other_sizes_or_other_inductor_settings_lower_afresh(inductor_runs):
    m = _mlp()
    first = build(_step, m, torch.randn(5, 8))
    other = build(_step, m, torch.randn(7, 8))  # another example size
    assert len(inductor_runs) == 2 and lowerings.REUSED not in other.lowered.builds
    _check_like_eager(other, m, torch.randn(7, 8))
    with torch._inductor.config.patch({"cpp.simdlen": 1}):  # no vector code
        scalar = build(_step, m, torch.randn(5, 8))
    assert len(inductor_runs) == 3 and scalar.python_code != first.python_code
    _check_like_eager(scalar, m, torch.randn(5, 8))


def test_a_damaged_entry_is_lowered_again_and_kept_afresh(inductor_runs):
    m, x = _mlp(), torch.randn(5, 8)
    first = build(_step, m, x)
    (entry,) = [os.path.join(d, f) for d, _, fs in os.walk(_compat.lowering_store_dir())
                for f in fs if f.endswith(".lowering")]
    data = bytearray(open(entry, "rb").read())
    data[-1] ^= 0xFF  # a kernel binary's last byte
    open(entry, "wb").write(bytes(data))
    again = build(_step, m, x)
    assert len(inductor_runs) == 2 and lowerings.REUSED not in again.lowered.builds
    assert again.python_code == first.python_code
    _check_like_eager(again, m, x)
    assert build(_step, m, x).lowered.builds == {lowerings.REUSED: 1}  # kept afresh
    assert len(inductor_runs) == 2


def test_a_dynamic_graph_is_taken_whole_and_serves_every_size(inductor_runs):
    m, x = _mlp(), torch.randn(5, 8)
    torch._dynamo.mark_dynamic(x, 0)
    first = build(_step, m, x)
    torch._dynamo.mark_dynamic(x, 0)
    again = build(_step, m, x)
    assert inductor_runs == [1] and again.lowered.builds == {lowerings.REUSED: 1}
    assert again.python_code == first.python_code
    for n in (3, 11):
        _check_like_eager(again, m, torch.randn(n, 8))


def test_a_record_that_would_not_read_back_the_same_is_not_kept(inductor_runs):
    m, x = _mlp(), torch.randn(5, 8)
    first = build(_step, m, x)
    odd = dataclasses.replace(first.lowered, launches={"k": {"x": float("inf")}})
    entry = lowerings.entry_path(_compat.lowering_store_dir(), "0" * 64)
    lowerings.keep(entry, odd)  # repr(inf) is no literal: nothing is kept
    assert lowerings.taken(entry, odd.convention, {}, 0.0) is None
    assert not os.path.exists(entry)


def test_a_graph_torch_cannot_key_is_lowered_every_time(inductor_runs, monkeypatch):
    from torch._inductor import codecache

    def refuse(*a, **k):
        raise AssertionError("torch could not key this graph")

    monkeypatch.setattr(codecache, "compiled_fx_graph_hash", refuse)
    m, x = _mlp(), torch.randn(5, 8)
    for _ in range(2):
        art = build(_step, m, x)
        assert lowerings.REUSED not in art.lowered.builds
        _check_like_eager(art, m, x)
    assert len(inductor_runs) == 2


def test_a_store_that_cannot_be_written_costs_only_the_saving(monkeypatch, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(_compat, "lowering_store_dir", lambda: str(blocker / "lowerings"))
    m, x = _mlp(), torch.randn(5, 8)
    art = build(_step, m, x)
    _check_like_eager(art, m, x)


def test_the_store_drops_the_entries_used_longest_ago_past_its_size(monkeypatch, tmp_path):
    store = tmp_path / "store"
    for i, name in enumerate(("old", "mid", "new")):
        sub = store / name[:2]
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / (name + ".lowering")
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + i, 1000 + i))
    monkeypatch.setattr(lowerings, "_STORE_BYTES", 250)
    lowerings._trim(str(store))
    left = sorted(p.name for p in store.rglob("*.lowering"))
    assert left == ["mid.lowering", "new.lowering"]


def test_reuse_is_off_where_the_environment_says_so(monkeypatch):
    for name in ("PRECOMPILE_NB_LOWERING_REUSE", "PRECOMPILE_NB_KERNEL_REUSE"):
        monkeypatch.setenv(name, "off")
        assert _compat.lowering_store_dir() is None
        monkeypatch.delenv(name)
    store = _compat.lowering_store_dir()
    assert store is not None and "precompile_nb_lowerings" in store


_CHILD = """
import hashlib, json, os, sys, torch
sys.path.insert(0, {root!r})
from precompile_nb.core import build, lowerings
from precompile_nb.core import _compat
from tests.core.test_lowering_store import {net}, _step
traced = []
functionalize = _compat.functionalize
_compat.functionalize = lambda *a, **k: traced.append(1) or functionalize(*a, **k)
m, x = {net}(), torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
art = build(_step, m, x)
out = {out!r}
open(out + ".py", "w").write(art.python_code)
open(out + ".bin", "wb").write(art.cache)
print(json.dumps({{"reused": lowerings.REUSED in art.lowered.builds, "traced": len(traced)}}))
"""


@pytest.mark.parametrize("net", ["_mlp", "_bn_net"])
def test_a_new_process_takes_the_lowering_an_earlier_one_made(tmp_path, net):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    said = []
    for name in ("first", "again"):
        p = run_fresh(_CHILD.format(root=root, out=str(tmp_path / name), net=net), env=env,
                      cwd=root)
        assert p.returncode == 0, p.stderr[-3000:]
        said.append(json.loads(p.stdout.strip().splitlines()[-1]))
    # the second process neither lowers nor functionalizes (Note [a hit before functionalizing])
    assert [(s["reused"], s["traced"]) for s in said] == [(False, 1), (True, 0)]
    code = (tmp_path / "again.py").read_text()
    assert code == (tmp_path / "first.py").read_text()
    assert (tmp_path / "again.bin").read_bytes() == (tmp_path / "first.bin").read_bytes()
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    art = type("A", (), {"python_code": code, "cache": (tmp_path / "again.bin").read_bytes()})
    if net == "_mlp":
        _check_like_eager(art, _mlp(), x)
    else:
        _check_bn_like_eager(art, x)


# Note [a hit before functionalizing]

def _bn_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 4)).train()


@pytest.fixture
def functionalized(monkeypatch):
    """The list of every functionalizing re-trace of a captured graph."""
    return _counted(monkeypatch, "functionalize")


def _check_bn_like_eager(art, x) -> None:
    """Loss, grads and BatchNorm's running statistics as eager's, from the same start."""
    want_m, got_m = _bn_net(), _bn_net()
    want, grads = _eager_step(want_m, x)
    got = precompile.load(art.python_code, art.cache)(got_m, x)
    torch.testing.assert_close(got, want)
    for p, g in zip(got_m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    for a, b in zip(got_m.buffers(), want_m.buffers()):
        torch.testing.assert_close(a, b)


def test_a_graph_with_writes_found_again_is_not_functionalized(inductor_runs, functionalized):
    x = torch.randn(5, 8)
    first = build(_step, _bn_net(), x)  # BatchNorm writes its statistics: re-traced
    assert inductor_runs == [1] and functionalized == [1]
    again = build(_step, _bn_net(), x)
    assert inductor_runs == [1] and functionalized == [1]  # neither ran again
    assert again.lowered.builds == {lowerings.REUSED: 1}
    assert again.python_code == first.python_code and again.cache == first.cache
    assert again.lowered.convention == first.lowered.convention
    _check_bn_like_eager(again, x)


def _store_files(suffix: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(_compat.lowering_store_dir())
            for f in fs if f.endswith(suffix)]


def test_a_record_whose_entry_is_gone_lowers_the_whole_way_and_keeps_both(
        inductor_runs, functionalized):
    x = torch.randn(5, 8)
    first = build(_step, _bn_net(), x)
    for entry in _store_files(".lowering"):
        os.unlink(entry)  # as the store's trim would
    again = build(_step, _bn_net(), x)
    assert inductor_runs == [1, 1] and functionalized == [1, 1]
    assert again.python_code == first.python_code
    _check_bn_like_eager(again, x)
    assert build(_step, _bn_net(), x).lowered.builds == {lowerings.REUSED: 1}
    assert inductor_runs == [1, 1] and functionalized == [1, 1]


def test_a_damaged_record_is_dropped_and_the_entry_found_the_longer_way(
        inductor_runs, functionalized):
    x = torch.randn(5, 8)
    first = build(_step, _bn_net(), x)
    (record,) = _store_files(".captured")
    text = open(record, "rb").read()
    for damage in (text[:-7], text.replace(b"'entry': '", b"'entry': '../")):
        open(record, "wb").write(damage)
        again = build(_step, _bn_net(), x)  # the record read fails: functionalized, entry found
        assert again.lowered.builds == {lowerings.REUSED: 1} and len(inductor_runs) == 1
        assert again.python_code == first.python_code
        assert open(record, "rb").read() == text  # kept afresh
    assert functionalized == [1, 1, 1]
    _check_bn_like_eager(again, x)


def test_the_same_graph_with_other_results_is_not_taken_for_the_first(inductor_runs):
    m, x = _mlp(), torch.randn(5, 8)
    as_tensor = build(_step, m, x)
    as_list = build(lambda m, x: [_step(m, x)], m, x)  # the same ATen graph, another result
    assert isinstance(precompile.load(as_list.python_code, as_list.cache)(m, x), list)
    assert not isinstance(precompile.load(as_tensor.python_code, as_tensor.cache)(m, x), list)


def test_the_switch_functionalizes_first_and_still_finds_the_same_entry(
        inductor_runs, functionalized, monkeypatch):
    x = torch.randn(5, 8)
    first = build(_step, _bn_net(), x)  # record and entry kept, switch on
    monkeypatch.setenv("PRECOMPILE_NB_CAPTURED_RECORD", "0")
    again = build(_step, _bn_net(), x)  # the same entry, found the longer way
    assert again.lowered.builds == {lowerings.REUSED: 1} and inductor_runs == [1]
    assert functionalized == [1, 1] and again.python_code == first.python_code
    _check_bn_like_eager(again, x)


def test_the_same_step_on_inputs_that_share_memory_or_not_computes_eagers_each(
        inductor_runs):
    def write_then_read(a, b):
        a.add_(1)
        return b * 2

    base = torch.zeros(8)
    shared = precompile.load(*precompile(write_then_read, base, base))
    apart = precompile.load(*precompile(write_then_read, torch.zeros(8), torch.ones(8)))
    x = torch.zeros(8)
    torch.testing.assert_close(shared(x, x), torch.full((8,), 2.0))  # b saw a's write
    torch.testing.assert_close(apart(torch.zeros(8), torch.zeros(8)), torch.zeros(8))
