"""Stage 1: capture(fn, example_inputs) -> Captured.

A non-strict make_fx trace of the *whole* computation with every parameter, buffer and tensor
input lifted to a graph input, so no weight lives in the artifact. Capture enforces the
invariants that can be seen at trace time (1: nothing live baked; 3: no data-dependent reads;
4: no uncapturable effects) and records everything a later stage or a viewer needs.
It leaves the world as it found it: the trace runs on fake tensors, the RNG is restored.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import inspect
import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from . import _compat
from .convention import (AliasOut, Constant, ConstArg, ConstOut, Convention, DTensorLayout,
                         GraphOut, Guard, Leaf, Mesh, ModuleArg, PytreeArg, TensorArg,
                         TensorInput, WriteBack, dense_order, find_class, placement_text)
from .errors import PrecompileError, user_frame
from .schemas import Captured, GraphNodeInfo

# Constants created inside fn (torch.tensor([...])) are carried as literals up to this size;
# anything larger is almost surely live data that should be an input (invariant 1).
MAX_LITERAL_NUMEL = 4096

_LITERAL_TYPES = (bool, int, float, str, type(None))


class Problems:
    """Where capture reports invariant violations: raised at once (precompile), or all
    collected (the dry-run checker, precompile_nb.check)."""

    def __init__(self, collect: bool = False) -> None:
        self.collect = collect
        self.errors: list[PrecompileError] = []

    def add(self, err: PrecompileError) -> None:
        if not self.collect:
            raise err
        self.errors.append(err)


def capture(fn: Callable, example_inputs: Sequence[Any], *,
            decompositions: dict | None = None,
            problems: Problems | None = None) -> Captured | None:
    """Trace `fn(*example_inputs)` into one ATen graph with all tensors lifted to inputs.

    >>> import torch
    >>> c = capture(lambda m, x: m(x), [torch.nn.Linear(2, 3), torch.randn(4, 2)])
    >>> [s.where for s in c.inputs]
    ['m.weight', 'm.bias', 'x']
    """
    t0 = time.perf_counter()
    P = problems or Problems()
    if not callable(fn):
        raise TypeError(f"precompile: fn must be callable, got {type(fn).__name__}")
    if ambient := _compat.autocast_enabled_devices():
        P.add(PrecompileError(
            "precompile was called under torch.autocast", invariant=6, stage="capture",
            where="ambient autocast", expected="autocast disabled around precompile",
            actual=f"enabled for {ambient}",
            hint="put the `with torch.autocast(...)` inside fn so it is part of the captured "
                 "computation, and call precompile outside it"))
    names = _arg_names(fn, len(example_inputs))
    lifted = _lift(example_inputs, names, P)

    state: dict[str, Any] = {}
    flat_fn = _make_flat_fn(fn, example_inputs, lifted, state, P)
    dynamic = any(s.dynamic for s in lifted.specs)
    tracing_mode = "symbolic" if dynamic else "fake"
    traced = _trace(flat_fn, fn, example_inputs, names, lifted, decompositions, P)
    if traced is None:
        return None
    gm, guards = traced
    constants = _check_constants(gm, fn, example_inputs, names, lifted, P)
    _check_nodes(gm, fn, P)
    _pin_factory_dtypes(gm)
    _drop_detach(gm)
    _name_placeholders(gm, lifted.specs)
    gm.recompile()

    fake_inputs = tuple(n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder")
    convention = Convention(
        fn_name=_fn_name(fn), args=tuple(lifted.args), inputs=tuple(lifted.specs),
        constants=tuple(constants), out_spec=tree_literal(state["out_spec"], "fn's result", P),
        outputs=tuple(state["out_leaves"]), mutations=(), grads=tuple(state["grads"]),
        check_strides=False, device_index=0, guards=guards, meshes=tuple(lifted.mesh_records))
    captured = Captured(
        convention=convention,
        graph=gm,
        tracing_mode=tracing_mode,
        fake_inputs=fake_inputs,
        n_user_outputs=state["n_user_outputs"],
        aliases=tuple(state["aliases"]),
        mutated=tuple(sorted(set(state["mutated"]) | _schema_mutated(gm))),
        baked=tuple(lifted.baked),
        nodes=(),
        seconds=0.0,
        unbacked=frozenset((i, d) for i, spec in enumerate(lifted.specs)
                           for d in spec.dynamic if (i, d) not in lifted.assumable),
    )
    return dataclasses.replace(captured, nodes=graph_nodes(captured),
                               seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# tracing
#
# Note [guards from the example]
#   A dim marked with mark_unbacked is a size the graph knows nothing about: a graph that
#   needs to branch on it fails the trace (one artifact, every size). A dim marked with
#   mark_dynamic is traced the same way, but where the trace needs to decide a condition on
#   it (BatchNorm asks `Eq(2048*u0, 0)`, int32 indexing asks `u0 <= 880801`), capture decides
#   it the way the example does, records it as a Guard and traces again under that
#   assumption. The artifact checks every guard on every call before any kernel, so a call
#   outside what the graph was built for is a PrecompileError naming the guard and the line
#   that needed it, never a silently different result.

_MAX_GUARDS = 32


def _trace(flat_fn: Callable, fn: Callable, example_inputs: Sequence[Any], names: list[str],
           L: _Lifted, decompositions: dict | None, P: Problems,
           ) -> tuple[torch.fx.GraphModule, tuple[Guard, ...]] | None:
    """make_fx of the whole computation; with dynamic dims, repeated under each guard the
    example decides (Note [guards from the example])."""
    dynamic = [s.dynamic for s in L.specs]
    guards: list[Guard] = []
    while True:
        trace_inputs = _trace_inputs(L)
        fake_mode, symbols = None, {}
        if any(dynamic):  # invariant 3: marked dims become symbolic sizes
            fake_mode, trace_inputs, symbols = _compat.fake_with_unbacked(
                trace_inputs, dynamic, [g.expr for g in guards])
        before = {str(c) for c in _compat.runtime_asserts(fake_mode)}
        with (_compat.preserved_rng_state(), torch.enable_grad(), _compat.no_autocast(),
              _compat.backward_op_origins()):
            try:
                gm = _compat.make_fx_trace(
                    flat_fn, trace_inputs, decompositions=decompositions, fake_mode=fake_mode,
                    modules=_module_args(example_inputs, names))
                asserted = [_guard(c, True, symbols, L, None)
                            for c in _compat.runtime_asserts(fake_mode) if str(c) not in before]
                return gm, tuple(guards) + tuple(g for g in asserted if g is not None)
            except _compat.data_dependent_errors() as e:
                guard = _guard_from(e, symbols, L)
                if guard is None or len(guards) >= _MAX_GUARDS:
                    _data_dependent_error(e, fn, symbols, L, P)
                    return None
                guards.append(guard)


def _guard_from(e: BaseException, symbols: dict[str, tuple[int, int]], L: _Lifted,
                ) -> Guard | None:
    """The guard that lets the trace go on: the condition it could not decide, as the
    example decides it, when it names only mark_dynamic dims."""
    cond = _compat.guard_condition(e)
    if cond is None:
        return None
    names = {s.name for s in cond.free_symbols}
    if not names or not names <= set(symbols) or not all(
            symbols[n] in L.assumable for n in names):
        return None
    sizes = {n: int(L.tensors[i].shape[d]) for n, (i, d) in symbols.items()}
    decided = _compat.condition_at(cond, sizes)
    if decided is None:
        return None
    return _guard(*decided, symbols, L, user_frame(e.__traceback__))


def _guard(cond: Any, holds: bool, symbols: dict[str, tuple[int, int]], L: _Lifted,
           source: str | None) -> Guard | None:
    """`cond` (or its negation) on dynamic sizes as a Guard the artifact checks per call;
    None when it names sizes that are not the inputs' (the graph's own)."""
    names = {s.name for s in cond.free_symbols}
    if not names or not names <= set(symbols):
        return None
    expr = text = _compat.condition_source(cond, holds)
    for n in sorted(names, key=len, reverse=True):
        i, d = symbols[n]
        text = re.sub(rf"\b{n}\b", f"{L.specs[i].where}.size({d})", text)
    return Guard(expr=expr, symbols={n: symbols[n] for n in sorted(names)}, text=text,
                 source=source)


def _data_dependent_error(e: BaseException, fn: Callable, symbols: dict[str, tuple[int, int]],
                          L: _Lifted, P: Problems) -> None:
    hit = next((v for k, v in symbols.items() if re.search(rf"\b{k}\b", str(e))), None)
    if hit is not None:
        spec = L.specs[hit[0]]
        dim = f"{spec.where}.shape[{hit[1]}]"
        P.add(PrecompileError(
            f"{_fn_name(fn)}: the computation branches on the dynamic dim {dim}",
            invariant=3, stage="capture", where=user_frame(e.__traceback__) or dim,
            expected="a graph that works for every size of the dim",
            actual=str(e).splitlines()[0],
            hint=_dynamic_dim_fix(e, dim, spec.where, hit[1], hit in L.assumable),
            extra={"input": spec.where, "dim": hit[1]}))
        return
    P.add(PrecompileError(
        f"{_fn_name(fn)}: a value or a branch depends on tensor data",
        invariant=3, stage="capture",
        where=user_frame(e.__traceback__) or "inside fn",
        expected="control flow and shapes fixed by the example inputs",
        actual=f"{type(e).__name__}: {str(e).splitlines()[0]}",
        hint="keep .item(), .tolist(), bool(tensor) and data-dependent shapes out of "
             "fn: compute with tensors (torch.where instead of if), or do the "
             "data-dependent part outside the precompiled computation",
        extra={"source": user_frame(e.__traceback__)}))


def _dynamic_dim_fix(e: BaseException, dim: str, where: str, d: int, assumable: bool) -> str:
    cond = _compat.guard_condition(e)
    expr = _compat.condition_source(cond) if cond is not None else None
    if assumable:
        return (f"the graph needs a condition on {dim} that the example cannot decide"
                + (f" ({expr})" if expr else "") + ": remove the size-dependent branch, or "
                "specialise the dim (no mark)")
    return (f"mark it with torch._dynamo.mark_dynamic({where}, {d}) instead of mark_unbacked: "
            "the artifact then assumes what the example shows"
            + (f" about {expr}" if expr else "") + " and checks it on every call; or add "
            f"torch._check(...) on {dim} in fn, or remove the size-dependent branch")


# ---------------------------------------------------------------------------------------------
# lifting the arguments


class _Lifted:
    """The example arguments split into graph-input tensors and everything else."""

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []  # graph inputs, in order
        self.specs: list[TensorInput] = []
        self.args: list[Any] = []  # convention.Argument per positional argument
        self.baked: list[tuple[str, Any]] = []
        # per positional arg, how flat_fn rebuilds it from the traced tensors
        self.rebuild: list[tuple[str, Any]] = []
        self.index: dict[int, int] = {}  # id(tensor) -> its graph input
        # (graph input, dim) marked with mark_dynamic: capture may assume what the example
        # shows about its size (Note [guards from the example])
        self.assumable: set[tuple[int, int]] = set()
        # Note [DTensor at the boundary]: the device meshes seen (objects and records) and,
        # per DTensor graph input, what flat_fn wraps its local shard back into
        self.meshes: list[Any] = []
        self.mesh_records: list[Mesh] = []
        self.wrap: dict[int, tuple[Any, list[Any], DTensorLayout]] = {}

    def spec(self, t: torch.Tensor, where: str, kind: str, arg: int, P: Problems
             ) -> TensorInput:
        """The TensorInput of `t`; a DTensor's is its local shard's, with its layout."""
        spec = _tensor_spec(t, where, kind, arg, P)
        if not _compat.is_dtensor(t):
            if _compat.is_tensor_subclass(t):
                P.add(PrecompileError(
                    f"{where} is a {type(t).__name__}, a tensor subclass the artifact does not "
                    "carry", invariant=6, stage="capture", where=where,
                    expected="plain tensors, or DTensors", actual=type(t).__name__,
                    hint="pass its plain tensors (the attributes its __tensor_flatten__ "
                         "names) and build the subclass inside fn"))
            return spec
        layout = self.layout(t, where, P, new_mesh=True)
        local = _compat.dtensor_local(t)
        self.wrap[len(self.specs)] = (_compat.dtensor_mesh(t), list(t.placements), layout)
        return dataclasses.replace(spec, shape=tuple(local.shape), stride=tuple(local.stride()),
                                   device=str(local.device), dtensor=layout)

    def layout(self, t: torch.Tensor, where: str, P: Problems, *, new_mesh: bool = False
               ) -> DTensorLayout:
        """A DTensor's layout record; its mesh must be an input's unless `new_mesh`."""
        mesh = _compat.dtensor_mesh(t)
        k = next((k for k, m in enumerate(self.meshes) if m is mesh or m == mesh), None)
        if k is None and not new_mesh:
            P.add(PrecompileError(
                f"{where} is a DTensor on a device mesh that no input lives on", invariant=1,
                stage="capture", where=where, expected="DTensor results on the mesh of a "
                "DTensor input or parameter", actual=f"mesh {mesh}",
                hint="return it on the model's mesh, or return its local part (.to_local())"))
        if k is None:
            k = len(self.meshes)
            self.meshes.append(mesh)
            self.mesh_records.append(Mesh(
                device_type=mesh.device_type, shape=tuple(mesh.shape),
                dim_names=None if mesh.mesh_dim_names is None else tuple(mesh.mesh_dim_names),
                groups=tuple(_compat.mesh_groups(mesh))))
        texts = [placement_text(p) if _compat.is_carried_placement(p) else None
                 for p in t.placements]
        if None in texts:
            P.add(PrecompileError(
                f"{where}: a DTensor placement the artifact cannot carry", invariant=3,
                stage="capture", where=where, expected="Shard(d), Replicate() or Partial(op)",
                actual=str(t.placements),
                hint="redistribute it to Shard/Replicate placements before fn, or pass its "
                     "local tensor (.to_local())"))
        return DTensorLayout(mesh=k, placements=tuple(x or "?" for x in texts),
                             shape=tuple(t.shape), stride=tuple(t.stride()))

    def add_input(self, t: torch.Tensor, where: str, arg: int, P: Problems) -> int:
        """Graph input of a user tensor; one tensor passed twice is one input (invariant 4:
        an in-place update through one is seen through the other, as in eager)."""
        if id(t) in self.index:
            return self.index[id(t)]
        k = self.index[id(t)] = len(self.tensors)
        self.tensors.append(t)
        self.specs.append(self.spec(t, where, "input", arg, P))
        self.assumable.update((k, d) for d in _compat.dim_marks(t).dynamic)
        return k


def _arg_names(fn: Callable, n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        p = params[i] if i < len(params) else None
        if p is not None and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        else:
            names.append(f"args[{i}]")
    return names


def _module_args(example_inputs: Sequence[Any], names: list[str]) -> dict[str, torch.nn.Module]:
    out = {}
    for a, n in zip(example_inputs, names):
        if isinstance(a, torch.nn.Module) and n.isidentifier() and n not in out:
            out[n] = a
    return out


def _fn_name(fn: Callable) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "fn" if name == "<lambda>" else name


def _tensor_spec(t: torch.Tensor, where: str, kind: str, arg: int,
                 P: Problems) -> TensorInput:
    marks = _compat.dim_marks(t)
    _check_marks(t, where, kind, marks, P)
    dynamic = {**marks.unbacked, **marks.dynamic} if kind == "input" else {}
    return TensorInput(where=where, kind=kind, arg=arg, shape=tuple(t.shape),
                       stride=tuple(t.stride()), dtype=str(t.dtype).replace("torch.", ""),
                       device=str(t.device), requires_grad=bool(t.requires_grad),
                       dynamic=dynamic,
                       shape_ids={d: i for d, i in marks.shape_ids.items() if d in dynamic})


def _check_marks(t: torch.Tensor, where: str, kind: str, marks: _compat.DimMarks,
                 P: Problems) -> None:
    """Invariant 3: a dimension mark is honoured or refused here, never dropped."""
    def refuse(what: str, actual: str, hint: str) -> None:
        P.add(PrecompileError(what, invariant=3, stage="capture", where=where,
                              expected="dims marked with mark_dynamic or mark_unbacked, or "
                                       "no marks",
                              actual=actual, hint=hint))

    if marks.specialize_on:
        refuse(f"{where}: mark_unbacked(specialize_on=...) asks for several specialised "
               "graphs; an artifact is one graph", f"specialize_on for dims "
               f"{list(marks.specialize_on)}", "drop specialize_on (one graph serves every "
               "size), or precompile one artifact per size you want specialised")
    marked = sorted({*marks.unbacked, *marks.dynamic})
    if marked and kind != "input":
        refuse(f"{where}: a model {kind} has a dynamic dim", f"marked dims {marked}",
               "mark the dims of fn's tensor arguments; model weights are specialised "
               "(invariant 2)")
    elif marked and _compat.is_tensor_subclass(t):
        refuse(f"{where}: dynamic dims on a tensor subclass ({type(t).__name__}) are not "
               "supported", f"marked dims {marked}",
               "remove the mark (the artifact specialises to the example's shape)")
    elif marked and dense_order(tuple(t.shape), tuple(t.stride())) is None:
        P.add(PrecompileError(
            f"{where}: a tensor with a dynamic dim must be dense", invariant=6,
            stage="capture", where=where,
            expected="a dense layout: contiguous, channels_last, or a permutation such as .t()",
            actual=f"stride={list(t.stride())} for shape={list(t.shape)}",
            hint=f"pass {where}.contiguous() as the example (and at every call)"))


def _lift(example_inputs: Sequence[Any], names: list[str], P: Problems) -> _Lifted:
    L = _Lifted()
    for i, a in enumerate(example_inputs):
        path = names[i]
        if isinstance(a, torch.nn.Module):
            _lift_module(L, a, path, i, P)
        elif isinstance(a, torch.Tensor):
            n = len(L.tensors)
            k = L.add_input(a, path, i, P)
            L.rebuild.append(("tensor", k))
            L.args.append(TensorArg(path=path, same_as=-1 if k == n else k))
        else:
            _lift_container(L, a, path, i, P)
    return L


def _lift_module(L: _Lifted, a: torch.nn.Module, path: str, i: int, P: Problems) -> None:
    _refuse_data_parallel(a, path, P)
    index: dict[int, int] = {}
    params = list(a.named_parameters())  # tied weights collapse by identity
    buffers = list(a.named_buffers())
    for kind, entries in (("param", params), ("buffer", buffers)):
        for n, t in entries:
            index[id(t)] = len(L.tensors)
            L.index.setdefault(id(t), len(L.tensors))
            L.tensors.append(t)
            L.specs.append(L.spec(t, f"{path}.{n}", kind, i, P))
    # every name, tied aliases included, so reparametrization sees the one tensor
    all_names = ([(n, index[id(t)]) for n, t in a.named_parameters(remove_duplicate=False)]
                 + [(n, index[id(t)]) for n, t in a.named_buffers(remove_duplicate=False)])
    L.args.append(ModuleArg(
        path=path, names=tuple(n for n, _ in params + buffers), n_params=len(params),
        training=bool(a.training)))
    L.rebuild.append(("module", all_names))


def _refuse_data_parallel(a: torch.nn.Module, path: str, P: Problems) -> None:
    """Note [data-parallel wrappers]: FSDP2's fully_shard, FSDP and DDP keep the real
    parameters in their own buffers and run their collectives from module and autograd hooks
    with eager process-group calls, outside what a trace on the module's parameters sees
    (measured, torch 2.13, 2 gloo ranks: tracing a fully_shard model crashed the process).
    So they are refused before anything runs. Tensor parallelism (parallelize_module,
    DTensor parameters) is captured whole, its collectives in the graph."""
    found = _compat.data_parallel_wrapper(a)
    if found is None:
        return
    sub, kind = found
    where = ".".join(x for x in (path, sub) if x)
    P.add(PrecompileError(
        f"{where} is wrapped by {kind}, whose collectives run in hooks outside the graph",
        invariant=4, stage="capture", where=where,
        expected="a model whose parameters are plain tensors or DTensors (tensor parallel)",
        actual=kind,
        hint="precompile the unwrapped model (for DDP: model.module) and reduce the "
             "gradients after the call (dist.all_reduce on each .grad), or shard it with "
             "tensor parallelism (parallelize_module), whose collectives are captured; "
             "for FSDP2 training use torch.compile, which FSDP2 supports"))


def _lift_container(L: _Lifted, a: Any, path: str, i: int, P: Problems) -> None:
    with_path, spec = pytree.tree_flatten_with_path(a)
    if spec.is_leaf():
        value = _literal(a, path, P)
        L.baked.append((path, a))
        L.args.append(ConstArg(path=path, value=value))
        L.rebuild.append(("const", a))
        return
    leaves, slots = [], []
    for kp, leaf in with_path:
        where = path + pytree.keystr(kp)
        if isinstance(leaf, torch.Tensor):
            n = len(L.tensors)
            k = L.add_input(leaf, where, i, P)
            slots.append(k)
            leaves.append(Leaf(path=where, tensor=True, value=None,
                               same_as=-1 if k == n else k))
            continue
        if isinstance(leaf, torch.nn.Module):
            P.add(PrecompileError(
                f"a module is nested inside argument '{path}'", invariant=1,
                stage="capture", where=where, expected="nn.Module as a "
                "top-level positional argument", actual="nested in a container",
                hint="pass each model as its own positional argument of fn"))
        slots.append(None)
        L.baked.append((where, leaf))
        leaves.append(Leaf(path=where, tensor=False, value=_literal(leaf, where, P)))
    L.args.append(PytreeArg(path=path, spec=tree_literal(spec, path, P),
                            leaves=tuple(leaves)))
    L.rebuild.append(("pytree", (spec, slots, [lf for _, lf in with_path])))


def tree_literal(spec: Any, where: str, P: Problems) -> dict[str, Any]:
    """A pytree structure as the convention's literal (Note [tree literal] in _driver.py)."""
    if spec.is_leaf():
        return {"type": "leaf"}
    kids = [tree_literal(c, where, P) for c in _compat.treespec_children(spec)]
    if spec.type in (tuple, list):
        return {"type": spec.type.__name__, "children": kids}
    if spec.type is type(None):
        return {"type": "None"}
    if spec.type in (dict, collections.OrderedDict) and all(
            isinstance(k, (bool, int, float, str)) for k in spec.context):
        return {"type": spec.type.__name__, "keys": list(spec.context), "children": kids}
    cls = _compat.namedtuple_class(spec)
    if cls is not None:
        name = cls.__qualname__
        if find_class(cls.__module__, name) is not cls:
            P.add(PrecompileError(
                f"the namedtuple {cls.__name__} in {where} is defined inside a function",
                invariant=3, stage="capture", where=f"{where} ({cls.__module__}.{name})",
                expected="a namedtuple class found by its module and name (how the "
                         "artifact finds it again when it is loaded)",
                actual=f"{cls.__module__}.{name} is not this class",
                hint=f"define {cls.__name__} at the top level of its module"))
        return {"type": "namedtuple", "module": cls.__module__, "name": name,
                "fields": list(cls._fields), "children": kids}
    try:
        return {"type": "pytree", "dumps": pytree.treespec_dumps(spec)}
    except Exception as e:  # noqa: BLE001 - torch cannot serialise this container type
        P.add(PrecompileError(
            f"{where}: a container of type {getattr(spec.type, '__name__', spec.type)} cannot "
            "be carried by the artifact", invariant=3, stage="capture", where=where,
            expected="tuples, lists, dicts, namedtuples, or containers torch's pytree can "
                     "serialise", actual=f"{type(e).__name__}: {str(e)[:160]}",
            hint="pass (or return) a tuple, list, dict or a module-level namedtuple instead"))
        return {"type": "leaf"}


def _literal(v: Any, where: str, P: Problems | None = None) -> Any:
    """A non-tensor input/output value as a plain literal for the convention (checked per
    call)."""
    if isinstance(v, _LITERAL_TYPES):
        if isinstance(v, float) and not math.isfinite(v):
            (P or Problems()).add(PrecompileError(
                "a non-finite float cannot be baked", invariant=3, stage="capture", where=where,
                expected="a finite number", actual=repr(v),
                hint="pass it as a tensor (torch.tensor(v)) instead"))
            return repr(v)
        return v
    if isinstance(v, torch.dtype):
        return ["__torch.dtype__", str(v).replace("torch.", "")]
    if isinstance(v, torch.device):
        return ["__torch.device__", str(v)]
    (P or Problems()).add(PrecompileError(
        f"unsupported non-tensor value of type {type(v).__name__}", invariant=3,
        stage="capture", where=where,
        expected="tensor, nn.Module, or a bool/int/float/str/None/dtype/device (baked and "
                 "checked per call), in tuples/lists/dicts",
        actual=f"{type(v).__name__}: {v!r:.80}",
        hint="pass tensors for data; fold other configuration into fn (a closure or "
             "functools.partial) so it is baked explicitly"))
    return repr(v)


def _trace_inputs(L: _Lifted) -> list[torch.Tensor]:
    """What make_fx traces with: detached views that make_fx turns into fakes (the real
    tensors are never written: capture leaves the world as it found it)."""
    out = []
    for k, (t, s) in enumerate(zip(L.tensors, L.specs)):
        if k in L.wrap:  # Note [DTensor at the boundary]: the graph takes the local shard
            out.append(_compat.dtensor_local(t).detach())
            continue
        d = t.detach()
        if s.requires_grad:
            d.requires_grad_(True)  # a leaf: backward inside fn accumulates into its .grad
        out.append(d)
    return out


def _wrapped(L: _Lifted, ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The traced graph inputs as fn sees them: DTensor inputs rebuilt around their local
    shards (a leaf that requires grad where the input did, so backward fills its .grad)."""
    out = list(ts)
    for k, (mesh, placements, layout) in L.wrap.items():
        d = _compat.dtensor_from_local(ts[k], mesh, placements, layout.shape, layout.stride)
        if L.specs[k].requires_grad:
            d.requires_grad_(True)
        out[k] = d
    return out


def _make_flat_fn(fn: Callable, example_inputs: Sequence[Any], L: _Lifted,
                  state: dict[str, Any], P: Problems) -> Callable:
    def flat_fn(*ts: torch.Tensor):
        ws = _wrapped(L, ts)
        args = []
        with contextlib.ExitStack() as stack:
            for (kind, data), a in zip(L.rebuild, example_inputs):
                if kind == "module":
                    stack.enter_context(_compat.reparametrize(a, {n: ws[k] for n, k in data}))
                    args.append(a)
                elif kind == "tensor":
                    args.append(ws[data])
                elif kind == "pytree":
                    spec, slots, leaves = data
                    args.append(pytree.tree_unflatten(
                        [lf if k is None else ws[k] for k, lf in zip(slots, leaves)], spec))
                else:
                    args.append(data)
            versions = [t._version for t in ts]
            out = fn(*args)
        leaves, spec = pytree.tree_flatten(out)
        tensor_outs, out_leaves, aliases = [], [], []
        keys = [_compat.storage_key(t) for t in ts]
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                layout = None
                if _compat.is_dtensor(leaf):  # Note [DTensor at the boundary]
                    layout = L.layout(leaf, "fn's result", P)
                    leaf = _compat.dtensor_local(leaf)
                key = _compat.storage_key(leaf)
                k = next((k for k, kk in enumerate(keys) if kk == key), None)
                if k is not None:  # invariant 4: this result views input k
                    if k in L.wrap or layout is not None:
                        _dtensor_view_refused(L.specs[k].where, P)
                    aliases.append((len(tensor_outs), AliasOut(
                        index=k, size=tuple(leaf.shape), stride=tuple(leaf.stride()),
                        offset=leaf.storage_offset())))
                out_leaves.append(GraphOut(index=len(tensor_outs), dtensor=layout))
                tensor_outs.append(leaf)
            else:
                out_leaves.append(ConstOut(value=_literal(leaf, "fn's result", P)))
        grads = []
        for k, t in enumerate(ws):
            if t.requires_grad and t.grad is not None:
                g, layout = t.grad, None
                if _compat.is_dtensor(g):
                    layout = L.layout(g, f"{L.specs[k].where}.grad", P)
                    g = _compat.dtensor_local(g)
                grads.append((k, len(tensor_outs) + len(grads), g, layout))
        state["out_spec"] = spec
        state["out_leaves"] = out_leaves
        state["n_user_outputs"] = len(tensor_outs)
        state["grads"] = [WriteBack(input=k, output=o, dtensor=lay) for k, o, _, lay in grads]
        state["aliases"] = aliases
        state["mutated"] = [k for k, t in enumerate(ts) if t._version != versions[k]]
        return tuple(tensor_outs) + tuple(g for _, _, g, _ in grads)

    return flat_fn


def _dtensor_view_refused(where: str, P: Problems) -> None:
    P.add(PrecompileError(
        f"fn returns a view of the DTensor {where}", invariant=4, stage="capture",
        where=where, expected="DTensor results that are new tensors",
        actual="a view of a DTensor input (or a DTensor view of a plain input)",
        hint="return a copy (.clone()), or return the input itself and view it after the "
             "call"))


# ---------------------------------------------------------------------------------------------
# graph checks


def _source_line(owner: Any, token: str) -> str | None:
    """'file:line: code' of the first line of `owner`'s source that mentions `token` (where
    the user's code reads a tensor it should have passed in)."""
    try:
        lines, start = inspect.getsourcelines(owner)
        path = inspect.getsourcefile(owner) or "<source>"
    except (OSError, TypeError):
        return None
    pat = re.compile(rf"(?<![\w.]){re.escape(token)}\b" if "." not in token
                     else re.escape(token))
    for k, ln in enumerate(lines):
        code = ln.split("#")[0]
        if pat.search(code) and not code.lstrip().startswith(("def ", "class ")):
            return f"{path}:{start + k}: {ln.strip()}"
    return None


def _external_tensors(fn: Callable, example_inputs: Sequence[Any],
                      names: list[str]) -> dict[int, tuple[str, str, str | None]]:
    """Tensors fn can reach without them being inputs: id -> (where, fix, source line)."""
    found: dict[int, tuple[str, str, str | None]] = {}

    def add(obj: Any, var: str, where: str, fix: str, owner: Any) -> None:
        if isinstance(obj, torch.Tensor):
            found.setdefault(id(obj), (where, fix, _source_line(owner, var)))
        elif isinstance(obj, torch.nn.Module):
            src = _source_line(owner, var)
            for n, t in list(obj.named_parameters()) + list(obj.named_buffers()):
                found.setdefault(id(t), (f"{where}, its {n}",
                                         f"pass `{var}` to fn as a positional argument "
                                         "instead of closing over it", src))

    def scan_function(f: Any, depth: int) -> None:
        code = getattr(f, "__code__", None)
        if code is None or depth > 2:
            return
        tensor_fix = ("pass `{v}` to fn as an argument (or register it on the model with "
                      "register_buffer / nn.Parameter)")
        for var, cell in zip(code.co_freevars, getattr(f, "__closure__", None) or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            add(v, var, f"closure variable '{var}'", tensor_fix.format(v=var), f)
            scan_function(v, depth + 1)
        g = getattr(f, "__globals__", {})
        co_names = set(code.co_names)
        for c in code.co_consts:
            if inspect.iscode(c):
                co_names |= set(c.co_names)
        for var in co_names:
            if var in g:
                add(g[var], var, f"global '{var}'", tensor_fix.format(v=var), f)
        for k, v in enumerate(getattr(f, "__defaults__", None) or ()):
            add(v, f"default #{k}", f"default argument #{k}",
                "pass it explicitly as an argument", f)

    scan_function(fn, 0)
    for i, a in enumerate(example_inputs):
        if isinstance(a, torch.nn.Module):
            for mpath, sub in a.named_modules():
                registered = set(sub._parameters) | set(sub._buffers)
                for k, v in vars(sub).items():
                    if isinstance(v, torch.Tensor) and k not in registered:
                        full = ".".join(p for p in (names[i], mpath, k) if p)
                        found[id(v)] = (
                            f"plain module attribute {full} (not a registered parameter or "
                            "buffer)",
                            f"register it: self.register_buffer('{k}', tensor) or "
                            f"self.{k} = nn.Parameter(tensor)",
                            _source_line(type(sub).forward, f"self.{k}"))
    return found


def _check_constants(gm: torch.fx.GraphModule, fn: Callable, example_inputs: Sequence[Any],
                     names: list[str], L: _Lifted, P: Problems) -> list[Constant]:
    """Invariant 1. Tensor constants in the trace are either small tensors fn created itself
    (kept as literals and lifted to inputs) or live data fn reached around its arguments
    (rejected, all of them named at once)."""
    const_nodes = [n for n in gm.graph.nodes if n.op == "get_attr"
                   and isinstance(getattr(gm, n.target, None), torch.Tensor)]
    if not const_nodes:
        return []
    external = _external_tensors(fn, example_inputs, names)
    bad, keep = [], []
    for n in const_nodes:
        t = getattr(gm, n.target)
        hit = external.get(id(t)) or (external.get(id(t._base)) if t._base is not None else None)
        only_fresh = all(u.target is torch.ops.aten.lift_fresh_copy.default for u in n.users)
        finite = t.is_floating_point() is False or bool(torch.isfinite(t).all())
        if hit is None and only_fresh and t.numel() <= MAX_LITERAL_NUMEL and finite:
            keep.append(n)
        else:
            where, fix, src = hit or (
                f"a tensor constant of shape {list(t.shape)} (graph node {n.name})",
                "make it an input: pass it to fn or register it on the model", None)
            users = [u.name for u in n.users]
            stack = next((u.meta.get("stack_trace") for u in n.users
                          if u.meta.get("stack_trace")), None)
            bad.append((where, fix, t, users, src or user_frame(stack)))
    if bad and P.collect:  # the dry-run checker: one finding per offender
        for where, fix, t, users, src in bad:
            P.add(PrecompileError(
                f"{_fn_name(fn)} reads a tensor that is not an input", invariant=1,
                stage="capture", where=where, expected="an argument or a registered "
                "parameter/buffer", actual=f"baked constant shape={list(t.shape)} "
                f"dtype={t.dtype}", hint=fix,
                extra={"offenders": [where], "nodes": users, "source": src}))
        return []
    if bad:
        where, fix, t, users, src = bad[0]
        raise PrecompileError(
            f"{_fn_name(fn)} reads {len(bad)} tensor(s) that are not inputs; they would be "
            "baked into the artifact as constants", invariant=1, stage="capture", where=where,
            expected="every tensor fn reads arrives as an argument or a registered "
                     "parameter/buffer of a module argument",
            actual=f"baked constant shape={list(t.shape)} dtype={t.dtype}"
                   + ("; also: " + "; ".join(b[0] for b in bad[1:]) if len(bad) > 1 else ""),
            hint=fix,
            extra={"offenders": [b[0] for b in bad],
                   "nodes": [u for b in bad for u in b[3]],
                   "source": src})
    # lift the kept literals into placeholders after the inputs
    specs = []
    last_ph = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    for k, n in enumerate(keep):
        t = getattr(gm, n.target)
        with gm.graph.inserting_after(last_ph):
            ph = gm.graph.placeholder(f"_pc_const{k}")
        last_ph = ph
        ph.meta = dict(n.meta)
        ph.meta["val"] = _fake_like(gm, t)
        n.replace_all_uses_with(ph)
        gm.graph.erase_node(n)
        delattr(gm, n.target)
        specs.append(Constant(shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""),
                                  device=str(t.device), data=t.detach().cpu().tolist()))
    return specs


def _fake_like(gm: torch.fx.GraphModule, t: torch.Tensor) -> Any:
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
    return mode.from_tensor(t) if mode is not None else t


def _check_nodes(gm: torch.fx.GraphModule, fn: Callable, P: Problems) -> None:
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if _compat.has_effects(n.target):
            P.add(PrecompileError(
                f"{_fn_name(fn)} calls a side-effecting op that cannot be captured",
                invariant=4, stage="capture", where=f"graph node {n.name} ({n.target})",
                expected="pure tensor ops and in-place updates of inputs/buffers",
                actual=str(n.target), hint="move the side effect (printing, logging, "
                "effectful custom ops) outside fn",
                extra={"nodes": [n.name],
                       "source": user_frame(n.meta.get("stack_trace"))}))
        if n.target is torch.ops.aten._local_scalar_dense.default:
            P.add(PrecompileError(
                f"{_fn_name(fn)} reads a tensor's value into Python (.item())", invariant=3,
                stage="capture", where=user_frame(n.meta.get("stack_trace"))
                or f"graph node {n.name}",
                expected="no data-dependent Python values", actual=".item() / .tolist()",
                hint="keep the value a tensor (e.g. x * t instead of x * t.item())",
                extra={"nodes": [n.name],
                       "source": user_frame(n.meta.get("stack_trace"))}))


_FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "arange", "scalar_tensor",
              "empty_strided", "randint", "linspace", "eye", "new_zeros", "new_ones",
              "new_empty", "new_full", "zeros_like", "ones_like", "empty_like", "full_like",
              "rand_like", "randn_like"}


def _pin_factory_dtypes(gm: torch.fx.GraphModule) -> None:
    """Factory ops traced without dtype= would follow the *caller's* default dtype at run
    time; pin them to what capture saw (invariant 6: dtypes are specialized)."""
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        if n.target.__name__.split(".")[0] not in _FACTORIES:
            continue
        schema_args = {a.name for a in n.target._schema.arguments}
        val = n.meta.get("val")
        if "dtype" in schema_args and n.kwargs.get("dtype") is None and isinstance(
                val, torch.Tensor):
            n.kwargs = {**n.kwargs, "dtype": val.dtype}


def _schema_mutated(gm: torch.fx.GraphModule) -> set[int]:
    """Graph inputs written by an op's schema (native_batch_norm writes its running stats
    without bumping the fake tensor's version counter)."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        for a, v in zip(n.target._schema.arguments, n.args):
            if a.alias_info is not None and a.alias_info.is_write and v in phs:
                out.add(phs.index(v))
        # legacy schemas that update running stats without declaring it (training=True)
        if n.target.__name__.split(".")[0] in _BN_LEGACY and len(n.args) > 5 and n.args[5]:
            out.update(phs.index(v) for v in n.args[3:5] if v in phs)
    return out


_BN_LEGACY = {"native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm"}


def _name_placeholders(gm: torch.fx.GraphModule, specs: Sequence[TensorInput]) -> None:
    """arg7_1 -> m_1_running_mean: the graph, the eager source and the viewers read better."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, s in zip(phs, specs):
        name = re.sub(r"\W+", "_", s.where).strip("_") or "input"
        if name[0].isdigit():
            name = "_" + name
        _compat.rename_node(n, name)


def _drop_detach(gm: torch.fx.GraphModule) -> None:
    """detach is a no-op once autograd has been traced away; dropping it keeps Inductor from
    materialising copies of it."""
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.detach.default:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)


# ---------------------------------------------------------------------------------------------
# plain data for the viewers


def graph_nodes(c: Captured) -> tuple[GraphNodeInfo, ...]:
    gm = c.graph
    nodes = list(gm.graph.nodes)
    out_node = nodes[-1]
    outs = list(out_node.args[0]) if out_node.op == "output" else []
    user_outs = outs[:c.n_user_outputs]

    def ancestors(roots):
        seen, todo = set(), [r for r in roots if isinstance(r, torch.fx.Node)]
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            todo.extend(x.all_input_nodes)
        return seen

    forward = ancestors(user_outs)
    backward = ancestors(outs[c.n_user_outputs:]) - forward
    ph_roles = [s.kind for s in c.inputs] + ["constant"] * len(c.constants)
    # autograd sequence number -> the forward op node that recorded it (first one wins)
    forward_of: dict[Any, torch.fx.Node] = {}
    for n in nodes:
        if n in forward and n.op == "call_function" and n.meta.get("seq_nr", -1) >= 0:
            forward_of.setdefault(n.meta["seq_nr"], n)
    ph_index = 0
    infos = []
    modules: dict[torch.fx.Node, str] = {}
    for n in nodes:
        val = n.meta.get("val")
        shape = dtype = None
        if isinstance(val, torch.Tensor):
            shape = tuple(d if isinstance(d, int) else str(d) for d in val.shape)
            dtype = str(val.dtype).replace("torch.", "")
        if n.op == "placeholder":
            role = ph_roles[ph_index] if ph_index < len(ph_roles) else "input"
            label = (c.inputs[ph_index].where if ph_index < len(c.inputs)
                     else f"constant {ph_index - len(c.inputs)}")
            ph_index += 1
            target = label
        elif n.op == "output":
            role, target = "output", "output"
        else:
            role = ("collective" if _compat.is_collective(n.target)  # tensor parallelism
                    else "gradient" if n in backward else "compute")
            target = str(n.target).replace("torch.ops.", "")
        module = _module_of(n, modules, c, ph_index, forward_of)
        modules[n] = module
        infos.append(GraphNodeInfo(
            name=n.name, op=n.op, target=target,
            args=tuple(a.name for a in n.all_input_nodes), shape=shape, dtype=dtype, role=role,
            module=module, stack=user_frame(n.meta.get("stack_trace"))))
    return tuple(infos)


def _module_of(n: torch.fx.Node, known: dict[torch.fx.Node, str], c: Captured,
               ph_index: int, forward_of: dict[Any, torch.fx.Node]) -> str:
    """The nn.Module path a node belongs to, for grouping the graph view and the profile.
    Forward ops: make_fx's nn_module_stack. Parameters/buffers: their owner ("m.0.weight" ->
    "m.0"). Backward ops carry no module stack (autograd runs them): they join the module of
    the forward op they differentiate (its autograd sequence number, _compat.
    backward_op_origins), else of the deepest forward value they read, else of the gradient
    flowing into them."""
    mstack = n.meta.get("nn_module_stack") or {}
    if mstack:
        return str(list(mstack.values())[-1][0])
    if n.op == "placeholder":
        k = ph_index - 1
        if 0 <= k < len(c.inputs) and c.inputs[k].kind in ("param", "buffer"):
            return c.inputs[k].where.rsplit(".", 1)[0]
        return ""
    if n.op == "output":
        return ""
    origin = forward_of.get(n.meta.get("seq_nr"))  # the forward op this one differentiates
    if origin is not None and origin is not n:
        return known.get(origin, "")
    fwd = [known.get(a, "") for a in n.all_input_nodes
           if a.op == "placeholder" or a.meta.get("nn_module_stack")]
    fwd = [m for m in fwd if m]
    if fwd:
        return max(fwd, key=lambda m: m.count("."))
    inherited = [known.get(a, "") for a in n.all_input_nodes if known.get(a)]
    return max(inherited, key=lambda m: m.count(".")) if inherited else ""
