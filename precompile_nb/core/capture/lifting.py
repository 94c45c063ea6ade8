"""Capture, step 1: the example arguments lifted to graph inputs.

Every parameter, buffer and tensor (at any depth of a container) becomes one graph input, tied
weights and a tensor passed twice collapsing to one; everything else is baked as a literal
that the artifact checks per call. `_make_flat_fn` is what make_fx traces: it rebuilds fn's
arguments from the traced tensors (DTensors around their local shards, Note [DTensor at the
boundary] in runtime/driver.py) and records what fn returned.
"""
from __future__ import annotations

import collections
import contextlib
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from ...runtime.convention import (
    AliasOut,
    ConstArg,
    ConstOut,
    DTensorLayout,
    GraphOut,
    Leaf,
    Mesh,
    ModuleArg,
    PytreeArg,
    SizeOut,
    TensorArg,
    TensorInput,
    WriteBack,
    find_class,
    placement_text,
    size_functions,
)
from .. import _compat
from ..errors import PrecompileError, Problems
from . import data_parallel
from .marks import _check_marks, sizes_text
from .optim import _lift_optimizer, is_optimizer, traced_optimizer

_LITERAL_TYPES = (bool, int, float, str, type(None))


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
        # Note [module attributes read]: {(id(module), name): value} fn read while traced
        self.attr_reads: dict[tuple[int, str], Any] = {}
        # id(module) -> (its positional argument, its name in that model's named_modules())
        self.module_paths: dict[int, tuple[int, str]] = {}

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
        return spec._replace(shape=tuple(local.shape), stride=tuple(local.stride()),
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


def _tensor_spec(t: torch.Tensor, where: str, kind: str, arg: int,
                 P: Problems) -> TensorInput:
    if _compat.is_nested(t):
        P.add(PrecompileError(
            f"{where} is a nested tensor, which the artifact does not carry", invariant=6,
            stage="capture", where=where, expected="dense tensors (or DTensors)",
            actual=f"nested tensor ({t.layout})",
            hint="pass the padded tensor (t.to_padded_tensor(0)) with a mask or the lengths, "
                 "or its components as a list of tensors"))
    marks = _compat.dim_marks(t)
    dynamic = _check_marks(t, where, kind, marks, P)
    return TensorInput(where=where, kind=kind, arg=arg, shape=tuple(t.shape),
                       stride=tuple(t.stride()), dtype=str(t.dtype).replace("torch.", ""),
                       device=str(t.device), requires_grad=bool(t.requires_grad),
                       dynamic=dynamic,
                       shape_ids={d: i for d, i in marks.shape_ids.items() if d in dynamic})


def _lift(example_inputs: Sequence[Any], names: list[str], P: Problems) -> _Lifted:
    L = _Lifted()
    for i, a in enumerate(example_inputs):
        path = names[i]
        if isinstance(a, torch.nn.Module):
            _lift_module(L, a, path, i, P)
        elif is_optimizer(a):  # Note [optimizer at the boundary] in runtime/driver.py
            _lift_optimizer(L, a, path, i, P)
        elif isinstance(a, torch.Tensor):
            n = len(L.tensors)
            k = L.add_input(a, path, i, P)
            L.rebuild.append(("tensor", k))
            L.args.append(TensorArg(path=path, same_as=-1 if k == n else k))
        else:
            _lift_container(L, a, path, i, P)
    return L


def _lift_module(L: _Lifted, a: torch.nn.Module, path: str, i: int, P: Problems) -> None:
    parallel = data_parallel.plan(a, path, P)  # Note [data parallel in the graph]
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
    for name, mod in a.named_modules():
        L.module_paths.setdefault(id(mod), (i, name))
    L.rebuild.append(("module", (all_names, parallel)))


def _named_leaves(tree: Any, root: str) -> tuple[list[tuple[str, Any]], Any]:
    """The leaves of a pytree with their paths (`root` + keystr), and its spec. A node type
    registered without flatten_with_keys_fn has no key paths: its leaves are named by index."""
    try:
        with_path, spec = pytree.tree_flatten_with_path(tree)
    except ValueError:  # "Did not find a flatten_with_keys_fn" (2.11-2.15)
        leaves, spec = pytree.tree_flatten(tree)
        return [(f"{root}[leaf {k}]", leaf) for k, leaf in enumerate(leaves)], spec
    return [(root + pytree.keystr(kp), leaf) for kp, leaf in with_path], spec


def _lift_container(L: _Lifted, a: Any, path: str, i: int, P: Problems) -> None:
    with_path, spec = _named_leaves(a, path)
    if spec.is_leaf():
        value = _literal(a, path, P)
        L.baked.append((path, a))
        L.args.append(ConstArg(path=path, value=value))
        L.rebuild.append(("const", a))
        return
    leaves, slots = [], []
    for where, leaf in with_path:
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
    """A pytree structure as the convention's literal (Note [tree literal] in runtime/driver.py).
    A tree with a node only torch's own serialized form can carry (a registered class, such as
    a Hugging Face cache inside a ModelOutput) is carried whole in that form: the driver then
    loads its spec as torch wrote it, never rebuilding the class around placeholders."""
    lit = _tree_literal(spec, where, P)
    if lit["type"] != "pytree" and _has_pytree(lit):
        return _dumps(spec) or lit
    return lit


def _has_pytree(lit: dict[str, Any]) -> bool:
    return lit["type"] == "pytree" or any(_has_pytree(c) for c in lit.get("children", ()))


def _tree_literal(spec: Any, where: str, P: Problems) -> dict[str, Any]:
    if spec.is_leaf():
        return {"type": "leaf"}
    kids = [_tree_literal(c, where, P) for c in _compat.treespec_children(spec)]
    if spec.type in (tuple, list):
        return {"type": spec.type.__name__, "children": kids}
    if spec.type is torch.Size:
        return {"type": "Size", "children": kids}
    if spec.type is type(None):
        return {"type": "None"}
    if spec.type in (dict, collections.OrderedDict) and all(
            isinstance(k, (bool, int, float, str)) for k in spec.context):
        return {"type": spec.type.__name__, "keys": list(spec.context), "children": kids}
    seq = _compat.structseq_class(spec)
    if seq is not None:  # torch.return_types: x.max(1), torch.sort(x), ...
        return {"type": "structseq", "module": seq.__module__, "name": seq.__qualname__,
                "fields": _compat.structseq_fields(seq), "children": kids}
    cls = _compat.namedtuple_class(spec)
    if cls is not None:
        name = cls.__qualname__
        if find_class(cls.__module__, name) is not cls:
            dumped = _dumps(spec)  # registered with a serialized_type_name: found by that
            if dumped is not None:
                return dumped
            P.add(PrecompileError(
                f"the namedtuple {cls.__name__} in {where} is defined inside a function",
                invariant=3, stage="capture", where=f"{where} ({cls.__module__}.{name})",
                expected="a namedtuple class found by its module and name (how the "
                         "artifact finds it again when it is loaded)",
                actual=f"{cls.__module__}.{name} is not this class",
                hint=f"define {cls.__name__} at the top level of its module, or register "
                     "it with torch.utils._pytree._register_namedtuple(cls, "
                     "serialized_type_name=...)"))
        return {"type": "namedtuple", "module": cls.__module__, "name": name,
                "fields": list(cls._fields), "children": kids}
    dumped = _dumps(spec)
    if dumped is not None:
        return dumped
    try:
        pytree.treespec_dumps(spec)
    except Exception as e:  # noqa: BLE001 - torch cannot serialise this container type
        P.add(PrecompileError(
            f"{where}: a container of type {getattr(spec.type, '__name__', spec.type)} cannot "
            "be carried by the artifact", invariant=3, stage="capture", where=where,
            expected="tuples, lists, dicts, namedtuples, or containers torch's pytree can "
                     "serialise", actual=f"{type(e).__name__}: {str(e)[:160]}",
            hint="pass (or return) a tuple, list, dict or a module-level namedtuple instead, "
                 "or register the class with a serialized_type_name "
                 "(torch.utils._pytree.register_pytree_node(..., serialized_type_name=...))"))
    return {"type": "leaf"}


def _dumps(spec: Any) -> dict[str, Any] | None:
    """A subtree in torch's own serialized form, or None where torch cannot serialise it."""
    try:
        return {"type": "pytree", "dumps": pytree.treespec_dumps(spec)}
    except Exception:  # noqa: BLE001 - the caller says what to do
        return None


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
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = (f"{where} is a symbolic number ({v}) that is no integer expression of the "
                "inputs' dims (a count from tensor data, or a float or bool of sizes), so the "
                "artifact cannot carry it: return the tensor it comes from and read its .shape "
                "after the call, or compute the number outside fn")
    elif where.startswith("fn's result"):
        hint = _RESULT_HINT.format(cls=type(v).__name__)
    else:
        hint = ("pass tensors for data; fold other configuration into fn (a closure or "
                "functools.partial) so it is baked explicitly")
    (P or Problems()).add(PrecompileError(
        f"unsupported non-tensor value of type {type(v).__name__}", invariant=3,
        stage="capture", where=where,
        expected="tensor, nn.Module, or a bool/int/float/str/None/dtype/device (baked and "
                 "checked per call), in tuples/lists/dicts",
        actual=f"{type(v).__name__}: {v!r:.80}", hint=hint))
    return repr(v)


# what to do about a result leaf the artifact cannot carry (a Hugging Face cache object is
# the usual one: transformers does not register DynamicCache as a pytree node)
_RESULT_HINT = ("return only the tensors you need (e.g. `return model(x).logits`), or, for a "
                "Hugging Face model, call it with use_cache=False so no {cls} is returned, or "
                "register {cls} as a pytree node (torch.utils._pytree.register_pytree_node, "
                "with serialized_type_name) so the artifact rebuilds it; transformers registers "
                "all its cache classes with transformers.exporters.exporter_dynamo."
                "register_cache_pytrees_for_model(model)")


# Note [sizes in the result]
#   fn may return a number computed from a dynamic size (x.shape, x.size(0) * 2 under
#   mark_dynamic). It is no constant: eager's would follow each call's sizes. So the artifact
#   keeps it as an expression over the inputs' dims (PcSizeOut, "2*s0" with s0 = x.size(0))
#   and computes it at each call; one that is a number after all (the dim was pinned) is baked;
#   one that names a size no input holds (a count from data) stays refused, with the fix.
def _size_out(leaf: torch.SymInt, ts: Sequence[torch.Tensor], L: _Lifted, where: str,
              P: Problems) -> ConstOut | SizeOut:
    found = _compat.size_expression(leaf, ts)
    if isinstance(found, int):
        return ConstOut(value=found)
    # an expression the artifact could not evaluate (a function it lacks) is refused here,
    # never written into an artifact that fails at load
    if found is None or not set(compile(found[0], "<size>", "eval").co_names) <= {
            *found[1], *size_functions}:
        return ConstOut(value=_literal(leaf, where, P))
    expr, symbols = found
    return SizeOut(expr=expr, symbols=symbols, text=sizes_text(expr, symbols, L.specs))


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


def _rebuilt_args(L: _Lifted, example_inputs: Sequence[Any], ws: Sequence[torch.Tensor],
                  stack: contextlib.ExitStack, state: dict[str, Any], P: Problems) -> list:
    """fn's arguments on the traced tensors: models reparametrized, optimizers swapped onto
    them (until `stack` closes), containers rebuilt, baked values as they are."""
    args = []
    for (kind, data), a in zip(L.rebuild, example_inputs):
        if kind == "module":
            names, parallel = data
            traced = {n: ws[k] for n, k in names}
            stack.enter_context(_compat.reparametrize(a, traced))
            stack.enter_context(data_parallel.in_graph(parallel, a, traced))
            args.append(a)
        elif kind == "tensor":
            args.append(ws[data])
        elif kind == "optim":
            stack.enter_context(traced_optimizer(a, data, ws, state, P))
            args.append(a)
        elif kind == "pytree":
            spec, slots, leaves = data
            args.append(pytree.tree_unflatten(
                [lf if k is None else ws[k] for k, lf in zip(slots, leaves)], spec))
        else:
            args.append(data)
    return args


def _make_flat_fn(fn: Callable, example_inputs: Sequence[Any], L: _Lifted,
                  state: dict[str, Any], P: Problems) -> Callable:
    def flat_fn(*ts: torch.Tensor):
        ws = _wrapped(L, ts)
        with contextlib.ExitStack() as stack:
            args = _rebuilt_args(L, example_inputs, ws, stack, state, P)
            versions = [t._version for t in ts]
            with _compat.decided_random_draws():  # Note [decided random draws]
                out = fn(*args)
        named, spec = _named_leaves(out, "fn's result")
        tensor_outs, out_leaves, aliases = [], [], []
        keys = [_compat.storage_key(t) for t in ts]
        for where, leaf in named:
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
            elif isinstance(leaf, torch.SymInt):
                out_leaves.append(_size_out(leaf, ts, L, where, P))
            else:
                out_leaves.append(ConstOut(value=_literal(leaf, where, P)))
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
