"""torch internals of convolution layouts at lowering: which graphs keep eager's NCHW (Note
[depthwise convolutions keep NCHW], Note [CPU training keeps NCHW]) and the strides Inductor
sees for what a training graph's backward convolutions read (Note [backward convolutions see
channels_last]); checked on 2.11 (GPU), 2.13 and 2.15.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from .scoped_patch import ScopedPatch, switched_off


def keeps_eager_layout(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether Inductor compiles `gm` with layout optimization off, its convolutions in
    eager's NCHW: on CUDA an inference graph with a depthwise convolution (Note [depthwise
    convolutions keep NCHW]), on the CPU a graph with a backward convolution (Note [CPU
    training keeps NCHW]); never when the user forces it (torch._inductor.config.
    force_layout_optimization)."""
    from torch._inductor import config as inductor_config

    if inductor_config.force_layout_optimization:
        return False
    if any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in example_inputs):
        return has_depthwise_conv_and_no_backward(gm)
    backward = torch.ops.aten.convolution_backward.default
    return any(n.op == "call_function" and n.target is backward for n in gm.graph.nodes)


def layout_optimized(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether Inductor would lay the convolutions of `gm`, compiled as one graph with static
    sizes, out in channels_last: keeps_eager_layout first, then Inductor's own rule on the
    graph as it decides while precompile lowers (2.11-2.15: GraphLowering.decide_layout_opt,
    Note [a training step's layout, by torch.compile's rule]; the functional graph stands for
    the one AOTAutograd hands it, which has the same convolutions and about as many nodes)."""
    from torch._inductor.graph import GraphLowering

    if not any(n.op == "call_function" and n.target is torch.ops.aten.convolution.default
               for n in gm.graph.nodes):
        return False
    if keeps_eager_layout(gm, example_inputs):
        return False
    with training_steps_by_the_training_rule():
        return bool(GraphLowering.decide_layout_opt(gm, is_inference=True))


def training_step_layout(gm: torch.fx.GraphModule, decide: Any = None) -> bool | None:
    """Note [a training step's layout, by torch.compile's rule]: whether Inductor's rule for
    training graphs lays out `gm`'s convolutions in channels_last (2.11-2.15:
    GraphLowering.decide_layout_opt with is_inference=False, or `decide`, the same rule
    before the patch below), where `gm` holds a convolution_backward; None for any other
    graph, or with PRECOMPILE_NB_TRAINING_LAYOUT off (Inductor's rule for inference then
    decides, as before)."""
    from torch._inductor.graph import GraphLowering

    backward = torch.ops.aten.convolution_backward.default
    if switched_off("PRECOMPILE_NB_TRAINING_LAYOUT") or not any(
            n.op == "call_function" and n.target is backward for n in gm.graph.nodes):
        return None
    return bool((decide or GraphLowering.decide_layout_opt)(gm, is_inference=False))


def _graph_lowering() -> Any:
    from torch._inductor.graph import GraphLowering
    return GraphLowering


_DECIDED = threading.local()  # .record: where this thread's lowering keeps the decision


def _decided_as_training(decide: Any, patch: ScopedPatch) -> Any:
    def decide_layout_opt(gm: torch.fx.GraphModule, *, is_inference: bool) -> bool:
        if not patch.on():
            return decide(gm, is_inference=is_inference)
        rule = training_step_layout(gm, decide)
        out = decide(gm, is_inference=is_inference) if rule is None else rule
        record = getattr(_DECIDED, "record", None)
        if record is not None:
            record["conv_layout"] = _how_decided(gm, out, "inference" if rule is None
                                                 else "training")
        return out

    return staticmethod(decide_layout_opt)


def _how_decided(gm: torch.fx.GraphModule, channels_last: bool, rule: str
                 ) -> tuple[str, str] | None:
    """(layout, by what) of a graph with convolutions: "channels_last" or "NCHW"; "training"
    or "inference" (Inductor's rule for that kind of graph), "forced" (the user's
    force_layout_optimization) or "off" (layout optimization off for this graph: dynamic
    sizes, a CPU training step, a depthwise CUDA inference graph, or the user's setting).
    None for a graph without a convolution."""
    from torch._inductor import config

    aten = torch.ops.aten
    if not any(n.op == "call_function" and n.target in (
            aten.convolution.default, aten.convolution_backward.default)
            for n in gm.graph.nodes):
        return None
    by = ("off" if not config.layout_optimization else
          "forced" if config.force_layout_optimization else rule)
    return ("channels_last" if channels_last else "NCHW", by)


# 2.11-2.15: a staticmethod, which GraphLowering.__init__ calls with the graph it lowers
# (compile_fx_inner's layout_opt argument reaches no GraphLowering there)
_TRAINING_RULE = ScopedPatch(
    lambda: _graph_lowering().__dict__.get("decide_layout_opt"),
    lambda f: setattr(_graph_lowering(), "decide_layout_opt", f),
    lambda f, patch: _decided_as_training(f.__func__, patch))


@contextlib.contextmanager
def training_steps_by_the_training_rule(record: dict[str, Any] | None = None
                                        ) -> Iterator[None]:
    """While this thread lowers a graph: Note [a training step's layout, by torch.compile's
    rule]; `record` gets "conv_layout", how the layout was decided (_how_decided), where the
    graph has convolutions."""
    before = getattr(_DECIDED, "record", None)
    _DECIDED.record = record
    try:
        with _TRAINING_RULE.active():
            yield
    finally:
        _DECIDED.record = before


# Note [a training step's layout, by torch.compile's rule]
#   Inductor decides whether a graph's convolutions run in channels_last by a rule with two
#   branches (GraphLowering.decide_layout_opt, 2.11-2.15): for inference, a flop-weighted
#   estimate that says yes to nearly every CNN; for training, Inductor's measured exceptions
#   (a grouped convolution with more than one input channel per group, one with at least
#   twice as many input as output channels and a kernel above 1x1, or every convolution at
#   64 channels or fewer: each slower in channels_last). torch.compile decides a training
#   step by the training branch, on its forward graph. precompile hands Inductor one graph
#   holding forward and backward, which Inductor lowers as an inference graph, so the
#   inference branch decided, and compile_fx_inner's layout_opt argument reaches no
#   GraphLowering to say otherwise. Now, while a graph is lowered, Inductor's decision for a
#   graph holding a convolution_backward is the training branch's (a thread-scoped patch of
#   decide_layout_opt; other threads keep torch's). It counts the whole step's nodes in its
#   check of few convolutions among many nodes (torch.compile counts the forward's), so
#   such a graph keeps NCHW somewhat sooner. PRECOMPILE_NB_TRAINING_LAYOUT=0 goes back to
#   the inference branch. Found on HF ResNet's and MobileViT's tiny configs on the H100
#   (benchmarks/results/h100_round36): precompile's gradients were 0.17 and 14 from eager's
#   by the zoo's measure where torch.compile's were 2e-05 and 0.03; eager itself with the
#   model and inputs in channels_last is 0.165 and 16 away (their last BatchNorms normalize
#   2 values per channel, which turns TF32 rounding into large gradient changes), and with
#   TF32 off precompile's distance was 4.4e-04 (torch.compile 3.1e-04): a layout's
#   rounding, not a wrong result, and torch.compile's layout there is eager's. With this
#   rule, hf_resnet's step runs eager's NCHW: 4.3e-04 from eager.

# Note [CPU training keeps NCHW]
#   On the CPU, Inductor's layout optimization runs a CNN's convolutions in channels_last, and
#   in a training step that costs more than it gives: oneDNN's channels_last convolution
#   backward is slower than NCHW's where channels are many and images small (three 512->512
#   3x3 convolutions at 1x1: 15.3 ms each against 5.2 ms), it reorders each weight gradient
#   back, and each weight is converted to channels_last twice a step (for the forward and for
#   the backward). So a CPU graph that holds a convolution_backward is compiled with layout
#   optimization off. Measured with benchmarks/cpu_training_layout.py (one process, variants
#   alternating; benchmarks/results/cpu_round9/): the zoo's tiny ResNet-18 training step 111.5
#   -> 61.3 ms on one thread (eager 62.2, torch.compile 91.4) and 67.4 -> 38.5 ms on two
#   (eager 40.0, torch.compile 59.0); the benchmarks' CNN+BatchNorm step level to 10% faster
#   (0.71 -> 0.70 ms, 0.72 -> 0.65 ms in the diagnosis run); ResNet-18 at batch 8, 64x64, 179
#   -> 120 ms, at 224x224 level (730 against 713 ms; conv_backward_cpu_diagnosis.md); the zoo's
#   mobilenet_v3, efficientnet, convnext and timm resnet steps faster or level (0.89-1.00x). The
#   first step's error against eager is no larger. CUDA graphs keep Inductor's choice: there
#   channels_last is what makes a CNN step fast (Note [backward convolutions see
#   channels_last]).


# Note [depthwise convolutions keep NCHW]
#   A CUDA inference graph with a depthwise convolution is compiled with Inductor's layout
#   optimization off (unless the user forces it: config.force_layout_optimization). With it on,
#   Inductor runs the convolutions in channels_last, and cuDNN's first call of those
#   convolutions in a process costs seconds (H200, cuDNN 9, timm efficientnet_b0 batch 8:
#   eager's own first call 0.74 s in NCHW, 2.51 s in channels_last): a warm load's first call
#   paid 1.98 s against 0.25 s in NCHW, with the steady call no slower (2.70 vs 2.85 ms;
#   benchmarks/conv_layout.py). Graphs with a backward keep Inductor's choice: for
#   efficientnet_b0's training step the same trade goes the other way (`conv_layout.py
#   --workload train`): NCHW starts 1.39 s after load against 3.06 s, but each step takes 25.7
#   ms against 17.2 ms in channels_last, a loss that a training run pays every step. Writing the
#   depthwise convolutions as generated code instead (no cuDNN call at all) was tried and costs
#   more than it saves: convnext_tiny's precompile went from 17 s to 204 s
#   (benchmarks/depthwise_as_code.py says how).


def has_depthwise_conv_and_no_backward(gm: torch.fx.GraphModule) -> bool:
    """A convolution whose groups equal its input channels (weight [C_out, 1, kh, kw],
    groups > 1), and no convolution_backward: an inference graph of a depthwise CNN."""
    backward = torch.ops.aten.convolution_backward.default
    return (not any(n.op == "call_function" and n.target is backward for n in gm.graph.nodes)
            and _has_depthwise_conv(gm))


def has_nchw_depthwise_conv(gm: torch.fx.GraphModule) -> bool:
    """A depthwise convolution of a kernel the NCHW rules act on (at most 7x7): on CUDA it
    runs in NCHW, in inference (Note [depthwise convolutions keep NCHW]) and, unless that
    rule is off, in training (Note [depthwise convolutions of a CUDA training step run in
    NCHW])."""
    return _has_depthwise_conv(gm, _NCHW_MAX_KERNEL)


def _has_depthwise_conv(gm: torch.fx.GraphModule, max_kernel: int | None = None) -> bool:
    conv = torch.ops.aten.convolution.default
    return any(n.op == "call_function" and n.target is conv and len(n.args) > 8
               and _depthwise(n.args[1], n.args[8], max_kernel) for n in gm.graph.nodes)


def _depthwise(weight: Any, groups: Any, max_kernel: int | None = None) -> bool:
    """A depthwise convolution's weight ([C_out, 1, *kernel], groups > 1; with `max_kernel`,
    a 2-D one whose kh and kw are at most that): an FX node (its meta value) or an Inductor IR
    node (its size)."""
    if isinstance(weight, torch.fx.Node):
        weight = weight.meta.get("val")
    if isinstance(weight, torch.Tensor):
        size = tuple(weight.shape)
    elif hasattr(weight, "get_size"):
        size = tuple(weight.get_size())
    else:
        return False
    if len(size) < 3 or size[1] != 1 or not isinstance(groups, int) or groups <= 1:
        return False
    if max_kernel is None:
        return True
    try:  # a symbolic kernel size is not one the rule knows
        return len(size) == 4 and max(int(k) for k in size[2:]) <= max_kernel
    except TypeError:
        return False


# Note [backward convolutions see channels_last]
#   precompile hands Inductor one graph holding a training step's forward and backward. With
#   layout optimization on (Inductor's choice for a CNN), Inductor runs the forward convolutions
#   in channels_last, but keeps every tensor that a convolution_backward reads in the strides
#   the graph was traced with (GraphLowering.run_node's need_fixed_layout, 2.11-2.15), and
#   make_fx traced them as eager computes them: NCHW. So each such tensor existed in both
#   layouts: an NCHW copy of every convolution weight (its bfloat16 cast under autocast),
#   transposes of activations and gradients, and the batch-norm gradient reductions over mixed
#   layouts that Inductor can only tune by trying six configurations (torchvision ResNet-50
#   training step on the H200, the zoo's tv_resnet18 case at real size: 45 NCHW buffers, 24
#   transposing kernels, 98 kernels autotuned over 372 configurations; torch.compile's: 2 NCHW
#   buffers, 74 kernels over 163 configurations, benchmarks/cold_split.py --sources).
#   torch.compile avoids this: its backward graph starts from the compiled forward's outputs,
#   channels_last. Here, before Inductor lowers a graph it will lay out in channels_last, the
#   4-D tensors a convolution_backward reads are given channels_last strides in the graph's
#   metadata, when they are computed inside the graph (not inputs: their strides are the
#   caller's) and not returned (a result keeps eager's strides). Only the metadata changes:
#   values, and the strides of every result, are as before. It runs as Inductor's last post-grad
#   pass (config.post_grad_custom_post_pass): Inductor propagates fake tensors through the graph
#   again when it starts, which undoes a change made before (seen on 2.11 and 2.13: the first
#   try, made before compile_fx_inner, changed nothing). A user's own pass there wins: then
#   nothing is changed. On the CPU the pass has nothing to do for a training graph: it
#   is compiled in NCHW (Note [CPU training keeps NCHW]); before that rule the pass took the
#   benchmarks' CNN+BatchNorm step from 1.25-1.42 to 0.73-0.75 ms (cpu_round8/), and NCHW
#   throughout keeps it there (0.65-0.70 ms).


@contextlib.contextmanager
def backward_convolutions_in_channels_last(*, is_inference: bool,
                                           layout_opt: bool | None) -> Iterator[None]:
    """While Inductor compiles one graph: Note [backward convolutions see channels_last], as
    Inductor's post-grad custom pass (2.11-2.15: config.post_grad_custom_post_pass, a
    CustomGraphPass whose uuid keys Inductor's graph cache), unless the user set one."""
    from torch._inductor import config

    if config.post_grad_custom_post_pass is not None:
        yield
        return
    nchw = depthwise_nchw_wanted() and not config.force_layout_optimization
    with config.patch(post_grad_custom_post_pass=_channels_last_pass(
            is_inference, layout_opt, nchw)), depthwise_convolutions_in_nchw(nchw):
        yield


def _channels_last_pass(is_inference: bool, layout_opt: bool | None, nchw: bool) -> Any:
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class BackwardConvolutionsSeeChannelsLast(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            backward_convolutions_see_channels_last(
                graph.owning_module, is_inference=is_inference, layout_opt=layout_opt,
                depthwise_nchw=nchw)

        def uuid(self) -> Any:  # keys Inductor's graph cache: the depthwise rule is in it
            return ("precompile_nb: backward convolutions see channels_last, 2",
                    is_inference, layout_opt, nchw)

    return BackwardConvolutionsSeeChannelsLast()


def backward_convolutions_see_channels_last(gm: torch.fx.GraphModule, *, is_inference: bool,
                                            layout_opt: bool | None = None,
                                            depthwise_nchw: bool = False) -> int:
    """Note [backward convolutions see channels_last]: in place, on the graph Inductor is about
    to compile (2.11-2.15: GraphLowering.decide_layout_opt, as Inductor decides it, unless
    `layout_opt` says); returns how many nodes' strides it changed. With `depthwise_nchw`,
    what a depthwise convolution_backward reads keeps NCHW (Note [depthwise convolutions of a
    CUDA training step run in NCHW])."""
    from torch._inductor.graph import GraphLowering
    from torch._prims_common import make_channels_last_strides_for

    aten = torch.ops.aten
    backward = [n for n in gm.graph.nodes
                if n.op == "call_function" and n.target is aten.convolution_backward.default]
    if not backward:
        return 0
    if layout_opt is None:
        layout_opt = GraphLowering.decide_layout_opt(gm, is_inference=is_inference)
    if not layout_opt:
        return 0
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    returned = set(out.all_input_nodes)
    changed = 0
    for conv in backward:
        if depthwise_nchw and _depthwise(conv.args[2], conv.args[9], _NCHW_MAX_KERNEL):
            continue
        for arg in conv.args[:3]:  # grad_output, input, weight
            if not isinstance(arg, torch.fx.Node) or arg.op == "placeholder" or arg in returned:
                continue
            val = arg.meta.get("val")
            if not (isinstance(val, torch.Tensor) and val.dim() == 4 and val.is_contiguous()
                    and not val.is_contiguous(memory_format=torch.channels_last)):
                continue
            fake_mode = getattr(val, "fake_mode", None)
            if fake_mode is None or any(not isinstance(s, int) for s in val.shape):
                continue
            with fake_mode:
                arg.meta["val"] = torch.empty_strided(
                    val.shape, make_channels_last_strides_for(val.shape), dtype=val.dtype,
                    device=val.device, requires_grad=val.requires_grad)
            changed += 1
    return changed


# Note [depthwise convolutions of a CUDA training step run in NCHW]
#   With layout optimization on (Inductor's choice for a CNN's training step), Inductor runs
#   every 2-D convolution in channels_last, and ATen sends a channels_last depthwise convolution
#   to cuDNN, whose first call of each configuration in a process costs a fraction of a second
#   to seconds (cuDNN 9 on the H200). In NCHW, ATen runs depthwise convolutions with its own
#   CUDA kernels (fp32 and bf16; eager does the same), which cost nothing to start. So after a
#   warm load of efficientnet_b0's training step (0.4 s) its first call took 18.2 s, eager's
#   own first call 0.92 s (benchmarks/warm_first_call.py, h200_round13/). Here, while
#   Inductor lowers a CUDA training graph, each depthwise convolution and convolution_backward
#   is lowered as if layout optimization were off, with its inputs required in NCHW
#   (2.11-2.15: the lowerings of aten.convolution and aten.convolution_backward read
#   V.graph.layout_opt), and Note
#   [backward convolutions see channels_last] leaves what a depthwise backward reads in NCHW.
#   Every other convolution keeps channels_last; Inductor's kernels around them convert between
#   the layouts. Values are the same; only layouts change. Only kernels up to 7x7
#   (efficientnet's and mobilenet's 3x3 and 5x5, ConvNeXt's 7x7), the sizes measured: ConvNeXt
#   tiny's training step, H200, warm load + first call 2.62 s with its 7x7 depthwise
#   convolutions in channels_last, 0.57 s in NCHW, steady step 0.86x -> 0.45x eager's
#   (benchmarks/results/h200_round14). Inference graphs already keep NCHW throughout (Note
#   [depthwise convolutions keep NCHW]). PRECOMPILE_NB_DEPTHWISE_NCHW=0 turns the rule off
#   (benchmarks compare the two), and so does the user's config.force_layout_optimization
#   (channels_last for every convolution, as asked).

_NCHW_DEVICES = ("cuda",)  # where ATen runs an NCHW depthwise convolution without cuDNN
_NCHW_MAX_KERNEL = 7  # the largest depthwise kernel (kh, kw) the rule acts on


def depthwise_nchw_wanted() -> bool:
    """Whether the rule of Note [depthwise convolutions of a CUDA training step run in NCHW] is
    on (PRECOMPILE_NB_DEPTHWISE_NCHW=0, off, false or no turns it off)."""
    return not switched_off("PRECOMPILE_NB_DEPTHWISE_NCHW")


@contextlib.contextmanager
def depthwise_convolutions_in_nchw(on: bool) -> Iterator[None]:
    """While this thread lowers a graph: the rule of Note [depthwise convolutions of a CUDA
    training step run in NCHW], if `on` (2.11-2.15: Inductor's lowerings of aten.convolution
    and aten.convolution_backward, torch._inductor.lowering.lowerings, replaced while a thread
    needs them)."""
    if not on:
        yield
        return
    with contextlib.ExitStack() as stack:
        for patch in _PATCHES:
            stack.enter_context(patch.active())
        yield


def _lowering_patch(op_name: str, backward: bool) -> ScopedPatch:
    """Inductor's lowering of aten.<op_name>.default, replaced by _nchw_lowering."""
    def lowerings() -> dict:
        from torch._inductor.lowering import lowerings
        return lowerings

    def op() -> Any:
        return getattr(torch.ops.aten, op_name).default

    return ScopedPatch(lambda: lowerings().get(op()),
                       lambda f: lowerings().__setitem__(op(), f),
                       lambda f, patch: _nchw_lowering(f, patch, backward))


_PATCHES = (_lowering_patch("convolution", False), _lowering_patch("convolution_backward", True))


def _nchw_lowering(lowering: Any, patch: ScopedPatch, backward: bool) -> Any:
    """Inductor's lowering of aten.convolution (backward: aten.convolution_backward), which
    lowers a CUDA depthwise convolution in NCHW on a thread under the rule."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V

    def lower(*args: Any, **kwargs: Any) -> Any:
        graph = V.graph
        # (x, weight, ..., groups) / (grad_out, input, weight, ..., groups, output_mask)
        if len(args) < (10 if backward else 9):
            return lowering(*args, **kwargs)
        weight, groups = (args[2], args[9]) if backward else (args[1], args[8])
        if not (patch.on() and graph.layout_opt
                and _depthwise(weight, groups, _NCHW_MAX_KERNEL)
                and ir.get_device_type(args[0]) in _NCHW_DEVICES):
            return lowering(*args, **kwargs)
        tensors = 3 if backward else 2
        args = (*(ir.ExternKernel.require_contiguous(a) for a in args[:tensors]),
                *args[tensors:])
        graph.layout_opt = False
        try:
            return lowering(*args, **kwargs)
        finally:
            graph.layout_opt = True

    return lower
