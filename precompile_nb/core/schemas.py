"""The frozen dataclasses passed between pipeline stages (capture -> lower -> emit -> cache),
and recorded for the viewers. Nothing else lives here."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runtime.convention import AliasOut, Constant, Convention, TensorInput


@dataclass(frozen=True)
class GraphNodeInfo:
    """A node of the captured graph, for the graph viewer (plain data)."""

    name: str
    op: str  # placeholder / call_function / output
    target: str  # "aten.addmm.default"
    args: tuple[str, ...]  # names of input nodes
    shape: tuple[int | str, ...] | None
    dtype: str | None
    role: str  # param / buffer / input / compute / output / gradient / constant
    module: str  # nn.Module path ("" for top level)
    stack: str | None  # user source line that produced it


@dataclass(frozen=True)
class Captured:
    """What capture saw: the ATen graph of the whole computation (forward and, if fn ran
    .backward(), backward) with every parameter/buffer/tensor input lifted, and the calling
    convention as capture knows it (lower refines it)."""

    convention: Convention  # outputs are graph outputs or values; grads in graph numbering
    graph: Any  # torch.fx.GraphModule, outputs = (user tensor leaves..., grads...)
    tracing_mode: str  # "fake" or "symbolic" (unbacked dims)
    fake_inputs: tuple[Any, ...]  # the traced placeholders' FakeTensors (inputs, then consts)
    n_user_outputs: int  # graph outputs that are fn's result leaves; grads follow
    aliases: tuple[tuple[int, AliasOut], ...]  # (graph output, the input view it is)
    mutated: tuple[int, ...]  # graph inputs mutated in place
    baked: tuple[tuple[str, Any], ...]  # non-tensor inputs baked into the artifact
    nodes: tuple[GraphNodeInfo, ...]
    seconds: float
    # (graph input, dim) marked with mark_unbacked: nothing may be assumed about its size
    unbacked: frozenset[tuple[int, int]] = frozenset()
    # the example's own graph-input tensors, in input order (not copies): lower runs a CUDA
    # graph once on copies of them to autotune (Note [tuning on the example's values])
    example_tensors: tuple[Any, ...] = field(default=(), repr=False, compare=False)

    @property
    def fn_name(self) -> str:
        return self.convention.fn_name

    @property
    def inputs(self) -> tuple[TensorInput, ...]:
        return self.convention.inputs

    @property
    def constants(self) -> tuple[Constant, ...]:
        return self.convention.constants


@dataclass(frozen=True)
class KernelInfo:
    """One kernel Inductor generated, and the ATen ops / graph nodes fused into it."""

    name: str  # "cpp_fused_add_relu_0" / "triton_poi_fused_add_0"
    kind: str  # "cpp" / "triton" / "extern"
    fused_ops: tuple[str, ...]  # ATen ops ("aten.add", ...)
    source_nodes: tuple[str, ...]  # captured graph node names
    line: int  # line in python_code where the kernel is defined (1-based), 0 if unknown


@dataclass(frozen=True)
class Tuning:
    """Where precompile autotuned a CUDA graph (Note [a configuration per size] in
    core/tuning.py)."""

    # each size point tuned, the example's first: dynamic input's name -> its shape there
    # (empty for a graph without dynamic sizes)
    at: tuple[Mapping[str, tuple[int, ...]], ...]
    # at each of them, how many kernels chose among several configurations
    kernels: tuple[int, ...]
    # points of the range not tuned, and why (a guard they break, their size, a failure)
    skipped: tuple[tuple[Mapping[str, tuple[int, ...]], str], ...]
    # Triton kernel variable -> {"numel": its size arguments, "buckets": [{"upto": product of
    # them or None, "record": launch record}]}, for kernels whose choice differs by size
    by_size: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Lowered:
    """What lowering made: a Python module section that defines `call(args)`, and the
    calling convention refined for it (outputs, write-backs and gradients in `call`'s output
    numbering, whether strides are checked)."""

    backend: str
    source: str  # defines call(args) -> sequence of outputs
    convention: Convention
    kernels: tuple[KernelInfo, ...]
    files: tuple[tuple[str, str, bytes], ...]  # compiled binaries: (root, relpath, bytes)
    seconds: float
    # Triton kernel variable -> how its cubin is launched without Triton, or {"why": ...}
    # (_compat.triton_launch_records; empty for CPU modules)
    launches: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # how a CUDA graph was autotuned at precompile (None: not tuned, CPU or collectives)
    tuning: Tuning | None = None
    # how many pieces Inductor compiled the graph in at once (Note [a graph compiled in
    # pieces], core/pieces.py), and why that many
    split: Split | None = None
    # kernel builds at precompile: C++ {"reused": kept from an earlier precompile, "built":
    # the compiler ran} (Note [C++ kernels built once], core/_compat/kernel_store.py), and
    # Triton {"triton_reused": kept from an earlier precompile, "triton_compiled": the others}
    # (Note [Triton kernels compiled once]) and {"on_threads": sent to threads of this
    # process while Inductor's compile workers started, "handed_to_workers": of those, the
    # ones a thread handed to the workers, ready by then} (Note [kernels on threads while the
    # workers start]) and {"forked_workers": compile workers forked from this process for the
    # build} (Note [compile workers forked for a build])
    builds: Mapping[str, int] = field(default_factory=dict)
    # what precompile rewrote in the graph before Inductor saw it: the rewrite's name ->
    # the capture graph's nodes it rewrote (CONV_1X1_AS_PRODUCTS)
    rewrites: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# Note [1x1 convolutions as matrix products] (core/_compat/conv_as_mm.py), as the report names it
CONV_1X1_AS_PRODUCTS = "1x1 convolutions as matrix products"


@dataclass(frozen=True)
class Split:
    """How a graph was compiled: in `count` pieces at once (1: in one), and why."""

    count: int
    why: str
    seconds: float  # wall time of the compile in pieces (0.0 in one)
    # per worker, seconds from its start until it was ready (torch imported), had its piece,
    # had compiled it
    workers: tuple[tuple[float, ...], ...] = ()
    # in one piece: why AOTAutograd traced the graph before Inductor, "" where the graph went
    # to Inductor directly (Note [one trace between capture and Inductor]); None: in pieces
    aot_autograd: str | None = None
    # in one piece: how many of the graph's views were lowered as reshapes after a view
    # failed (Note [a view the decompositions made impossible]); 0: none failed
    views_as_reshapes: int = 0
    # in one piece, a graph with convolutions: their layout ("channels_last" or "NCHW") and
    # what decided it ("training" or "inference": Inductor's rule for that kind of graph,
    # Note [a training step's layout, by torch.compile's rule]; "forced": the user's
    # force_layout_optimization; "off": layout optimization off for the graph)
    conv_layout: tuple[str, str] | None = None


@dataclass(frozen=True)
class Artifact:
    """Everything one precompile run produced: the pair, and what each stage recorded."""

    python_code: str
    cache: bytes
    captured: Captured
    lowered: Lowered
    stage_seconds: tuple[tuple[str, float], ...]  # ("capture", 0.4), ("lower", 12.1), ...
