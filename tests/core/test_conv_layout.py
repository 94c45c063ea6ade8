"""Which graphs keep eager's NCHW convolutions on CUDA (Note [depthwise convolutions keep
NCHW]): an inference graph with a depthwise convolution, where cuDNN's first call in
channels_last costs seconds in every fresh process. The choice itself is applied on CUDA only
(benchmarks/conv_layout.py measures it on the GPU); here, what the rule recognises."""
from __future__ import annotations

import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from precompile_nb.core import _compat


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


def test_the_users_layout_setting_reaches_inductor_for_a_training_graph(monkeypatch):
    """docs/differences.md: a user who wants a training step's fast first call over its
    faster steps precompiles inside config.patch(layout_optimization=False); precompile_nb
    passes it on (and, left alone, passes Inductor's default on)."""
    import torch._inductor.compile_fx as cf
    from torch._inductor import config

    from precompile_nb import precompile
    seen = []
    real = cf.compile_fx

    def spy(*a, **k):
        seen.append(config.layout_optimization)
        return real(*a, **k)

    monkeypatch.setattr(cf, "compile_fx", spy)
    m, x = _model(groups=1), torch.randn(2, 4, 8, 8)

    def step(m, x):
        m(x).sum().backward()
        return m[0].weight.grad

    default = config.layout_optimization
    with config.patch(layout_optimization=not default):
        precompile(step, m, x)
    precompile(step, m, x)
    assert seen == [not default, default], seen
