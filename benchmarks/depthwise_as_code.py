"""An experiment, kept with its result: depthwise convolutions written as per-tap sums, so
that Inductor generates kernels for them instead of calling cuDNN (issue 24's two CNN training
steps, whose warm start is cuDNN's first call). Not used by precompile_nb: as measured below,
it costs more than it saves. To try it on a model:

    from benchmarks.depthwise_as_code import TABLE
    code, cache = precompile(step, model, x, decompositions=TABLE)

(capture applies the table, so the training step's backward is written as sums too).

Why (benchmarks/conv_first_call.py, H200, cuDNN 9, eager's first call split by convolution,
results/h200_round7/conv_first_call.md): timm convnext_tiny's training step spends 2.58 of its
3.2 s in its 18 depthwise 7x7 convolutions (forward 0.72, backward 1.86 s), in NCHW and
channels_last alike; efficientnet_b0's, in the channels_last layout Inductor picks for a graph
with a backward, 7.4 of 8.1 s in its 16 depthwise 3x3 / 5x5 ones (its 128 1x1 and stem
convolutions: 0.5 s; in NCHW the depthwise ones take 7 ms: aten's own depthwise kernel).

What it gave (results/h200_round7/zoo_depthwise_as_code.md, the zoo at real size, five
precompiles at a time): convnext_tiny's precompile went from 17 s to 204 s (inference) and
from 51 s to over 475 s (training, cut): 49 taps forward and backward make very large kernels;
efficientnet_b0's and mobilenetv3's were not slower, and their results kept torch.compile's
error. The warm starts were cut by the run's deadline and the session's device time ran out,
so the first-call gain itself is not measured. Left for a later try: only 3x3 / 5x5 kernels,
or a grouped formulation (im2col + batched matmul) that keeps one kernel per direction.

The sums: float32 accumulation (what cuDNN accumulates in), rounded once to the input's dtype.
Forward: out = sum over taps of (a strided window of the padded input) x (that tap's weight
per channel). Input gradient, stride 1: the same sum over the gradient padded the other way
with the kernel flipped; other strides: each tap's product scattered back into the padded
input's shape (slice_backward), summed, the padding cut. Weight gradient: per tap, the
gradient times that tap's window, summed over batch and space. Every other convolution is
left as it is. tests/test_depthwise_experiment.py checks the sums against aten's convolution.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten


def is_depthwise(x: Any, w: Any, transposed: bool, groups: int) -> bool:
    """A 2-D depthwise convolution with one output channel per input channel and sizes known
    at trace time (channels and kernel; the batch and image sizes may be symbolic)."""
    return (not transposed and isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor)
            and x.dim() == 4 and w.dim() == 4 and isinstance(groups, int) and groups > 1
            and all(isinstance(s, int) for s in w.shape) and isinstance(x.shape[1], int)
            and w.size(1) == 1 and groups == x.size(1) == w.size(0))


def _acc(t: torch.Tensor) -> torch.Tensor:
    """t in the accumulation dtype (float32 for half types, else its own)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _fmt(x: torch.Tensor) -> torch.memory_format:
    return torch._prims_common.suggest_memory_format(x)


def _window(xp: torch.Tensor, i: int, j: int, stride, dilation, ho, wo) -> torch.Tensor:
    """The part of the padded input that tap (i, j) meets, [N, C, ho, wo]."""
    (sh, sw), (dh, dw) = stride, dilation
    return xp[:, :, i * dh:i * dh + (ho - 1) * sh + 1:sh, j * dw:j * dw + (wo - 1) * sw + 1:sw]


def _tap_weight(w: torch.Tensor, i: int, j: int) -> torch.Tensor:
    return w[:, 0, i, j].reshape(1, -1, 1, 1)


def _tap_sum(xp: torch.Tensor, w: torch.Tensor, stride, dilation, ho, wo) -> torch.Tensor:
    acc = None
    for i in range(w.size(2)):
        for j in range(w.size(3)):
            term = _window(xp, i, j, stride, dilation, ho, wo) * _tap_weight(w, i, j)
            acc = term if acc is None else acc + term
    return acc


def _out_size(size, pad: int, dil: int, k: int, stride: int):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    if not is_depthwise(x, w, transposed, groups):  # 4-D: stride, padding, dilation are 2-D
        return NotImplemented
    (ph, pw), (kh, kw) = padding, w.shape[2:]
    ho = _out_size(x.size(2), ph, dilation[0], kh, stride[0])
    wo = _out_size(x.size(3), pw, dilation[1], kw, stride[1])
    xp = aten.constant_pad_nd(_acc(x), [pw, pw, ph, ph], 0.0)
    out = _tap_sum(xp, _acc(w), stride, dilation, ho, wo)
    if bias is not None:
        out = out + _acc(bias).reshape(1, -1, 1, 1)
    return out.to(x.dtype).contiguous(memory_format=_fmt(x))


def _input_grad(g, x, w, stride, padding, dilation) -> torch.Tensor:
    (ph, pw), (dh, dw), (kh, kw) = padding, dilation, w.shape[2:]
    h, wd = x.size(2), x.size(3)
    top, left = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    if tuple(stride) == (1, 1) and top >= 0 and left >= 0:
        gp = aten.constant_pad_nd(g, [left, left, top, top], 0.0)
        return _tap_sum(gp, w.flip([2, 3]), (1, 1), dilation, h, wd)
    n, c, ho, wo = g.shape
    hp, wp = h + 2 * ph, wd + 2 * pw
    acc = None
    for i in range(kh):
        for j in range(kw):
            t = g * _tap_weight(w, i, j)
            t = aten.slice_backward(t, [n, c, ho, wp], 3, j * dw,
                                    j * dw + (wo - 1) * stride[1] + 1, stride[1])
            t = aten.slice_backward(t, [n, c, hp, wp], 2, i * dh,
                                    i * dh + (ho - 1) * stride[0] + 1, stride[0])
            acc = t if acc is None else acc + t
    return acc[:, :, ph:ph + h, pw:pw + wd]


def _weight_grad(g, x, w, stride, padding, dilation) -> torch.Tensor:
    (ph, pw), (kh, kw) = padding, w.shape[2:]
    ho, wo = g.size(2), g.size(3)
    xp = aten.constant_pad_nd(x, [pw, pw, ph, ph], 0.0)
    rows = [(g * _window(xp, i, j, stride, dilation, ho, wo)).sum([0, 2, 3])
            for i in range(kh) for j in range(kw)]
    return torch.stack(rows, dim=1).reshape(w.shape)


def convolution_backward(g, x, w, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    if not is_depthwise(x, w, transposed, groups):  # 4-D: stride, padding, dilation are 2-D
        return NotImplemented
    g32, x32, w32 = _acc(g), _acc(x), _acc(w)
    gi = gw = gb = None
    if output_mask[0]:
        gi = _input_grad(g32, x32, w32, stride, padding, dilation).to(x.dtype)
        gi = gi.contiguous(memory_format=_fmt(x))
    if output_mask[1]:
        gw = _weight_grad(g32, x32, w32, stride, padding, dilation).to(w.dtype)
    if output_mask[2]:
        gb = g32.sum([0, 2, 3]).to(g.dtype)
    return gi, gw, gb


def with_depthwise_as_code(table: dict[Any, Callable]) -> dict[Any, Callable]:
    """A copy of an AOTAutograd decomposition table that also writes depthwise convolutions
    and their backward as sums (the module's docstring); any other
    convolution goes to the table's own entry, or stays as it is."""
    out = dict(table)
    for op, ours in ((aten.convolution.default, convolution),
                     (aten.convolution_backward.default, convolution_backward)):
        theirs = table.get(op)

        def either(*args, _ours=ours, _theirs=theirs, **kwargs):
            r = _ours(*args, **kwargs)
            if r is NotImplemented and _theirs is not None:
                return _theirs(*args, **kwargs)
            return r
        out[op] = either
    return out


TABLE = with_depthwise_as_code({})
