"""Which graphs keep eager's NCHW convolutions on CUDA (Note [depthwise convolutions keep
NCHW]): an inference graph with a depthwise convolution, where cuDNN's first call in
channels_last costs seconds in every fresh process. The choice itself is applied on CUDA only
(benchmarks/conv_layout.py measures it on the GPU); here, what the rule recognises. And what a
training graph's backward convolutions read (Note [backward convolutions see channels_last]):
which tensors Inductor is told are channels_last, and that results stay eager's."""
from __future__ import annotations

import contextlib
import copy
import re

import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from precompile_nb.core import _compat

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")


def _model(groups: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=groups), nn.ReLU(),
                         nn.Conv2d(4, 8, 1))


def test_depthwise_inference_graph_keeps_nchw_but_training_and_dense_graphs_do_not():
    x = torch.randn(2, 4, 8, 8)
    depthwise, dense = _model(groups=4), _model(groups=1)
    with torch.no_grad():
        assert _compat.has_depthwise_conv_and_no_backward(make_fx(depthwise)(x))
        assert not _compat.has_depthwise_conv_and_no_backward(make_fx(dense)(x))

    def step(x):
        depthwise(x).sum().backward()
        return depthwise[0].weight.grad

    assert not _compat.has_depthwise_conv_and_no_backward(make_fx(step)(x))


def test_a_cpu_training_step_compiles_in_nchw_unless_the_user_forces_channels_last(
        monkeypatch):
    """Note [CPU training keeps NCHW]; docs/differences.md: precompiling inside
    config.patch(force_layout_optimization=True) brings Inductor's channels_last back, and an
    inference graph gets Inductor's own choice, or the user's."""
    import torch._inductor.compile_fx as cf
    from torch._inductor import config

    from precompile_nb import precompile
    seen = []
    real = cf.compile_fx

    def spy(*a, **k):
        seen.append((config.layout_optimization, config.force_layout_optimization))
        return real(*a, **k)

    monkeypatch.setattr(cf, "compile_fx", spy)
    m, x = _model(groups=1), torch.randn(2, 4, 8, 8)

    def step(m, x):
        m(x).sum().backward()
        return m[0].weight.grad

    default = config.layout_optimization
    precompile(step, m, x)
    with config.patch(force_layout_optimization=True):
        precompile(step, m, x)
    with torch.no_grad():
        precompile(lambda m, x: m(x), m, x)
        with config.patch(layout_optimization=not default):
            precompile(lambda m, x: m(x), m, x)
    assert seen == [(False, False), (default, True), (default, False),
                    (not default, False)], seen


# ---- Note [backward convolutions see channels_last] ------------------------------------------

def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 4))


def _training_inputs(m: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    return [x, *m.parameters(), *m.buffers()]


def _training_graph(m: nn.Module, x: torch.Tensor) -> torch.fx.GraphModule:
    """The step's graph with the module's tensors as inputs (a precompiled step's shape):
    the two convolution weights' gradients."""
    names = [n for n, _ in m.named_parameters()] + [n for n, _ in m.named_buffers()]

    def step(x, *tensors):
        state = dict(zip(names, tensors))
        out = torch.func.functional_call(m, state, (x,))
        return torch.autograd.grad(out.sum(), [state["0.weight"], state["3.weight"]])

    return make_fx(step, tracing_mode="fake")(*_training_inputs(m, x))


def _wide_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 96, 3, padding=1), nn.BatchNorm2d(96), nn.ReLU(),
                         nn.Conv2d(96, 96, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(96, 4))


def test_a_training_steps_layout_is_what_inductors_training_rule_decides(monkeypatch):
    """Note [a training step's layout, by torch.compile's rule]: a step whose convolutions
    all have 64 channels or fewer keeps eager's NCHW (torch.compile's rule for its forward
    graph), a wider one gets channels_last; a graph with no backward is left to Inductor.
    The tensors are on the meta device: a GPU's graph without a GPU (for CPU tensors
    Inductor says channels_last to every graph before any rule)."""
    x = torch.randn(2, 3, 8, 8, device="meta")
    small = _training_graph(_cnn().to("meta"), x)
    assert _compat.training_step_layout(small) is False
    assert _compat.training_step_layout(_training_graph(_wide_cnn().to("meta"), x)) is True
    with torch.no_grad():
        assert _compat.training_step_layout(make_fx(_cnn().to("meta"))(x)) is None
    monkeypatch.setenv("PRECOMPILE_NB_TRAINING_LAYOUT", "0")
    assert _compat.training_step_layout(small) is None


def test_inductor_decides_a_training_steps_layout_by_the_training_rule_while_we_lower():
    """Inductor's own decision, asked as it asks it when it lowers our graph (which it sees
    as inference: channels_last for the small CNN), gives the training rule's NCHW inside
    the lowering, on that thread only, and its own answer again after."""
    import threading

    from torch._inductor.graph import GraphLowering

    from precompile_nb.core._compat.conv_layout import training_steps_by_the_training_rule

    x = torch.randn(2, 3, 8, 8, device="meta")
    small = _training_graph(_cnn().to("meta"), x)
    assert GraphLowering.decide_layout_opt(small, is_inference=True) is True
    other: list[bool] = []
    with training_steps_by_the_training_rule():
        assert GraphLowering.decide_layout_opt(small, is_inference=True) is False
        t = threading.Thread(target=lambda: other.append(
            GraphLowering.decide_layout_opt(small, is_inference=True)))
        t.start()
        t.join()
    assert other == [True]
    assert GraphLowering.decide_layout_opt(small, is_inference=True) is True


def _conv_backward_args(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [a for n in gm.graph.nodes if n.target is torch.ops.aten.convolution_backward.default
            for a in n.args[:3] if isinstance(a, torch.fx.Node)]


def test_backward_convolutions_read_channels_last_only_where_the_graph_computes_the_tensor():
    gm = _training_graph(_cnn(), torch.randn(2, 3, 8, 8))
    args = _conv_backward_args(gm)
    assert args and all(a.meta["val"].is_contiguous() for a in args)
    assert _compat.backward_convolutions_see_channels_last(gm, is_inference=True,
                                                          layout_opt=False) == 0
    changed = _compat.backward_convolutions_see_channels_last(gm, is_inference=True,
                                                             layout_opt=True)
    assert changed > 0
    returned = set(next(n for n in gm.graph.nodes if n.op == "output").all_input_nodes)
    for a in args:
        val = a.meta["val"]
        if a.op == "placeholder" or a in returned:
            assert val.is_contiguous(), a  # the caller's strides, and eager's for a result
        elif val.dim() == 4 and val.size(1) > 1 and val.shape[2:].numel() > 1:
            assert val.is_contiguous(memory_format=torch.channels_last), a
    assert sum(a.op != "placeholder" and a not in returned for a in args) >= changed


def _buffers_4d(source: str, channels_last: bool) -> list[tuple[str, ...]]:
    """The 4-D buffers a generated module allocates in NCHW, or in channels_last (channels
    and spatial size > 1)."""
    return [b for b in re.findall(r"empty_strided_\w+\(\((\d+), (\d+), (\d+), (\d+)\), "
                                  r"\((\d+), (\d+), (\d+), (\d+)\)", source)
            if (b[5] == "1") == channels_last and int(b[1]) > 1 and int(b[2]) * int(b[3]) > 1]


def test_a_graph_whose_backward_convolutions_read_channels_last_computes_eagers_values():
    """Inductor (here on the CPU, C++ kernels) compiles the graph with the pass to the same
    parameter gradients as eager's step, in eager's strides, with fewer NCHW copies."""
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    x = torch.randn(2, 3, 8, 8)
    m = _cnn()
    gm = _training_graph(m, x)
    m(x).sum().backward()
    sources = {}
    for marked in (False, True):
        def inner(g, inputs, **kw):
            with (_compat.backward_convolutions_in_channels_last(
                    is_inference=kw.get("is_inference", False), layout_opt=kw.get("layout_opt"))
                  if marked else contextlib.nullcontext()):
                c = compile_fx_inner(g, inputs, **kw)
            sources[marked] = c.source_code
            return c

        inputs = [t.detach().clone() for t in _training_inputs(m, x)]
        got = compile_fx(copy.deepcopy(gm), inputs, inner_compile=inner)(*inputs)
        for g, ref in zip(got, (m[0].weight.grad, m[3].weight.grad)):
            assert g.stride() == ref.stride()
            torch.testing.assert_close(g, ref, rtol=1e-4, atol=1e-4)
    nchw = {k: _buffers_4d(v, channels_last=False) for k, v in sources.items()}
    assert len(nchw[True]) < len(nchw[False]), sources


def sgd_step(lr: float, autocast: str | None = None):
    """A training step with SGD inside fn (no gradient is returned), optionally under
    autocast (bfloat16) on the device named."""
    def step(m, x):
        with (torch.autocast(autocast, dtype=torch.bfloat16) if autocast
              else contextlib.nullcontext()):
            loss = m(x).float().square().mean()
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():
                p.sub_(lr * p.grad)
                p.grad = None
        return loss
    return step


def assert_one_layout_and_eagers_steps(m_ref: nn.Module, x: torch.Tensor, step, tol: float,
                                       layout: str = "channels_last"):
    """The precompiled `step` allocates its 4-D buffers in one layout: channels_last on the
    GPU (no NCHW copy, Note [backward convolutions see channels_last]), eager's NCHW on the
    CPU (Note [CPU training keeps NCHW]); and three steps of it match eager's, losses and
    parameters."""
    from precompile_nb import precompile
    from precompile_nb.core import build

    art = build(step, copy.deepcopy(m_ref), x)
    assert _buffers_4d(art.python_code, channels_last=layout != "channels_last") == []
    f = precompile.load(art.python_code, art.cache)
    m_nb = copy.deepcopy(m_ref)
    for _ in range(3):
        torch.testing.assert_close(f(m_nb, x), step(m_ref, x), rtol=tol, atol=tol)
    for p, q in zip(m_nb.parameters(), m_ref.parameters()):
        torch.testing.assert_close(p, q, rtol=tol, atol=tol)


def test_a_precompiled_cpu_cnn_training_step_keeps_eagers_layout_and_eagers_steps():
    """What a user gets on the CPU: the precompiled step computes in NCHW, as eager does (no
    channels_last copy of any tensor), and its steps match eager's."""
    assert_one_layout_and_eagers_steps(_cnn(), torch.randn(4, 3, 8, 8), sgd_step(0.1), 1e-4,
                                       layout="nchw")


def test_a_users_own_post_grad_pass_is_left_in_place_and_ours_added_otherwise():
    """docs/differences.md: with the user's torch._inductor.config.post_grad_custom_post_pass
    set, that pass runs and the layout pass does not; without it, the layout pass is set only
    while one graph compiles."""
    from torch._inductor import config

    def users_pass(graph):
        return None

    with config.patch(post_grad_custom_post_pass=users_pass):
        with _compat.backward_convolutions_in_channels_last(is_inference=True, layout_opt=None):
            assert config.post_grad_custom_post_pass is users_pass
    assert config.post_grad_custom_post_pass is None
    with _compat.backward_convolutions_in_channels_last(is_inference=True, layout_opt=None):
        ours = config.post_grad_custom_post_pass
        assert ours is not None and ours.uuid() is not None
    assert config.post_grad_custom_post_pass is None


# ---- Note [depthwise convolutions of a CUDA training step run in NCHW] ------------------------

def _depthwise_block() -> nn.Module:
    """An inverted-residual block as in efficientnet / mobilenet: 1x1, BN, SiLU, depthwise
    3x3, BN, SiLU, 1x1, then a linear head; 96 channels inside, so that Inductor's rule for
    training lays it out in channels_last (Note [a training step's layout, by
    torch.compile's rule])."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(8, 96, 1), nn.BatchNorm2d(96), nn.SiLU(),
                         nn.Conv2d(96, 96, 3, padding=1, groups=96), nn.BatchNorm2d(96),
                         nn.SiLU(), nn.Conv2d(96, 8, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))


class _ConvLayouts(torch.utils._python_dispatch.TorchDispatchMode):
    """Each convolution a call runs: (backward?, depthwise?, its input in NCHW?)."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[bool, bool, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func in (aten.convolution.default, aten.convolution_backward.default):
            backward = func is aten.convolution_backward.default
            groups = args[9] if backward else args[8]
            x = args[1] if backward else args[0]
            self.rows.append((backward, groups > 1, x.is_contiguous()))
        return func(*args, **(kwargs or {}))


def assert_depthwise_nchw_and_the_rest_channels_last(rows: list[tuple[bool, bool, bool]]):
    """Every depthwise convolution, forward and backward, read NCHW; every other forward one
    read channels_last, and so did the backward of the one inside the graph (the first
    convolution's backward reads the caller's NCHW input where Inductor keeps a graph input's
    strides, 2.11)."""
    assert {nchw for _, depthwise, nchw in rows if depthwise} == {True}, rows
    assert {nchw for backward, depthwise, nchw in rows if not depthwise and not backward} == \
        {False}, rows
    assert False in {nchw for backward, depthwise, nchw in rows if not depthwise and backward}


def small_cnn_step_layouts(device: str) -> list[tuple[bool, bool, bool]]:
    """The small CNN's training step precompiled, loaded and run once under _ConvLayouts;
    its gradients must be eager's (TF32 off: both layouts to fp32's rounding)."""
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        return _layouts_and_eagers_grads(_cnn().to(device), torch.randn(2, 3, 8, 8,
                                                                         device=device))


def depthwise_layouts_and_eagers_grads(device: str, force: bool = False
                                       ) -> list[tuple[bool, bool, bool]]:
    """Precompile the block's training step as Inductor lays it out (channels_last), or with
    channels_last forced by the user, load it, and run it once under _ConvLayouts; its
    gradients must be eager's."""
    from torch._inductor import config

    with config.patch(force_layout_optimization=force):
        return _layouts_and_eagers_grads(_depthwise_block().to(device),
                                         torch.randn(4, 8, 10, 10, device=device))


def _layouts_and_eagers_grads(m: nn.Module, x: torch.Tensor) -> list[tuple[bool, bool, bool]]:
    """m's training step precompiled (under the caller's settings), loaded and run once
    under _ConvLayouts: its convolutions' layouts; its gradients must be eager's."""
    from precompile_nb import precompile

    def step(m, x):
        m(x).square().mean().backward()
        return [p.grad for p in m.parameters()]

    f = precompile.load(*precompile(step, copy.deepcopy(m), x))
    with _ConvLayouts() as seen:
        got = f(copy.deepcopy(m), x)
    for g, ref in zip(got, step(m, x)):
        torch.testing.assert_close(g, ref, rtol=1e-4, atol=1e-4)
    return seen.rows


def test_depthwise_convolutions_run_in_nchw_where_the_rule_acts_and_the_step_is_eagers(
        monkeypatch):
    """On the GPU the rule acts for CUDA depthwise convolutions only; here it is let act on
    the CPU to see its effect (the device list it reads, and Inductor's own channels_last for
    a CPU training graph, Note [CPU training keeps NCHW] set aside): the depthwise
    convolution, forward and backward, reads NCHW while the 1x1 ones keep channels_last, and
    the gradients are eager's. PRECOMPILE_NB_DEPTHWISE_NCHW=0, or channels_last forced by
    the user, gives every convolution channels_last."""
    from precompile_nb.core._compat import conv_layout

    monkeypatch.setattr(conv_layout, "_NCHW_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(conv_layout, "keeps_eager_layout", lambda gm, inputs: False)
    assert_depthwise_nchw_and_the_rest_channels_last(depthwise_layouts_and_eagers_grads("cpu"))
    rows = depthwise_layouts_and_eagers_grads("cpu", force=True)
    assert {nchw for _, _, nchw in rows} == {False}, rows
    monkeypatch.setenv("PRECOMPILE_NB_DEPTHWISE_NCHW", "0")
    rows = depthwise_layouts_and_eagers_grads("cpu")
    assert {nchw for _, _, nchw in rows} == {False}, rows


def test_the_nchw_rule_takes_depthwise_kernels_up_to_7x7_and_leaves_9x9_to_channels_last(
        monkeypatch):
    """The rule acts on the depthwise kernel sizes it was measured on (up to ConvNeXt's 7x7);
    a 9x9 one keeps Inductor's channels_last."""
    from precompile_nb import precompile
    from precompile_nb.core._compat import conv_layout

    monkeypatch.setattr(conv_layout, "_NCHW_DEVICES", ("cpu", "cuda"))
    monkeypatch.setattr(conv_layout, "keeps_eager_layout", lambda gm, inputs: False)
    for k, nchw in ((7, True), (9, False)):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, k, padding=k // 2, groups=8))
        x = torch.randn(2, 8, 9, 9)

        def step(m, x):
            m(x).square().mean().backward()
            return m[1].weight.grad

        f = precompile.load(*precompile(step, copy.deepcopy(m), x))
        with _ConvLayouts() as seen:
            got = f(copy.deepcopy(m), x)
        torch.testing.assert_close(got, step(m, x), rtol=1e-4, atol=1e-4)
        assert {n for _, depthwise, n in seen.rows if depthwise} == {nchw}, (k, seen.rows)


def test_the_report_says_the_convolutions_layout_and_what_decided_it():
    """What the summary shows: a CPU inference CNN in channels_last by Inductor's rule for
    inference, a CPU training step in NCHW with layout optimization off (Note [CPU training
    keeps NCHW]), an MLP nothing."""
    from precompile_nb.core import build
    from precompile_nb.tools.report import report_data

    m, x = _cnn(), torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        infer = report_data(build(lambda m, x: m(x), m.eval(), x))["compiled_in"]
    assert infer["conv_layout"] == ["channels_last", "inference"]
    step = report_data(build(sgd_step(0.1), _cnn(), x))["compiled_in"]
    assert step["conv_layout"] == ["NCHW", "off"]
    mlp = report_data(build(lambda m, x: m(x), nn.Linear(4, 2), torch.randn(3, 4)))
    assert mlp["compiled_in"]["conv_layout"] is None
