"""The frozen dataclasses passed between pipeline stages (capture -> lower -> emit -> cache),
and recorded for the viewers. Nothing else lives here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Backend = Literal["inductor", "eager"]
InputKind = Literal["param", "buffer", "input"]


@dataclass(frozen=True)
class TensorSpec:
    """One graph input tensor as the artifact is specialized to it."""

    where: str  # how a person names it: "model.0.weight", "x", "batch['ids']"
    kind: InputKind  # model parameter, model buffer, or a user tensor
    arg: int  # positional argument it comes from
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str  # "float32"
    device: str  # "cpu", "cuda:0"
    requires_grad: bool
    dynamic: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)

    def to_literal(self) -> dict[str, Any]:
        return {"where": self.where, "kind": self.kind, "arg": self.arg,
                "shape": list(self.shape), "stride": list(self.stride), "dtype": self.dtype,
                "device": self.device, "requires_grad": self.requires_grad,
                "dynamic": {d: list(b) for d, b in self.dynamic.items()}}


@dataclass(frozen=True)
class ConstantSpec:
    """A small tensor created inside fn (torch.tensor([...])): carried as a literal."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    data: Any  # nested lists / scalar

    def to_literal(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, "device": self.device,
                "data": self.data}


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
    .backward(), backward) with every parameter/buffer/tensor input lifted."""

    fn_name: str
    graph: Any  # torch.fx.GraphModule, outputs = (user tensor leaves..., grads...)
    tracing_mode: str  # "fake" or "symbolic" (unbacked dims)
    fake_inputs: tuple[Any, ...]  # the traced placeholders' FakeTensors (inputs, then consts)
    inputs: tuple[TensorSpec, ...]  # graph inputs (the constants follow them)
    constants: tuple[ConstantSpec, ...]
    args: tuple[dict[str, Any], ...]  # per positional argument, literal (see _driver)
    out_spec: str  # treespec_dumps of fn's result
    out_leaves: tuple[dict[str, Any], ...]  # per result leaf: graph output or baked value
    n_user_outputs: int  # graph outputs that are fn's result leaves; grads follow
    grads: tuple[tuple[int, int], ...]  # (graph input index, graph output index)
    aliases: tuple[tuple[int, int], ...]  # (user output index, graph input it views)
    mutated: tuple[int, ...]  # graph inputs mutated in place
    baked: tuple[tuple[str, Any], ...]  # non-tensor inputs baked into the artifact
    nodes: tuple[GraphNodeInfo, ...]
    seconds: float


@dataclass(frozen=True)
class KernelInfo:
    """One kernel Inductor generated, and the ATen ops / graph nodes fused into it."""

    name: str  # "cpp_fused_add_relu_0" / "triton_poi_fused_add_0"
    kind: str  # "cpp" / "triton" / "extern"
    fused_ops: tuple[str, ...]  # ATen ops ("aten.add", ...)
    source_nodes: tuple[str, ...]  # captured graph node names
    line: int  # line in python_code where the kernel is defined (1-based), 0 if unknown


@dataclass(frozen=True)
class Lowered:
    """What lowering made: a Python module section that defines `call(args)` and the
    calling-convention pieces that depend on the backend."""

    backend: str
    source: str  # defines call(args) -> sequence of outputs
    out_leaves: tuple[dict[str, Any], ...]  # final result leaves (graph/input/alias/const)
    mutations: tuple[tuple[int, int], ...]  # (graph input, call output) written back
    grads: tuple[tuple[int, int], ...]  # (graph input, call output) accumulated into .grad
    check_strides: bool  # invariant 6: inductor bakes strides
    kernels: tuple[KernelInfo, ...]
    files: tuple[tuple[str, str, bytes], ...]  # compiled binaries: (root, relpath, bytes)
    device_index: int  # for the triton cache dir on load
    seconds: float


@dataclass(frozen=True)
class CacheTag:
    """The integrity tag at the head of a cache envelope (invariant 7)."""

    format: str
    version: int
    backend: str
    torch: str  # torch build id
    code_hash: str  # sha256 of python_code
    n_files: int
    payload_bytes: int


@dataclass(frozen=True)
class Artifact:
    """Everything one precompile run produced: the pair, and what each stage recorded."""

    python_code: str
    cache: bytes
    captured: Captured
    lowered: Lowered
    stage_seconds: tuple[tuple[str, float], ...]  # ("capture", 0.4), ("lower", 12.1), ...
