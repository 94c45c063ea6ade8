"""Autotuning at several sizes (Note [a configuration per size] in core/tuning.py): which size
points a graph with dynamic dims is tuned at, how `tune_sizes` is checked, and how the warm
path picks a kernel's configuration by size. The tuning runs themselves need a GPU
(tests/core/test_warm_cuda.py); what decides them is checked here, on the CPU."""
from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from torch._dynamo import mark_dynamic

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import tuning, warm
from precompile_nb.core.capture import capture

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _captured(fn, *args):
    return capture(fn, args)


def _pairs_of_rows():
    x = torch.randn(8, 3)
    mark_dynamic(x, 0)
    return _captured(lambda x: x.reshape(-1, 2, 3).sum(1), x)  # guard: the batch is even


def test_a_dynamic_batch_is_tuned_at_the_example_and_the_ends_of_its_range():
    x, y = torch.randn(16, 4), torch.randn(16, 4)
    mark_dynamic(x, 0, min=2, max=64)
    mark_dynamic(y, 0, min=4, max=128)
    c = _captured(lambda x, y: (x * y).sum(1), x, y)
    dims = tuning._dynamic_dims(c, ())
    points, skipped = tuning._points(c, dims, [])
    # both batches are 16 in the example: they move together, inside both ranges
    assert points == [{}, {16: 4}, {16: 64}] and skipped == []
    assert tuning._shapes(c, dims, {16: 4}) == {"x": (4, 4), "y": (4, 4)}


def test_an_end_of_the_range_that_breaks_a_guard_or_is_too_big_is_skipped_with_why():
    c = _pairs_of_rows()
    points, skipped = tuning._points(c, tuning._dynamic_dims(c, ()), [])
    assert points == [{}]  # batch 1 is odd: the graph was captured for even batches
    guard = next(g.text for g in c.convention.guards if "%" in g.text)
    assert skipped == [({8: 1}, f"it breaks the guard {guard}")]
    x = torch.randn(4, 3)
    mark_dynamic(x, 0, min=4, max=4096)
    c = _captured(lambda x: x * 2, x)
    points, skipped = tuning._points(c, tuning._dynamic_dims(c, ()), [{4: 4096}])
    assert points == [{}, {4: 4096}]  # asked for: tuned whatever its size
    big = tuning._points(c, tuning._dynamic_dims(c, ()), [])[1]
    assert [w for _, w in big] == ["its inputs are 1024x the example's (more than 8x)"]


@pytest.mark.parametrize("sizes, says", [
    (64, "takes a list"), ("1,256", "takes a list"),
    ([0], "is not a size"), (["64"], "is not a size"), ([{"x.size(0)": 2.5}], "is not a size"),
    ([{"x.size(1)": 4}], "x.size(1) is not a dynamic dim"),
    ([3], "breaks the guard"), ([{"x.size(0)": 4, "y": 1}], "y is not a dynamic dim"),
])
def test_tune_sizes_that_cannot_be_tuned_are_an_error_naming_the_dim(sizes, says):
    x = torch.randn(8, 3)
    mark_dynamic(x, 0)
    with pytest.raises(PrecompileError, match="tune_sizes") as ei:
        precompile(lambda x: x.reshape(-1, 2, 3).sum(1), x, tune_sizes=sizes)
    e = ei.value
    assert e.invariant == 3 and e.where == "precompile(..., tune_sizes=...)"
    assert says in f"{e.actual} {e}", (says, str(e))


def test_tune_sizes_outside_the_marked_range_or_ambiguous_are_an_error():
    x = torch.randn(8, 3)
    mark_dynamic(x, 0, min=2, max=64)
    c = _captured(lambda x: x * 2, x)
    with pytest.raises(PrecompileError, match=r"outside its range \[2, 64\]"):
        tuning.asked_points(c, [128])
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    mark_dynamic(a, 0)
    mark_dynamic(a, 1)
    with pytest.raises(PrecompileError, match="give a dict per point"):
        tuning.asked_points(_captured(lambda a: a * 2, a), [4])
    assert tuning.asked_points(_captured(lambda a: a * 2, a),
                               [{"a.size(1)": 4}]) == [{16: 4}]
    del b


def test_tune_sizes_are_checked_with_the_eager_backend_too():
    x = torch.randn(8, 3)
    mark_dynamic(x, 0, min=2, max=64)
    with pytest.raises(PrecompileError, match=r"outside its range \[2, 64\]"):
        precompile(lambda x: x * 2, x, backend="eager", tune_sizes=[128])


def test_tune_sizes_on_a_cpu_graph_are_checked_and_the_artifact_works():
    x = torch.randn(8, 3)
    mark_dynamic(x, 0)
    f = precompile.load(*precompile(lambda x: x.reshape(-1, 2, 3).sum(1), x,
                                    tune_sizes=[2, 64]))
    torch.testing.assert_close(f(torch.ones(6, 3)), torch.full((3, 3), 2.0))


def test_each_point_runs_the_graph_once_on_the_examples_values_and_the_example_runs_last(
        monkeypatch):
    # the GPU's part (Inductor's autotuner) stood in for: what runs, at which sizes, on what
    import contextlib

    x = torch.arange(16.).reshape(4, 4)
    mark_dynamic(x, 0, min=2, max=16)
    c = _captured(lambda x: x * 2, x)
    c = dataclasses.replace(c, example_tensors=(x,))
    runs, modes = [], []

    @contextlib.contextmanager
    def tuning_at_sizes(kernel_vars):
        def tune(call, keep_all):
            modes.append(keep_all)
            call()
            return {}
        yield tune

    monkeypatch.setattr(tuning._compat, "tuning_at_sizes", tuning_at_sizes)
    t = tuning.autotune(c, c.fake_inputs, (), [], lambda shapes, values: runs.append(
        (shapes[0], values[0].tolist())), tuning.asked_points(c, [8]))
    assert [s for s, _ in runs] == [((8, 4), (4, 1)), ((2, 4), (4, 1)), ((16, 4), (4, 1)),
                                    ((4, 4), (4, 1))]
    assert runs[1][1] == x[:2].tolist() and runs[0][1] == torch.cat([x, x]).tolist()
    assert modes == [True, True, True, False] and t.at[0] == {"x": (4, 4)}
    assert t.kernels == (0, 0, 0, 0) and t.by_size == {} and t.skipped == ()


def test_inputs_at_a_point_are_the_examples_values_cut_or_repeated_in_its_layout():
    v = torch.arange(12.).reshape(3, 4)
    assert tuning._resized(v, (2, 4)).tolist() == v[:2].tolist()
    assert tuning._resized(v, (7, 4)).tolist() == torch.cat([v, v, v])[:7].tolist()
    nhwc = torch.randn(8, 3, 5, 5).to(memory_format=torch.channels_last)
    assert tuning._dense_like((2, 3, 5, 5), nhwc.stride()) == (
        torch.empty(2, 3, 5, 5).to(memory_format=torch.channels_last).stride())


def _rec(h, **kw):
    return {"hash": h, "function": "k", "num_warps": 4, "shared": 0, "arg_types": "OOi",
            "scratch": 0, "def_args": ["in_ptr0", "out_ptr0", "xnumel"],
            "call_args": ["in_ptr0", "out_ptr0", "xnumel"],
            "grid": {"prefix": [], "x": "xnumel", "y": "1", "z": "1"}, "device": 0,
            "cc": 90, **kw}


def test_choices_become_size_buckets_halfway_between_the_points():
    a, b = _rec("A"), _rec("B")
    # the example (4096 elements) chose A, 64 chose B, 262144 chose A again
    got = tuning._buckets([(4096, ["xnumel"], a), (64, ["xnumel"], b),
                           (262144, ["xnumel"], a), (4096, ["xnumel"], b)])
    assert got == {"numel": ["xnumel"], "buckets": [{"upto": 512, "record": b},
                                                   {"upto": None, "record": a}]}


def _sized_entry(uptos=(512, None), cubins=("B/k.cubin", "A/k.cubin")):
    return {**_rec("A"), "cubin": "A/k.cubin", "by_size": {"numel": ["xnumel"], "buckets": [
        {**_rec(c[0]), "cubin": c, "upto": u} for u, c in zip(uptos, cubins)]}}


def test_the_warm_launcher_picks_the_configuration_of_the_calls_size(monkeypatch):
    launched = []
    monkeypatch.setattr(warm._compat, "load_cubin", lambda path, *a: path)
    monkeypatch.setattr(warm, "launcher", lambda rec, function: (
        lambda in_ptr0, out_ptr0, xnumel, stream: launched.append((function, xnumel))))
    entry = _sized_entry()
    assert warm._malformed_buckets(entry, {"A/k.cubin", "B/k.cubin"}) is None
    sized = {**entry["by_size"], "buckets": [{**b, "path": "/c/" + b["cubin"]}
                                             for b in entry["by_size"]["buckets"]]}
    run = warm.sized_launcher(entry["def_args"], sized)
    for n in (1, 512, 513, 10 ** 6):
        run(None, None, n, stream=0)
    assert launched == [("/c/B/k.cubin", 1), ("/c/B/k.cubin", 512), ("/c/A/k.cubin", 513),
                        ("/c/A/k.cubin", 10 ** 6)]


def test_malformed_size_buckets_send_the_load_to_the_compile_path_with_why():
    cached = {"A/k.cubin", "B/k.cubin"}
    assert "ascending" in warm._malformed_buckets(_sized_entry((512, 64)), cached)
    assert "ascending" in warm._malformed_buckets(_sized_entry((None, None)), cached)
    assert "not in the cache" in warm._malformed_buckets(_sized_entry(), {"A/k.cubin"})
    bad = _sized_entry()
    bad["by_size"]["numel"] = ["ynumel"]
    assert "size arguments" in warm._malformed_buckets(bad, cached)
