"""Dynamic dimensions marked with torch._dynamo.mark_dynamic: one artifact serves every size,
the conditions the graph needed are decided by the example, recorded as guards and checked on
every call before any kernel (Note [guards from the example] in core/capture/marks.py)."""
from __future__ import annotations

import copy
import html
import warnings

import pytest
import torch
from torch import nn
from torch._dynamo import mark_dynamic
from torch._dynamo.decorators import mark_unbacked

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import build
from precompile_nb.tools.report import report_data
from precompile_nb.viewers import render_report_html
from tests.core.models import SmallResNet


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def bn_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)).eval()


def test_a_batchnorm_model_serves_every_batch_with_the_guard_its_graph_needs():
    m, x = bn_mlp(), torch.randn(8, 8)
    mark_dynamic(x, 0)  # no torch._check in user code: BatchNorm's own conditions are guards
    art = build(lambda m, x: m(x), m, x)
    guards = [g.text for g in art.captured.convention.guards]
    assert guards and all("x.size(0)" in g for g in guards)
    f = precompile.load(art.python_code, art.cache)
    for n in (1, 7, 64, 300):
        xi = torch.randn(n, 8)
        torch.testing.assert_close(f(m, xi), m(xi))
    report = report_data(art)
    assert [g["text"] for g in report["guards"]] == guards
    assert "guard(s) on dynamic sizes checked per call" in report["invariants"][2]["detail"]
    page = render_report_html(report)
    assert "Guards on dynamic sizes" in page and html.escape(guards[0]) in page


def test_a_resnet_style_cnn_serves_batches_1_7_64_300_without_torch_check():
    torch.manual_seed(0)
    m, x = SmallResNet().eval(), torch.randn(8, 3, 16, 16)
    mark_dynamic(x, 0)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x))
    for n in (1, 7, 64, 300):
        xi = torch.randn(n, 3, 16, 16)
        torch.testing.assert_close(f(m, xi), m(xi), atol=1e-5, rtol=1e-5)


def test_two_inputs_whose_dims_must_agree_get_an_equality_guard():
    a, b = torch.randn(8, 4), torch.randn(8, 4)
    mark_dynamic(a, 0)
    mark_dynamic(b, 0)
    art = build(lambda a, b: a + b, a, b)
    assert [g.text for g in art.captured.convention.guards] == ["a.size(0) == b.size(0)"]
    f = precompile.load(art.python_code, art.cache)
    torch.testing.assert_close(f(torch.ones(3, 4), torch.ones(3, 4)), torch.full((3, 4), 2.0))
    with pytest.raises(PrecompileError, match="breaks a condition") as ei:
        f(torch.ones(3, 4), torch.ones(5, 4))
    e = ei.value
    assert e.invariant == 3 and e.where == "a.size(0) == b.size(0)"
    assert e.actual == {"a.size(0)": 3, "b.size(0)": 5} and "mark_dynamic" in e.hint


def test_a_guard_the_example_decided_refuses_sizes_on_the_other_side():
    # the graph needs to know whether the batch is 0 (BatchNorm); the example says it is not
    m, x = bn_mlp(), torch.randn(8, 8)
    mark_dynamic(x, 0)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x))
    with pytest.raises(PrecompileError, match="breaks a condition") as ei:
        f(m, torch.randn(0, 8))
    assert "x.size(0)" in ei.value.where
    torch.testing.assert_close(f(m, torch.ones(2, 8)), m(torch.ones(2, 8)))


def test_a_range_given_to_mark_dynamic_is_checked_on_every_call():
    m, x = bn_mlp(), torch.randn(6, 8)
    mark_dynamic(x, 0, min=2, max=64)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x))
    top = torch.randn(64, 8)
    torch.testing.assert_close(f(m, top), m(top))  # the top of the range is accepted
    with pytest.raises(PrecompileError, match="out of its bounds") as ei:
        f(m, torch.randn(65, 8))
    assert ei.value.where == "x.shape[0]" and ei.value.expected == "2 <= size <= 64"


def test_a_transformer_training_step_with_a_dynamic_sequence_length():
    torch.manual_seed(0)
    enc = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    s = torch.randn(2, 6, 16)
    mark_dynamic(s, 1)

    def step(m, s):
        loss = m(s).pow(2).mean()
        loss.backward()
        return loss.detach()

    art = build(step, copy.deepcopy(enc), s)
    f = precompile.load(art.python_code, art.cache)
    lengths = (3, 6, 11)
    if "s.size(1) == 6" in [g.text for g in art.captured.convention.guards]:
        # torch 2.11's attention needs the length as a number: the dim is specialised, and
        # the artifact says so at every other length instead of computing something else
        with pytest.raises(PrecompileError, match="breaks a condition"):
            f(copy.deepcopy(enc), torch.randn(2, 3, 16))
        lengths = (6,)
    for length in lengths:
        si = torch.randn(2, length, 16)
        m1, m2 = copy.deepcopy(enc), copy.deepcopy(enc)
        torch.testing.assert_close(f(m1, si), step(m2, si), atol=1e-5, rtol=1e-5)
        for p1, p2 in zip(m1.parameters(), m2.parameters()):
            torch.testing.assert_close(p1.grad, p2.grad, atol=1e-5, rtol=1e-4)


def test_mark_unbacked_keeps_its_meaning_and_the_error_points_to_mark_dynamic():
    m, x = bn_mlp(), torch.randn(8, 8)
    mark_unbacked(x, 0)
    with pytest.raises(PrecompileError, match="branches on the dynamic dim") as ei:
        precompile(lambda m, x: m(x), m, x)
    assert "mark_dynamic(x, 0)" in ei.value.hint


@pytest.mark.parametrize("dim,fix", [(-2, "(0 for -2)"), (5, "from 0 to 1")])
def test_a_mark_on_a_dim_the_tensor_lacks_is_refused_never_dropped(dim, fix):
    x = torch.randn(8, 8)
    mark_dynamic(x, dim)  # a negative index is kept as given (torch.compile ignores it)
    with pytest.raises(PrecompileError) as ei:
        precompile(lambda m, x: m(x), bn_mlp(), x)
    e = ei.value
    assert e.invariant == 3 and e.stage == "capture" and e.where == "x"
    assert f"dim {dim} is marked dynamic" in e.what and fix in e.hint


def test_the_eager_backend_serves_mark_dynamic_with_its_guards_but_not_mark_unbacked():
    m, x = bn_mlp(), torch.randn(8, 8)
    mark_dynamic(x, 0)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x, backend="eager"))
    for n in (1, 7, 64):
        xi = torch.randn(n, 8)
        torch.testing.assert_close(f(m, xi), m(xi))
    with pytest.raises(PrecompileError, match="breaks a condition"):
        f(m, torch.randn(0, 8))
    xu = torch.randn(8, 8)
    mark_unbacked(xu, 0)
    with pytest.raises(PrecompileError, match="mark_unbacked need the inductor") as ei:
        precompile(lambda x: x * 2, xu, backend="eager")
    assert ei.value.where == "x.shape[0]" and "mark_dynamic" in ei.value.hint


def test_a_dim_the_graph_needs_as_a_number_is_specialised_and_says_so():
    x = torch.randn(8, 3)
    mark_dynamic(x, 0)
    art = build(lambda x: x * int(x.shape[0]), x)  # int(): the graph needs the value itself
    assert [g.text for g in art.captured.convention.guards] == ["x.size(0) == 8"]
    f = precompile.load(art.python_code, art.cache)
    torch.testing.assert_close(f(x), x * 8)
    with pytest.raises(PrecompileError, match="breaks a condition") as ei:
        f(torch.randn(5, 3))
    assert ei.value.where == "x.size(0) == 8"


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_sizes_in_the_result_follow_each_calls_sizes_as_in_eager(backend):
    def fn(x, y):
        return x.shape, x.size(0) // 3, {"n": y.shape[1] + x.shape[0]}, x.sum(0)

    x, y = torch.randn(8, 3), torch.randn(2, 5)
    mark_dynamic(x, 0)
    mark_dynamic(y, 1)
    f = precompile.load(*precompile(fn, x, y, backend=backend))
    for n, k in ((8, 5), (10, 9), (2, 2)):
        a, b = torch.randn(n, 3), torch.randn(2, k)
        got, want = f(a, b), fn(a, b)
        assert type(got[0]) is torch.Size and got[:3] == want[:3]
        torch.testing.assert_close(got[3], want[3])
    art = build(fn, x, y, backend="eager")
    html_ = render_report_html(report_data(art))
    assert "size <code>x.size(0) + y.size(1)</code>" in html.unescape(html_)  # the report


def test_a_count_from_data_in_the_result_is_refused_with_what_to_return_instead():
    with pytest.raises(PrecompileError) as ei:
        precompile(lambda t: (t.nonzero().shape[0], t.sum()), torch.tensor([1.0, 0.0, 2.0]),
                   backend="eager", data_guards=True)
    e = ei.value
    assert e.invariant == 3 and e.where == "fn's result[0]"
    assert "a count from tensor data" in e.hint and ".shape after the call" in e.hint


def test_a_divisibility_guard_refuses_sizes_the_graph_cannot_split():
    x = torch.randn(8, 3)
    mark_dynamic(x, 0)
    art = build(lambda x: x.reshape(-1, 2, 3).sum(1), x)  # pairs of rows: the batch is even
    assert any("%" in g.text for g in art.captured.convention.guards)
    f = precompile.load(art.python_code, art.cache)
    torch.testing.assert_close(f(torch.ones(6, 3)), torch.full((3, 3), 2.0))
    with pytest.raises(PrecompileError, match="breaks a condition") as ei:
        f(torch.ones(7, 3))
    assert "x.size(0)" in ei.value.where and ei.value.actual == {"x.size(0)": 7}
