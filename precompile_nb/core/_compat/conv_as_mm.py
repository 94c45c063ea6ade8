"""A depthwise-separable CNN's 1x1 convolutions as matrix products on CUDA, forward and
backward, written into the functional graph before Inductor sees it (Note [1x1 convolutions
as matrix products]); checked on 2.11 (GPU), 2.13 and 2.15.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .scoped_patch import switched_off

# Note [1x1 convolutions as matrix products]
#   A 1x1 convolution with stride 1, no padding and one group is a matrix product over the
#   channels: out[n, :, h, w] = weight[:, :, 0, 0] @ x[n, :, h, w]. cuDNN runs it as a
#   convolution, and a process's first call of each convolution shape costs cuDNN's plan
#   set-up, milliseconds per shape and direction: efficientnet_b0's training step spends most
#   of its first call there, eager and a warm precompile alike. A matrix product's first call
#   costs cuBLAS a heuristic look-up, microseconds. So in the graph of a depthwise-separable
#   CNN on CUDA (one with a depthwise convolution of at most 7x7: its depthwise convolutions
#   run in NCHW, Notes [depthwise convolutions keep NCHW] and [depthwise convolutions of a CUDA
#   training step run in NCHW]), each such convolution in bf16 / fp16 with static sizes is
#   rewritten in the functional re-trace as products, and each such convolution_backward as
#   its products and a sum (the gradients of input, weight, bias that autograd asked for).
#   Each result is in the layout eager's has (the input's), with no copies: in NCHW a product
#   per image, (K, C) @ (C, H*W); in channels_last one over all pixels, (N*H*W, C) @ (C, K).
#   (Written channels_last whatever the input's layout, as Inductor's own
#   config.conv_1x1_as_mm writes it, the results led the depthwise convolutions after them
#   into channels_last, whose cuDNN first call costs seconds: efficientnet_b0's warm first call
#   went from 0.7 to 12 s.) float32 is left to cuDNN: its convolutions run in TF32 by default,
#   a float32 matmul does not. Where a rewritten value could reach the user in other strides
#   than eager's (a convolution's result that is a result of fn, an input's gradient where the
#   convolution reads one of fn's inputs), the graph is left as it is. Measured
#   (benchmarks/results/h200_round15): efficientnet_b0's training step, warm load + first call
#   1.29x -> 0.84x eager's first call (first call 722 -> 369 ms), steady step 0.72x -> 0.49x
#   eager's, 345 -> 222 Triton kernels. A CNN without depthwise convolutions (ResNet's
#   bottlenecks), which Inductor lays out channels_last, is left to cuDNN: not measured with
#   the products. PRECOMPILE_NB_CONV1X1_AS_MM=0 turns it off.
ENV = "PRECOMPILE_NB_CONV1X1_AS_MM"
_HALF = (torch.bfloat16, torch.float16)


def _plain_1x1(x: Any, w: Any, stride: Sequence[int], padding: Sequence[int],
               dilation: Sequence[int], transposed: bool, groups: int) -> bool:
    return (isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor) and x.dim() == 4
            and w.dim() == 4 and tuple(w.shape[2:]) == (1, 1) and not transposed
            and groups == 1 and all(s == 1 for s in stride) and all(p == 0 for p in padding)
            and all(d == 1 for d in dilation) and x.dtype in _HALF and w.dtype == x.dtype
            and all(type(d) is int for d in (*x.shape, *w.shape)))  # static sizes only


def _channels_last(x: torch.Tensor) -> bool:
    """Whether x is laid out channels_last (and not also plainly contiguous, as a 1x1 image
    is both)."""
    return x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) channels_last -> (N*H*W, C), a view: each pixel's channels as a row."""
    n, c, h, w = t.shape
    return t.permute(0, 2, 3, 1).reshape(n * h * w, c)


def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """aten.convolution of a plain 1x1 convolution as products, its result in the layout
    eager's would have (the input's); NotImplemented (traced as it is) for any other."""
    if not _plain_1x1(x, weight, stride, padding, dilation, transposed, groups):
        return NotImplemented
    n, c, h, w = x.shape
    k = weight.shape[0]
    w2 = weight.reshape(k, c)
    if _channels_last(x):  # one product over all pixels: (N*H*W, C) @ (C, K)
        y = torch.mm(_rows(x), w2.t()) if bias is None else torch.addmm(bias, _rows(x), w2.t())
        return y.reshape(n, h, w, k).permute(0, 3, 1, 2)
    y = torch.matmul(w2, x.reshape(n, c, h * w))  # NCHW: per image, (K, C) @ (C, H*W)
    if bias is not None:
        y = y + bias.reshape(1, k, 1)
    return y.reshape(n, k, h, w)


def convolution_backward(grad, x, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    """aten.convolution_backward of a plain 1x1 convolution as products and sums, each only
    where output_mask asks for it (None otherwise, as aten returns), the input's gradient in
    the input's layout; NotImplemented for any other convolution."""
    if not _plain_1x1(x, weight, stride, padding, dilation, transposed, groups) or \
            grad.dtype != x.dtype:
        return NotImplemented
    n, c, h, w = x.shape
    k = weight.shape[0]
    w2 = weight.reshape(k, c)
    gi = gw = gb = None
    if _channels_last(x):
        g = _rows(grad)  # (N*H*W, K)
        if output_mask[0]:
            gi = torch.mm(g, w2).reshape(n, h, w, c).permute(0, 3, 1, 2)
        if output_mask[1]:
            gw = torch.mm(g.t(), _rows(x)).reshape(weight.shape)
        if output_mask[2]:
            gb = g.sum(0)
        return gi, gw, gb
    g = grad.reshape(n, k, h * w)
    if output_mask[0]:
        gi = torch.matmul(w2.t(), g).reshape(n, c, h, w)
    if output_mask[1]:  # per image (K, H*W) @ (H*W, C), summed over the batch
        gw = torch.bmm(g, x.reshape(n, c, h * w).transpose(1, 2)).sum(0).reshape(weight.shape)
    if output_mask[2]:
        gb = g.sum((0, 2))
    return gi, gw, gb


def plan_for(gm: torch.fx.GraphModule) -> tuple[dict | None, tuple[str, ...]]:
    """The decompositions that rewrite `gm`'s plain 1x1 convolutions (Note [1x1 convolutions
    as matrix products]) when its functional re-trace runs, and the names of the nodes they
    rewrite (for the report); (None, ()) where it has none that qualifies, where one's result
    reaches the user directly, where its convolutions are not a depthwise-separable CNN's
    that runs in NCHW, or where the note's switch is off."""
    from torch._inductor import config as inductor_config

    from .conv_layout import depthwise_nchw_wanted, has_nchw_depthwise_conv

    if switched_off(ENV) or not depthwise_nchw_wanted() or \
            inductor_config.force_layout_optimization or not has_nchw_depthwise_conv(gm):
        return None, ()
    aten = torch.ops.aten
    outputs = set(next(n for n in reversed(gm.graph.nodes) if n.op == "output").all_input_nodes)
    found = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target not in (aten.convolution.default,
                                                       aten.convolution_backward.default):
            continue
        backward = n.target is aten.convolution_backward.default
        x, w = (n.args[1], n.args[2]) if backward else (n.args[0], n.args[1])
        stride, padding, dilation, transposed, _, groups = n.args[4:10] if backward \
            else n.args[3:9]
        xv = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        wv = w.meta.get("val") if isinstance(w, torch.fx.Node) else None
        g = n.args[0] if backward else x  # the gradient's dtype, as convolution_backward asks
        gv = g.meta.get("val") if isinstance(g, torch.fx.Node) else None
        if not _plain_1x1(xv, wv, stride, padding, dilation, transposed, groups) or \
                xv.device.type != "cuda" or getattr(gv, "dtype", None) != xv.dtype:
            continue
        if n in outputs or (backward and n.args[10][0] and x.op == "placeholder"):
            return None, ()  # a value the user sees, in eager's strides: leave the graph be
        found.append(n.name)
    if not found:
        return None, ()
    return {aten.convolution.default: convolution,
            aten.convolution_backward.default: convolution_backward}, tuple(found)

