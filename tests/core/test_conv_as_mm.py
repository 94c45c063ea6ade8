"""Note [1x1 convolutions as matrix products]: the rewrite's values and layouts are aten's, and
it applies to the plain bf16 / fp16 1x1 convolutions of a depthwise-separable CNN's CUDA graph
alone."""
from __future__ import annotations

import pytest
import torch

from precompile_nb.core._compat import conv_as_mm

aten = torch.ops.aten


def _args(bias: bool, dtype=torch.bfloat16, channels_last: bool = False):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 5, 3, generator=g).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(6, 8, 1, 1, generator=g).to(dtype)
    b = torch.randn(6, generator=g).to(dtype) if bias else None
    return x, w, b


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
def test_a_1x1_convolution_as_a_product_matches_aten(bias, channels_last):
    x, w, b = _args(bias, channels_last=channels_last)
    conv = (x, w, b, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    got = conv_as_mm.convolution(*conv)
    want = aten.convolution.default(*conv)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.stride() == want.stride()  # eager's layout, so what follows keeps its own
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("mask", [[True, True, True], [False, True, False], [True, False, False]])
def test_a_1x1_convolution_backward_as_products_matches_aten_where_asked(mask, channels_last):
    x, w, _ = _args(True, channels_last=channels_last)
    grad = torch.randn(2, 6, 5, 3, generator=torch.Generator().manual_seed(1)).bfloat16()
    if channels_last:
        grad = grad.contiguous(memory_format=torch.channels_last)
    args = (grad, x, w, [6], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)
    got = conv_as_mm.convolution_backward(*args)
    want = aten.convolution_backward.default(*args)
    for asked, g, e in zip(mask, got, want):
        if not asked:
            assert g is None
            continue
        assert g.shape == e.shape and g.dtype == e.dtype
        if g.dim() == 4 and g.shape[2:] != (1, 1):  # the input's gradient: eager's layout
            assert g.stride() == e.stride()
        torch.testing.assert_close(g.float(), e.float(), rtol=3e-2, atol=5e-2)


def test_other_convolutions_are_left_to_aten():
    x, w, b = _args(False)
    # 3x3, strided, padded, grouped, float32: traced as they are
    w3 = torch.randn(6, 8, 3, 3).bfloat16()
    assert conv_as_mm.convolution(x, w3, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1) \
        is NotImplemented
    assert conv_as_mm.convolution(x, w, b, [2, 2], [0, 0], [1, 1], False, [0, 0], 1) \
        is NotImplemented
    w_g = torch.randn(8, 4, 1, 1).bfloat16()
    assert conv_as_mm.convolution(x, w_g, b, [1, 1], [0, 0], [1, 1], False, [0, 0], 2) \
        is NotImplemented
    assert conv_as_mm.convolution(x.float(), w.float(), b, [1, 1], [0, 0], [1, 1], False,
                                  [0, 0], 1) is NotImplemented


def _graph(step, *inputs):
    from precompile_nb.core.capture import capture

    return capture(step, list(inputs)).graph


class OneByOne(torch.nn.Module):
    """A depthwise-separable block: a depthwise 3x3 convolution, then a 1x1 one."""

    def __init__(self, depthwise: bool = True) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8 if depthwise else 1)
        self.b = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _train(m, x):
    loss = m(x).float().square().mean()
    loss.backward()
    return loss


def test_no_rewrite_for_a_cpu_graph_nor_when_switched_off(monkeypatch):
    m, x = OneByOne().bfloat16(), torch.randn(2, 8, 6, 6).bfloat16()
    assert conv_as_mm.plan_for(_graph(_train, m, x)) == (None, ())  # CPU: cuDNN is not involved
    monkeypatch.setenv(conv_as_mm.ENV, "0")
    assert conv_as_mm.plan_for(_graph(_train, m, x)) == (None, ())


def as_if_on_cuda(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The graph with each value's metadata on CUDA (fake tensors, same shapes, strides and
    dtypes), so a machine without a GPU sees which nodes the plan takes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        for n in gm.graph.nodes:
            v = n.meta.get("val")
            if isinstance(v, torch.Tensor):
                n.meta["val"] = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype,
                                                    device="cuda")
    return gm


def test_the_plan_names_the_1x1_convolutions_it_rewrites_and_the_report_shows_them():
    from precompile_nb.core.capture import capture
    from precompile_nb.core.schemas import CONV_1X1_AS_PRODUCTS
    from precompile_nb.tools.report import _rewrite_rows
    from precompile_nb.viewers.html import _rewrites

    m, x = OneByOne().bfloat16(), torch.randn(2, 8, 6, 6).bfloat16()
    c = capture(_train, [m, x])
    table, names = conv_as_mm.plan_for(as_if_on_cuda(c.graph))
    assert table is not None
    # the 1x1 convolution and its backward; the depthwise 3x3 one stays a convolution
    assert names == ("convolution_1", "convolution_backward")
    one_by_one = OneByOne(depthwise=False).bfloat16()  # no depthwise convolution: no rewrite
    assert conv_as_mm.plan_for(as_if_on_cuda(_graph(_train, one_by_one, x))) == (None, ())
    rows = _rewrite_rows({CONV_1X1_AS_PRODUCTS: names}, c.nodes)
    assert [(r["node"], r["target"], r["module"], r["shape"]) for r in rows] == [
        ("convolution_1", "aten.convolution.default", "m.b", [2, 4, 6, 6]),
        ("convolution_backward", "aten.convolution_backward.default", "m.b", None)]
    html = _rewrites(rows)
    assert "Graph rewrites before Inductor (2 nodes)" in html
    assert html.count(CONV_1X1_AS_PRODUCTS) == 2 and "<code>convolution_1</code>" in html
    assert _rewrites([]) == ""


def test_only_a_depthwise_separable_cnn_counts():
    from precompile_nb.core._compat.conv_layout import has_nchw_depthwise_conv

    x = torch.randn(2, 8, 6, 6)
    assert has_nchw_depthwise_conv(_graph(_train, OneByOne(), x))
    assert not has_nchw_depthwise_conv(_graph(_train, OneByOne(depthwise=False), x))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_training_step_with_1x1_convolutions_runs_them_as_products_and_matches_eager():
    from precompile_nb import precompile
    from precompile_nb.core import build
    from precompile_nb.tools.report import report_data

    torch.manual_seed(0)
    m = OneByOne().cuda().bfloat16()
    x = torch.randn(4, 8, 16, 16, device="cuda").bfloat16()
    gm = _graph(_train, m, x)
    assert conv_as_mm.plan_for(gm)[1] == ("convolution_1", "convolution_backward")
    ref = OneByOne().cuda().bfloat16()
    ref.load_state_dict(m.state_dict())
    art = build(_train, m, x)
    code, cache = art.python_code, art.cache
    rows = report_data(art)["rewrites"]  # the report says which nodes became products
    assert [(r["node"], r["module"]) for r in rows] == [("convolution_1", "m.b"),
                                                        ("convolution_backward", "m.b")]
    # only the depthwise convolution is left a convolution, forward and backward
    assert code.count("extern_kernels.convolution(") == 1
    assert code.count("aten.convolution_backward.default(") == 1
    step = precompile.load(code, cache)
    for _ in range(2):
        got, want = step(m, x), _train(ref, x)
        torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)
        for p, q in zip(m.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=5e-2, atol=5e-2)
            assert p.grad.stride() == q.grad.stride() or p.grad.shape[2:] == (1, 1)
            p.grad = q.grad = None


def _count(gm, target) -> int:
    return sum(1 for n in gm.graph.nodes if n.target is target)


def test_the_functional_retrace_with_the_rewrite_computes_what_the_graph_did():
    """The rewrite as lowering applies it (in the functional re-trace), on a CPU graph: the
    1x1 convolution and its backward are gone, the 3x3 one stays, the values are the same."""
    from precompile_nb.core import _compat
    from precompile_nb.core.capture import capture

    torch.manual_seed(0)
    m, x = OneByOne().bfloat16(), torch.randn(2, 8, 6, 6).bfloat16()
    c = capture(_train, [m, x])
    table = {aten.convolution.default: conv_as_mm.convolution,
             aten.convolution_backward.default: conv_as_mm.convolution_backward}
    plain = _compat.functionalize(c.graph, c.fake_inputs)
    rewritten = _compat.functionalize(c.graph, c.fake_inputs, rewrites=table)
    assert _count(plain, aten.convolution.default) == 2
    assert _count(rewritten, aten.convolution.default) == 1
    assert _count(plain, aten.convolution_backward.default) == 2
    assert _count(rewritten, aten.convolution_backward.default) == 1
    real = list(c.example_tensors)
    for got, want in zip(rewritten(*real), plain(*real)):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2)
