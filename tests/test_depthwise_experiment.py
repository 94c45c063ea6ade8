"""benchmarks/depthwise_as_code.py, the experiment of writing depthwise convolutions as
per-tap sums for Inductor: the sums must be the convolution. Checked against aten's own on CPU
for every stride / padding / dilation shape the zoo's CNNs use and some they do not, forward
and every gradient; and a training step captured with the table matches eager with no
depthwise convolution left in its graph."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from benchmarks import depthwise_as_code as D
from precompile_nb import precompile

aten = torch.ops.aten

CASES = [  # (kernel, stride, padding, dilation): convnext 7x7, efficientnet 3x3 / 5x5 s1 / s2
    ((7, 7), (1, 1), (3, 3), (1, 1)),
    ((3, 3), (1, 1), (1, 1), (1, 1)),
    ((5, 5), (2, 2), (2, 2), (1, 1)),
    ((3, 3), (2, 2), (1, 1), (1, 1)),
    ((3, 3), (1, 1), (2, 2), (2, 2)),   # dilated
    ((3, 5), (2, 1), (0, 4), (1, 1)),   # padding wider than the kernel's reach
    ((1, 1), (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("k,stride,padding,dilation", CASES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_the_sums_are_the_convolution_forward_and_every_gradient(k, stride, padding, dilation,
                                                                 channels_last):
    torch.manual_seed(0)
    c = 6
    x = torch.randn(2, c, 11, 9, dtype=torch.float64)
    w = torch.randn(c, 1, *k, dtype=torch.float64)
    b = torch.randn(c, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    args = (stride, padding, dilation, False, (0, 0), c)
    want = aten.convolution(x, w, b, *args)
    got = D.convolution(x, w, b, *args)
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    g = torch.randn_like(want)
    want_grads = aten.convolution_backward(g, x, w, [c], *args, [True, True, True])
    got_grads = D.convolution_backward(g, x, w, [c], *args, [True, True, True])
    for got_t, want_t in zip(got_grads, want_grads):
        torch.testing.assert_close(got_t, want_t)
    assert got_grads[0].stride() == want_grads[0].stride()
    only_w = D.convolution_backward(g, x, w, [c], *args, [False, True, False])
    assert only_w[0] is None and only_w[2] is None
    torch.testing.assert_close(only_w[1], want_grads[1])


def test_half_precision_accumulates_in_float32_like_cudnn():
    torch.manual_seed(0)
    x = torch.randn(2, 8, 16, 16).bfloat16()
    w = torch.randn(8, 1, 7, 7).bfloat16()
    args = ((1, 1), (3, 3), (1, 1), False, (0, 0), 8)
    exact = aten.convolution(x.double(), w.double(), None, *args)
    got = D.convolution(x, w, None, *args)
    assert got.dtype == torch.bfloat16
    # one rounding to bf16 at the end: within bf16's half-ulp of the exact sum
    assert ((got.double() - exact).abs() <= exact.abs() * 2 ** -8 + 1e-6).all()


def test_other_convolutions_are_left_to_the_table_or_to_aten():
    x, w = torch.randn(1, 4, 8, 8), torch.randn(8, 2, 3, 3)  # grouped, not depthwise
    args = ((1, 1), (1, 1), (1, 1), False, (0, 0), 2)
    assert D.convolution(x, w, None, *args) is NotImplemented
    seen = []
    table = D.with_depthwise_as_code({aten.convolution.default: lambda *a: seen.append(a)})
    table[aten.convolution.default](x, w, None, *args)
    assert len(seen) == 1
    assert D.with_depthwise_as_code({})[aten.convolution.default](x, w, None, *args) \
        is NotImplemented


class _Block(nn.Module):
    """A ConvNeXt-like block: depthwise 7x7, then pointwise layers, and a strided depthwise
    downsample as efficientnet has."""

    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 7, padding=3, groups=8)
        self.pw = nn.Conv2d(8, 8, 1)
        self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        x = self.down(torch.relu(self.pw(self.dw(x))))
        return self.head(x.mean((2, 3)))


def test_a_training_step_captured_with_the_table_matches_eager_without_depthwise_convs():
    torch.manual_seed(0)
    model = _Block()
    ref = _Block()
    ref.load_state_dict(model.state_dict())
    x, y = torch.randn(2, 8, 12, 12), torch.tensor([0, 2])

    def step(model, x, y):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    code, cache = precompile(step, model, x, y, backend="eager", decompositions=D.TABLE)
    loss = precompile.load(code, cache)(model, x, y)
    torch.testing.assert_close(loss, step(ref, x, y))
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    # the 1x1 layer's forward and backward stay convolutions; the two depthwise layers' do not
    assert code.count("aten.convolution.default") == 1, code
    assert code.count("aten.convolution_backward.default") == 1, code
