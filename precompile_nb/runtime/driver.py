# ---- precompile_nb driver (copied verbatim into every artifact; imports only torch) ----
# The driver is the artifact's calling convention made executable. It decodes the metadata
# literal _PC_META into typed records (the same records and the same decoder the package uses,
# see precompile_nb/runtime/convention.py), then, per call: flattens the arguments into graph
# inputs, checks them, runs the compiled graph, writes mutations and gradients back and
# rebuilds fn's result. See Note [one driver, two homes] in precompile_nb/core/emit.py.
import dataclasses as _pc_dataclasses  # Field, MISSING, FrozenInstanceError
import sys as _pc_sys

import torch as _pc_torch
from torch.utils import _pytree as _pc_pytree

if __name__ == "precompile_nb.runtime.driver":  # the package's import: one PrecompileError
    from .violation import PrecompileError, _PcFields  # an artifact has the section above


# ---------------------------------------------------------------------------------------------
# The calling convention as typed records.
#
# Note [convention records]
#   Each record is a frozen dataclass with `_pc_schema`, field -> the kind of literal it
#   holds. `to_literal()` writes the plain-literal form that _PC_META holds (lists, dicts,
#   str/int/bool/None); `_pc_decode_record` reads it back, checking every nested field, so a
#   malformed literal is a PrecompileError (invariant 7) at load, before anything runs.
#   Union kinds (arguments, outputs) carry a "kind" tag in their literal. The package and
#   every artifact use these same classes: the artifact needs them to run, so they live here
#   (precompile_nb/runtime/convention.py re-exports them). Changing a schema changes the
#   artifact format: see Note [artifact version] in artifact_format.py.

# Note [convention records made by hand]
#   dataclasses builds each class's __init__, __repr__, __eq__, __hash__, __setattr__ and
#   __delattr__ by compiling generated source: for the 24 records that is ~140 compiles, 40-85
#   ms on a busy 2-core CPU, paid in every fresh process twice over: when the package is
#   imported (this module) and when an artifact's copy of it runs. So the records are made by
#   hand: the same fields in the same order, defaults and default factories, frozen and
#   slotted, compared and hashed by their fields' values, printed as dataclasses print them,
#   copied and pickled field by field; one shared __init__ and nothing compiled. What
#   dataclasses.replace and fields did is `rec._replace(**changes)` and `cls._pc_fields`.

def _pc_record(cls):
    """A frozen, slotted record made by hand (Note [convention records made by hand])."""
    names = tuple(cls.__dict__.get("__annotations__") or getattr(cls, "__annotations__", {}))
    defaults = {}
    for n in names:
        if n not in cls.__dict__:
            continue
        d = cls.__dict__[n]
        if isinstance(d, _pc_dataclasses.Field):
            d = d.default_factory if d.default is _pc_dataclasses.MISSING else \
                (lambda v=d.default: v)
        else:
            d = (lambda v=d: v)
        defaults[n] = d
    ns = {k: v for k, v in cls.__dict__.items()
          if k not in names and k not in ("__dict__", "__weakref__")}
    ns.update(__slots__=names, _pc_fields=names, _pc_defaults=defaults,
              __init__=_pc_light_init, __setattr__=_pc_light_frozen,
              __delattr__=_pc_light_frozen, __repr__=_pc_light_repr, __eq__=_pc_light_eq,
              __hash__=_pc_light_hash, __getstate__=_pc_light_values,
              __setstate__=_pc_light_setstate, _replace=_pc_light_replace,
              __match_args__=names)
    return type(cls.__name__, cls.__bases__, ns)


def _pc_light_setstate(self, state):
    for n, v in zip(self._pc_fields, state):
        object.__setattr__(self, n, v)


def _pc_light_replace(self, **changes):
    """A copy with `changes` (what dataclasses.replace does for a dataclass)."""
    return type(self)(**{n: changes.pop(n) if n in changes else getattr(self, n)
                         for n in self._pc_fields}, **changes)


def _pc_light_init(self, *args, **kwargs):
    cls = type(self)
    names = cls._pc_fields
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} arguments, got {len(args)}")
    values = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in values:
            raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {k!r}")
        values[k] = v
    for n in names:
        if n in values:
            v = values[n]
        elif n in cls._pc_defaults:
            v = cls._pc_defaults[n]()
        else:
            raise TypeError(f"{cls.__name__}() missing argument {n!r}")
        _pc_set(self, n, v)


def _pc_light_frozen(self, name, *value):
    raise _pc_dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


_pc_set = object.__setattr__  # how a frozen record's fields are first set


def _pc_light_values(self):
    return tuple(getattr(self, n) for n in self._pc_fields)


def _pc_light_repr(self):
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._pc_fields)
    return f"{type(self).__qualname__}({inner})"


def _pc_light_eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _pc_light_values(self) == _pc_light_values(other)


def _pc_light_hash(self):
    return hash(_pc_light_values(self))


def _pc_is_value(v):
    """A baked non-tensor value: a plain scalar, or a tagged dtype/device."""
    if v is None or type(v) in (bool, int, float, str):
        return True
    return (type(v) is list and len(v) == 2 and v[0] in ("__torch.dtype__", "__torch.device__")
            and type(v[1]) is str)


def _pc_is_data(v, depth=0):
    """A small constant tensor's data: nested lists of numbers."""
    if type(v) in (bool, int, float):
        return True
    return type(v) is list and depth < 64 and all(_pc_is_data(x, depth + 1) for x in v)


def _pc_is_bounds(v):
    """A dynamic dim's bounds: {dim: [lo or None, hi or None]}."""
    ok = lambda b: b is None or type(b) is int  # noqa: E731
    return type(v) is dict and all(
        type(d) is int and type(b) is list and len(b) == 2 and ok(b[0]) and ok(b[1])
        for d, b in v.items())


def _pc_is_ids(v):
    """Shared-size ids of dynamic dims: {dim: id}."""
    return type(v) is dict and all(type(d) is int and type(i) is str for d, i in v.items())


def _pc_is_dims(v):
    """Symbols of guards: {name: [graph input, dim]}."""
    return type(v) is dict and all(
        type(k) is str and k.isidentifier() and type(x) is list and len(x) == 2
        and all(type(n) is int and n >= 0 for n in x) for k, x in v.items())


_PC_INTS = lambda v: type(v) is list and all(type(x) is int for x in v)  # noqa: E731
# literal kind -> (check, description for the error, conversion to the in-memory form)
_PC_KINDS = {
    "str": (lambda v: type(v) is str, "a str", None),
    "int": (lambda v: type(v) is int, "an int", None),
    "nat": (lambda v: type(v) is int and v >= 0, "an int >= 0", None),
    "bool": (lambda v: type(v) is bool, "a bool", None),
    "bool?": (lambda v: v is None or type(v) is bool, "a bool or None", None),
    "ints": (_PC_INTS, "a list of ints", tuple),
    "nats": (lambda v: _PC_INTS(v) and all(x >= 0 for x in v), "a list of ints >= 0", tuple),
    "strs": (lambda v: type(v) is list and all(type(x) is str for x in v), "a list of str",
             tuple),
    "value": (_pc_is_value, "a bool/int/float/str/None or a tagged dtype/device", None),
    "data": (_pc_is_data, "nested lists of numbers", None),
    "values": (lambda v: type(v) is list and all(
        _pc_is_value(x) or (type(x) is list and all(_pc_is_value(y) for y in x)) for x in v),
        "a list of baked values (or lists of them)", tuple),
    "bounds": (_pc_is_bounds, "a dict {dim: [lo or None, hi or None]}",
               lambda v: {d: tuple(b) for d, b in v.items()}),
    "ids": (_pc_is_ids, "a dict {dim: shape id}", None),
    "dims": (_pc_is_dims, "a dict {symbol: [graph input, dim]}",
             lambda v: {k: tuple(x) for k, x in v.items()}),
    "str?": (lambda v: v is None or type(v) is str, "a str or None", None),
    "strs?": (lambda v: v is None or (type(v) is list and all(type(x) is str for x in v)),
              "a list of str, or None", lambda v: None if v is None else tuple(v)),
    "tree": (lambda v: _pc_is_tree(v), "a container structure (Note [tree literal])", None),
    "attr": (lambda v: _pc_is_scalar(v) or (type(v) is list and all(map(_pc_is_scalar, v))),
             "a bool, int, float, str or None, or a list of them (a tuple)",
             lambda v: tuple(v) if type(v) is list else v),
}


def _pc_is_scalar(v):
    return v is None or type(v) in (bool, int, float, str)


def _pc_literal(v):
    """A record field back to its literal form."""
    if isinstance(v, tuple):
        return [_pc_literal(x) for x in v]
    if isinstance(v, dict):
        return {k: _pc_literal(x) for k, x in v.items()}
    if hasattr(v, "to_literal"):
        return v.to_literal()
    return v


class _PcRecord:
    """Mixin of the convention records: to_literal() (see Note [convention records])."""

    __slots__ = ()
    _pc_kind = None  # the "kind" tag of a union member

    def to_literal(self):
        out = {} if self._pc_kind is None else {"kind": self._pc_kind}
        for name in self._pc_fields:
            out[name] = _pc_literal(getattr(self, name))
        return out


@_pc_record
class PcTensorInput(_PcRecord):
    """One graph input tensor as the artifact is specialized to it (invariants 2, 3, 6)."""

    where: str  # how a person names it: "model.0.weight", "x", "batch['ids']"
    # "param", "buffer", "input"; an optimizer's "state" tensor or tensor "hyper"parameter
    kind: str
    arg: int  # the positional argument it comes from
    shape: tuple
    stride: tuple
    dtype: str  # "float32"
    device: str  # "cpu", "cuda:0"
    requires_grad: bool
    dynamic: dict = _pc_dataclasses.field(default_factory=dict)  # dim -> (lo, hi), marked dims
    # dim -> id: dynamic dims that share a size (mark_unbacked(shape_id=...)), checked per call
    shape_ids: dict = _pc_dataclasses.field(default_factory=dict)
    # a DTensor: what it must be (Note [DTensor at the boundary]); shape/stride/device above
    # are then its local shard's, which is what the graph takes
    dtensor: object = None
    _pc_schema = {"where": "str", "kind": ("param", "buffer", "input", "state", "hyper"),
                  "arg": "nat",
                  "shape": "ints", "stride": "ints", "dtype": "str", "device": "str",
                  "requires_grad": "bool", "dynamic": "bounds", "shape_ids": "ids",
                  "dtensor": ("record?", "PcDTensor")}


@_pc_record
class PcMesh(_PcRecord):
    """A DeviceMesh the artifact's DTensors live on (Note [DTensor at the boundary])."""

    device_type: str  # "cpu", "cuda"
    shape: tuple
    dim_names: object  # tuple of str, or None
    # per mesh dim, the name of its process group: the graph's collectives name their group
    groups: tuple
    _pc_schema = {"device_type": "str", "shape": "nats", "dim_names": "strs?",
                  "groups": "strs"}


@_pc_record
class PcProcessGroup(_PcRecord):
    """A process group the graph's collectives name, with its size at capture: what they
    assume (an average divides by it, a gather makes that many shards), checked at the first
    call (Note [process groups at the boundary])."""

    name: str  # the group's registered name, as the collectives pass it
    size: int  # its number of ranks at capture
    world: int  # the job's world size at capture (what to precompile again for)
    _pc_schema = {"name": "str", "size": "nat", "world": "nat"}


@_pc_record
class PcDTensor(_PcRecord):
    """What a DTensor input, result or gradient is (Note [DTensor at the boundary])."""

    mesh: int  # index into the convention's meshes
    placements: tuple  # per mesh dim: "Shard(0)", "Replicate()", "Partial(sum)"
    shape: tuple  # global
    stride: tuple  # global
    _pc_schema = {"mesh": "nat", "placements": "strs", "shape": "nats", "stride": "ints"}


@_pc_record
class PcConstant(_PcRecord):
    """A small tensor created inside fn (torch.tensor([...])), carried as a literal and passed
    to the graph after the inputs."""

    shape: tuple
    dtype: str
    device: str
    data: object  # nested lists / a scalar
    _pc_schema = {"shape": "nats", "dtype": "str", "device": "str", "data": "data"}


@_pc_record
class PcModuleAttr(_PcRecord):
    """A plain Python attribute of a model or one of its modules that fn read (`self.scale`,
    a Dropout's `p`, a submodule's `training`): its value was baked into the graph, so it is
    checked on every call, as a baked argument is (Note [module attributes read])."""

    module: str  # the module's name in the model's named_modules() ("" the model itself)
    name: str
    value: object  # a bool, int, float, str or None, or a tuple of them
    _pc_schema = {"module": "str", "name": "str", "value": "attr"}


@_pc_record
class PcModuleArg(_PcRecord):
    """An nn.Module argument: its parameters, then its buffers, become graph inputs."""

    path: str
    names: tuple  # named_parameters() then named_buffers() names, tied weights once
    n_params: int
    training: object  # bool, checked per call; None: not checked
    attrs: tuple = ()  # PcModuleAttr: the attributes fn read, checked per call
    _pc_kind = "module"
    _pc_schema = {"path": "str", "names": "strs", "n_params": "nat", "training": "bool?",
                  "attrs": ("records", PcModuleAttr)}


@_pc_record
class PcTensorArg(_PcRecord):
    """A tensor argument: one graph input, or (same_as >= 0) the very tensor that graph input
    `same_as` is, as at capture (invariant 4: one tensor passed twice stays one tensor)."""

    path: str
    same_as: int = -1
    _pc_kind = "tensor"
    _pc_schema = {"path": "str", "same_as": "int"}


@_pc_record
class PcConstArg(_PcRecord):
    """A non-tensor argument: baked into the graph, checked on every call (invariant 3)."""

    path: str
    value: object  # its literal (see _pc_is_value)
    _pc_kind = "const"
    _pc_schema = {"path": "str", "value": "value"}


@_pc_record
class PcLeaf(_PcRecord):
    """One leaf of a container argument: a tensor (a graph input) or a baked value."""

    path: str  # "batch['ids']"
    tensor: bool
    value: object  # the baked literal; None for a tensor
    same_as: int = -1  # a tensor that is graph input `same_as` itself (see PcTensorArg)
    _pc_schema = {"path": "str", "tensor": "bool", "value": "value", "same_as": "int"}


@_pc_record
class PcPytreeArg(_PcRecord):
    """A container argument (tuples, lists, dicts of tensors and values)."""

    path: str
    spec: dict  # its structure (Note [tree literal])
    leaves: tuple  # PcLeaf per leaf, in pytree order
    _pc_kind = "pytree"
    _pc_schema = {"path": "str", "spec": "tree", "leaves": ("records", PcLeaf)}


@_pc_record
class PcOptimParam(_PcRecord):
    """One parameter an optimizer argument steps (Note [optimizer at the boundary])."""

    input: int  # the graph input of the parameter (a model argument's, before the optimizer)
    keys: tuple  # its state's keys ("step", "exp_avg", ...), each one graph input, in order
    _pc_schema = {"input": "nat", "keys": "strs"}


@_pc_record
class PcOptimGroup(_PcRecord):
    """One param_group of an optimizer argument."""

    params: tuple  # PcOptimParam per parameter, in the group's order
    names: tuple  # the baked hyperparameters, checked per call (invariant 3)
    values: tuple  # their values (a tuple such as betas as a list)
    tensors: tuple  # the tensor hyperparameters (a tensor lr), each one graph input, in order
    _pc_schema = {"params": ("records", PcOptimParam), "names": "strs", "values": "values",
                  "tensors": "strs"}


@_pc_record
class PcOptimArg(_PcRecord):
    """A torch.optim.Optimizer argument (Note [optimizer at the boundary]): its state tensors
    and tensor hyperparameters are graph inputs, its other hyperparameters are baked."""

    path: str
    module: str  # the optimizer's class, by module and qualified name (checked by identity)
    name: str
    groups: tuple  # PcOptimGroup
    # a parameter with no state yet gets its state as zeros, as the optimizer's own first
    # step would create it (for the optimizers where zeros is what that step creates)
    zero_init: bool
    # fn calls opt.zero_grad() before any gradient is read: the .grad a call finds is dropped
    # (as eager's zero_grad would); else it must be None (the graph never reads it)
    grads_cleared: bool
    _pc_kind = "optimizer"
    _pc_schema = {"path": "str", "module": "str", "name": "str",
                  "groups": ("records", PcOptimGroup), "zero_init": "bool",
                  "grads_cleared": "bool"}


@_pc_record
class PcGraphOut(_PcRecord):
    """A result leaf that is graph output `index`."""

    index: int
    dtensor: object = None  # PcDTensor: the output is a local shard, returned as this DTensor
    _pc_kind = "graph"
    _pc_schema = {"index": "nat", "dtensor": ("record?", "PcDTensor")}


@_pc_record
class PcInputOut(_PcRecord):
    """A result leaf that is graph input `index` itself (fn returned an input)."""

    index: int
    _pc_kind = "input"
    _pc_schema = {"index": "nat"}


@_pc_record
class PcAliasOut(_PcRecord):
    """A result leaf that views graph input `index` (invariant 4: aliases stay aliases)."""

    index: int
    size: tuple
    stride: tuple
    offset: int
    _pc_kind = "alias"
    _pc_schema = {"index": "nat", "size": "nats", "stride": "ints", "offset": "nat"}


@_pc_record
class PcConstOut(_PcRecord):
    """A result leaf that is a non-tensor value fn returned."""

    value: object
    _pc_kind = "const"
    _pc_schema = {"value": "value"}


@_pc_record
class PcSizeOut(_PcRecord):
    """A result leaf that is a number computed from dynamic sizes (fn returned x.shape under
    mark_dynamic): computed at each call from the inputs' sizes, as eager's would be."""

    expr: str  # a Python expression over the symbol names: "2*s0"
    symbols: dict  # symbol name -> (graph input, dim)
    text: str  # for people: "2*x.size(0)"
    _pc_kind = "size"
    _pc_schema = {"expr": "str", "symbols": "dims", "text": "str"}


@_pc_record
class PcWriteBack(_PcRecord):
    """Graph output `output` written into graph input `input`: an in-place mutation
    (copied back, invariant 4) or a gradient (accumulated into .grad, invariant 5)."""

    input: int
    output: int
    dtensor: object = None  # PcDTensor: a DTensor input's gradient, written as this DTensor
    _pc_schema = {"input": "nat", "output": "nat", "dtensor": ("record?", "PcDTensor")}


@_pc_record
class PcGuard(_PcRecord):
    """A condition on dynamic sizes that the graph was captured under, checked on every call
    before any kernel (invariant 3). Capture assumed it because the example satisfies it and
    the graph needed to know (Note [guards from the example] in capture/marks.py)."""

    expr: str  # a Python expression over the symbol names: "u0 <= 880801"
    symbols: dict  # symbol name -> (graph input, dim)
    text: str  # for people: "x.size(0) <= 880801"
    source: object  # "file:line: code" that needed it (str), or None
    _pc_schema = {"expr": "str", "symbols": "dims", "text": "str", "source": "str?"}


@_pc_record
class PcDataGuard(_PcRecord):
    """A branch (or a size) that depends on tensor data, which the graph holds as the example
    took it (precompile(..., data_guards=True)): the graph checks it where the data is first
    known, and a call whose data would take another way is a PrecompileError, raised before
    anything is written back (Note [data guards] in capture/guards.py)."""

    expr: str  # the condition that held for the example, over graph symbols: "Eq(u0, 1)"
    symbols: tuple  # its symbols (how a failed check of the graph is matched to it)
    text: str  # for people: what the example's data did there
    source: object  # "file:line: code" of the branch (str), or None
    _pc_schema = {"expr": "str", "symbols": "strs", "text": "str", "source": "str?"}


@_pc_record
class PcConvention(_PcRecord):
    """The whole calling convention of one artifact."""

    fn_name: str
    args: tuple  # per positional argument: PcModuleArg / PcTensorArg / PcConstArg / PcPytreeArg
    inputs: tuple  # PcTensorInput per graph input (the constants follow them)
    constants: tuple  # PcConstant
    out_spec: dict  # the structure of fn's result (Note [tree literal])
    outputs: tuple  # per result leaf: PcGraphOut / PcInputOut / PcAliasOut / PcConstOut /
    # PcSizeOut
    mutations: tuple  # PcWriteBack, copied back after the call
    grads: tuple  # PcWriteBack, accumulated into .grad
    check_strides: bool  # invariant 6: inductor bakes strides
    device_index: int  # the CUDA device the kernels were built for (cache placement)
    # graph inputs the compiled graph does not take (it reads only their shape, or nothing):
    # checked like every input, but not their layout, and not passed to it
    unread: tuple = ()
    guards: tuple = ()  # PcGuard
    meshes: tuple = ()  # PcMesh: the device meshes of the DTensors
    data_guards: tuple = ()  # PcDataGuard
    process_groups: tuple = ()  # PcProcessGroup: the groups the graph's collectives name
    # graph inputs the compiled graph itself writes in place (Note [writes inside the graph]
    # in core/lower.py): checked for shared memory like the mutations, nothing copied back
    written: tuple = ()
    # fn ran autograd (a .backward() or an autograd.grad): a call needs gradients on, as
    # eager's would (Note [a backward under no_grad])
    backward: bool = False
    _pc_schema = {"fn_name": "str",
                  "args": ("union", "ARGS"), "inputs": ("records", PcTensorInput),
                  "constants": ("records", PcConstant), "out_spec": "tree",
                  "outputs": ("union", "OUTPUTS"), "mutations": ("records", PcWriteBack),
                  "grads": ("records", PcWriteBack), "check_strides": "bool",
                  "device_index": "nat", "unread": "nats",
                  "guards": ("records", PcGuard), "meshes": ("records", PcMesh),
                  "data_guards": ("records", PcDataGuard),
                  "process_groups": ("records", PcProcessGroup), "written": "nats",
                  "backward": "bool"}


_PC_UNIONS = {
    "ARGS": {c._pc_kind: c for c in (PcModuleArg, PcTensorArg, PcConstArg, PcPytreeArg,
                                     PcOptimArg)},
    "OUTPUTS": {c._pc_kind: c for c in (PcGraphOut, PcInputOut, PcAliasOut, PcConstOut,
                                        PcSizeOut)},
}
# the header fields of _PC_META around the convention (read by the package's load)
_PC_HEADER = ("format", "version", "backend", "torch")


class _PcBadLiteral(Exception):
    """Internal: a literal field that does not fit its schema (becomes a PrecompileError).
    `at` is the field's path: a str, or (the parent's path, a key), spelled out by _pc_at only
    here, when a literal is bad (a load decodes hundreds of good fields)."""

    def __init__(self, at, expected, actual):
        at = _pc_at(at)
        super().__init__(at)
        self.at, self.expected, self.actual = at, expected, actual


def _pc_at(at):
    """A field's path as the error names it: _PC_META['inputs'][0]['shape']."""
    keys = []
    while type(at) is tuple:
        at, key = at
        keys.append(key)
    return at + "".join(f"[{k!r}]" for k in reversed(keys))


def _pc_decode_field(kind, v, at):
    if isinstance(kind, tuple) and kind[0] == "records":
        cls = kind[1]
        if type(v) is not list:
            raise _PcBadLiteral(at, f"a list of {cls.__name__[2:]} records", v)
        return tuple(_pc_decode_record(cls, x, (at, i)) for i, x in enumerate(v))
    if isinstance(kind, tuple) and kind[0] == "record?":
        return None if v is None else _pc_decode_record(globals()[kind[1]], v, at)
    if isinstance(kind, tuple) and kind[0] == "union":
        members = _PC_UNIONS[kind[1]]
        if type(v) is not list:
            raise _PcBadLiteral(at, "a list", v)
        out = []
        for i, x in enumerate(v):
            tag = x.get("kind") if type(x) is dict else None
            if type(tag) is not str or tag not in members:
                raise _PcBadLiteral(((at, i), "kind"), f"one of {sorted(members)}", tag)
            out.append(_pc_decode_record(members[tag], x, (at, i), skip=("kind",)))
        return tuple(out)
    if isinstance(kind, tuple):  # an enumeration of allowed strings
        if v not in kind or type(v) is not str:
            raise _PcBadLiteral(at, f"one of {list(kind)}", v)
        return v
    check, text, convert = _PC_KINDS[kind]
    if not check(v):
        raise _PcBadLiteral(at, text, v)
    return v if convert is None else convert(v)


def _pc_decode_record(cls, lit, at, skip=()):
    """One record from its literal, every field checked (Note [convention records])."""
    if type(lit) is not dict:
        raise _PcBadLiteral(at, f"a dict ({cls.__name__[2:]} record)", lit)
    schema = cls._pc_schema
    unknown = [k for k in lit if k not in schema and k not in skip]
    if unknown:
        raise _PcBadLiteral((at, unknown[0]), f"no such field in {cls.__name__[2:]}",
                            unknown[0])
    rec = object.__new__(cls)  # every field is set below: no __init__ to run again
    for name, kind in schema.items():
        if name not in lit:
            raise _PcBadLiteral((at, name), f"a field of {cls.__name__[2:]}", "missing")
        _pc_set(rec, name, _pc_decode_field(kind, lit[name], (at, name)))
    return rec


def _pc_decode(meta, Err=None):
    """The PcConvention in an artifact's metadata literal; any malformed field, at any depth,
    is a PrecompileError (invariant 7) naming it."""
    Err = Err or PrecompileError
    try:
        if type(meta) is not dict:
            raise _PcBadLiteral("_PC_META", "a dict", meta)
        conv = _pc_decode_record(PcConvention, meta, "_PC_META", skip=_PC_HEADER)
        _pc_check_references(conv)
    except _PcBadLiteral as e:
        actual = repr(e.actual)
        raise Err("the artifact's metadata is malformed", invariant=7, stage="load",
                  where=e.at, expected=e.expected,
                  actual=actual if len(actual) <= 80 else actual[:77] + "...",
                  hint="load the python_code exactly as precompile returned it (or the NAME.py "
                       "file saved next to NAME.cache); precompile again if it was edited"
                  ) from None
    return conv


def _pc_check_references(conv):
    """Indices between the records point where they must (graph inputs, module tensors)."""
    n_in = len(conv.inputs)
    n_tensors = 0
    for i, a in enumerate(conv.args):
        if isinstance(a, PcModuleArg):
            if a.n_params > len(a.names):
                raise _PcBadLiteral(f"_PC_META['args'][{i}]['n_params']",
                                    f"<= {len(a.names)} (the number of names)", a.n_params)
            n_tensors += len(a.names)
        elif isinstance(a, PcTensorArg):
            _pc_check_same_as(a.same_as, n_tensors, f"_PC_META['args'][{i}]")
            n_tensors += a.same_as < 0
        elif isinstance(a, PcPytreeArg):
            for j, lf in enumerate(a.leaves):
                _pc_check_same_as(lf.same_as, n_tensors,
                                  f"_PC_META['args'][{i}]['leaves'][{j}]")
                n_tensors += lf.tensor and lf.same_as < 0
        elif isinstance(a, PcOptimArg):
            for j, g in enumerate(a.groups):
                for m, q in enumerate(g.params):
                    if q.input >= n_tensors:
                        raise _PcBadLiteral(
                            f"_PC_META['args'][{i}]['groups'][{j}]['params'][{m}]['input']",
                            f"an earlier graph input (< {n_tensors})", q.input)
                    n_tensors += len(q.keys)
                n_tensors += len(g.tensors)
                if len(g.names) != len(g.values):
                    raise _PcBadLiteral(f"_PC_META['args'][{i}]['groups'][{j}]['values']",
                                        f"{len(g.names)} values", len(g.values))
    if n_tensors != n_in:
        raise _PcBadLiteral("_PC_META['inputs']", f"{n_tensors} inputs (as the arguments say)",
                            f"{n_in} inputs")
    for name in ("mutations", "grads"):
        for j, w in enumerate(getattr(conv, name)):
            if w.input >= n_in:
                raise _PcBadLiteral(f"_PC_META[{name!r}][{j}]['input']", f"< {n_in}", w.input)
    for j, o in enumerate(conv.outputs):
        if isinstance(o, (PcInputOut, PcAliasOut)) and o.index >= n_in:
            raise _PcBadLiteral(f"_PC_META['outputs'][{j}]['index']", f"< {n_in}", o.index)
    for name in ("unread", "written"):
        for j, i in enumerate(getattr(conv, name)):
            if i >= n_in:
                raise _PcBadLiteral(f"_PC_META[{name!r}][{j}]", f"< {n_in}", i)
    layouts = [(f"_PC_META['inputs'][{i}]", s.dtensor) for i, s in enumerate(conv.inputs)]
    layouts += [(f"_PC_META['outputs'][{j}]", getattr(o, "dtensor", None))
                for j, o in enumerate(conv.outputs)]
    layouts += [(f"_PC_META['grads'][{j}]", w.dtensor) for j, w in enumerate(conv.grads)]
    for at, lay in layouts:
        if lay is not None and lay.mesh >= len(conv.meshes):
            raise _PcBadLiteral(f"{at}['dtensor']['mesh']", f"< {len(conv.meshes)}", lay.mesh)
    symbols = [(f"_PC_META['guards'][{j}]", g.symbols) for j, g in enumerate(conv.guards)]
    symbols += [(f"_PC_META['outputs'][{j}]", o.symbols) for j, o in enumerate(conv.outputs)
                if isinstance(o, PcSizeOut)]
    for at, names in symbols:
        for name, (i, d) in names.items():
            if i >= n_in or d >= len(conv.inputs[i].shape):
                raise _PcBadLiteral(f"{at}['symbols'][{name!r}]", "a dim of a graph input",
                                    [i, d])


def _pc_check_same_as(same_as, n_before, at):
    if not -1 <= same_as < n_before:
        raise _PcBadLiteral(f"{at}['same_as']", f"-1 or an earlier graph input (< {n_before})",
                            same_as)


# ---------------------------------------------------------------------------------------------
# Container structure as a literal.
#
# Note [tree literal]
#   fn's arguments and result are pytrees. Their structure is carried as a literal of nested
#   nodes, {"type": ..., "children": [...]} plus "keys" (dicts) or "module"/"name"/"fields"
#   (namedtuples); {"type": "leaf"} is a leaf and {"type": "pytree", "dumps": ...} a subtree
#   of another registered container type in torch's own serialized form. A namedtuple is
#   found again by module and qualified name at load (importing its module if needed), so a
#   result is rebuilt with the user's own class and an argument's class is checked by
#   identity, as eager would see them. The driver turns a literal back into a TreeSpec by
#   building a stand-in structure and flattening it, which needs nothing but tree_flatten.
#   torch.Size is a node of its own: torch's tree_unflatten gives a plain tuple for it, so a
#   result with one (fn returned x.shape) is given its Size back after unflattening.
#   A structseq (torch.return_types.max, what x.max(1) returns) is carried as a namedtuple is,
#   by module, name and fields; its class is built from one sequence, not from one argument
#   a field (torch serialises it only from 2.15 on, so it is no "pytree" subtree).

_PC_TREE_TYPES = ("leaf", "None", "tuple", "list", "dict", "OrderedDict", "namedtuple",
                  "structseq", "pytree", "Size")


def _pc_is_tree(v, depth=0):
    if type(v) is not dict or depth > 200 or type(v.get("type")) is not str:
        return False
    t = v["type"]
    if t in ("leaf", "None"):
        return len(v) == 1
    if t == "pytree":
        return set(v) == {"type", "dumps"} and type(v["dumps"]) is str
    children = v.get("children")
    if t not in _PC_TREE_TYPES or type(children) is not list:
        return False
    if t in ("tuple", "list", "Size"):
        extra_ok = set(v) == {"type", "children"}
    elif t in ("dict", "OrderedDict"):
        keys = v.get("keys")
        extra_ok = (set(v) == {"type", "children", "keys"} and type(keys) is list
                    and len(keys) == len(children) and all(_pc_is_value(k) for k in keys))
    else:
        fields = v.get("fields")
        extra_ok = (set(v) == {"type", "children", "module", "name", "fields"}
                    and type(v.get("module")) is str and type(v.get("name")) is str
                    and type(fields) is list and all(type(f) is str for f in fields)
                    and len(fields) == len(children))
    return extra_ok and all(_pc_is_tree(c, depth + 1) for c in children)


def _pc_find_class(module, name):
    """A class by module and qualified name (the module is imported if it is not yet)."""
    mod = _pc_sys.modules.get(module)
    if mod is None:
        import importlib
        try:
            mod = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - reported by the caller as "not found"
            return None
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj


def _pc_tree_stand_in(lit, Err):
    """A structure of zeros with the literal's structure (Note [tree literal])."""
    t = lit["type"]
    if t == "leaf":
        return 0
    if t == "None":
        return None
    if t == "pytree":
        spec = _pc_treespec_loads(lit["dumps"], Err)
        return _pc_pytree.tree_unflatten([0] * spec.num_leaves, spec)
    children = [_pc_tree_stand_in(c, Err) for c in lit["children"]]
    if t == "tuple":
        return tuple(children)
    if t == "Size":
        return _pc_torch.Size(children)
    if t == "list":
        return children
    if t == "dict":
        return dict(zip(lit["keys"], children))
    if t == "OrderedDict":
        import collections
        return collections.OrderedDict(zip(lit["keys"], children))
    cls = _pc_find_class(lit["module"], lit["name"])
    seq = t == "structseq"
    fields = "__match_args__" if seq else "_fields"
    if not (isinstance(cls, type) and issubclass(cls, tuple)
            and tuple(getattr(cls, fields, ())) == tuple(lit["fields"])):
        raise Err(f"the {t} {lit['name']} this artifact was captured with is not "
                  "defined here", invariant=7, stage="load",
                  where=f"{lit['module']}.{lit['name']}",
                  expected=f"a {t} with fields {lit['fields']}",
                  actual="not found" if cls is None else repr(cls)[:80],
                  hint=f"import or define {lit['name']} (in module {lit['module']}) with the "
                       "same fields before loading the artifact")
    return cls(children) if seq else cls(*children)


def _pc_treespec(lit, Err):
    """The TreeSpec of a tree literal; a whole tree in torch's serialized form is that spec
    (its nodes may be classes whose unflatten needs real tensors, such as a model's cache)."""
    if lit["type"] == "pytree":
        return _pc_treespec_loads(lit["dumps"], Err)
    return _pc_pytree.tree_flatten(_pc_tree_stand_in(lit, Err))[1]


def _pc_treespec_loads(dumps, Err):
    """torch's treespec_loads; a node type registered by a module this process has not
    imported (a Hugging Face ModelOutput before `import transformers`) has its module
    imported, as a namedtuple's is (Note [tree literal]), and one that stays unknown is
    named with the fix."""
    try:
        return _pc_pytree.treespec_loads(dumps)
    except Exception as e:  # noqa: BLE001 - retried once its types' modules are imported
        first = e
    import json
    try:
        names, todo = [], [json.loads(dumps)[1]]
    except Exception:  # noqa: BLE001 - not torch's serialized form: no type to name, below
        names, todo = [], []
    while todo:
        node = todo.pop()
        if type(node) is dict:
            if type(node.get("type")) is str and "." in node["type"]:
                names.append(node["type"])
            todo.extend(node.get("children_spec") or ())
    if not names:  # no type to import: the spec itself does not read on this torch
        raise Err("the artifact's recorded container structure does not load with this torch",
                  invariant=7, stage="load", where="a tree literal's pytree dumps",
                  expected="torch's treespec_loads to read it",
                  actual=f"{type(first).__name__}: {str(first)[:100]}",
                  hint="precompile again with this torch (or load with the torch the artifact "
                       "was made with)") from first
    missing = [n for n in dict.fromkeys(names) if _pc_find_class(*n.rsplit(".", 1)) is None]
    try:
        return _pc_pytree.treespec_loads(dumps)
    except Exception:  # noqa: BLE001 - named below, with the first error
        name = (missing or names)[0]
        raise Err(f"the container type {name} this artifact was captured with is not a pytree "
                  "node here", invariant=7, stage="load", where=name,
                  expected=f"{name} registered with torch's pytree (its module imported)",
                  actual=f"{type(first).__name__}: {str(first)[:100]}",
                  hint=f"import {name.rsplit('.', 1)[0]} (the module that defines and "
                       "registers it) before loading the artifact") from first


def _pc_value(v):
    """A baked literal to its Python value (dtypes and devices are tagged lists)."""
    if type(v) is list and v[0] == "__torch.dtype__":
        return getattr(_pc_torch, v[1])
    if type(v) is list and v[0] == "__torch.device__":
        return _pc_torch.device(v[1])
    return v


# Note [module structure cache]
#   Invariant 2 is checked on every call, but re-deriving the model's tensors through
#   named_parameters()/named_buffers() (generators over named_modules, prefix strings, memo
#   sets) is most of a small model's per-call cost. So the driver remembers the *structure*
#   that walk saw last time -- per visited module its class and the key order of its
#   _modules/_parameters/_buffers dicts, plus which entries were None and which were the
#   same object as an earlier one (shared submodules, tied weights) -- and on each call
#   re-reads those dicts directly and checks all of it again. The walk's result is a pure
#   function of exactly that structure, so when it matches, the tensors read are the ones
#   named_parameters() + named_buffers() would give, under the same (already validated)
#   names; when anything differs (a new or removed parameter, a re-tied weight, a swapped
#   submodule, another model class) the driver takes the original walk, which raises the
#   precise error or, when the names still match, records the new structure. The plan holds
#   no reference to any model or tensor (only classes, key tuples and index patterns), so
#   it never keeps a model alive and serves every instance built the same way. A module
#   class that customises the walk (named_modules, named_parameters, named_buffers,
#   _named_members, __hash__/__eq__) or non-dict storage always takes the original walk.

_PC_NONE_ID = id(None)


def _pc_pattern(vals):
    """Identity pattern of a sequence: -1 for None, else the index of the first entry that
    is the same object (so tying and sharing are visible, but no object is retained)."""
    first = {}
    return tuple(-1 if v is None else first.setdefault(id(v), i) for i, v in enumerate(vals))


def _pc_module_plan(root, arg):
    """The structure plan of `root` (see Note [module structure cache]), or None when it
    cannot be used for this model. Only called after the original walk accepted `root`;
    each visit carries the attributes of that module the artifact checks (`arg.attrs`)."""
    Module = _pc_torch.nn.Module
    stock = (Module.named_modules, Module.named_parameters, Module.named_buffers,
             Module._named_members, Module.__hash__, Module.__eq__)
    types, mkeys, pkeys, bkeys, src, akeys = [], [], [], [], [], []
    cands, praw, braw = [root], [], []
    seen = {id(root)}

    def visit(mod, at, prefix):
        cls = type(mod)
        if (cls.named_modules, cls.named_parameters, cls.named_buffers, cls._named_members,
                cls.__hash__, cls.__eq__) != stock:
            return False
        dicts = (mod._modules, mod._parameters, mod._buffers)
        if any(type(d) is not dict for d in dicts):
            return False
        types.append(cls)
        src.append(at)
        # the model's own value objects (the full walk found them equal to the artifact's):
        # an unchanged attribute then passes on identity alone
        d = mod.__dict__
        akeys.append(tuple((n, d.get(n, w)) for n, w in attrs.get(prefix, ())))
        mkeys.append(tuple(dicts[0]))
        pkeys.append(tuple(dicts[1]))
        bkeys.append(tuple(dicts[2]))
        praw.extend(dicts[1].values())
        braw.extend(dicts[2].values())
        base = len(cands)
        cands.extend(dicts[0].values())
        for j, (key, child) in enumerate(dicts[0].items()):
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                if not visit(child, base + j, f"{prefix}.{key}" if prefix else key):
                    return False
        return True

    attrs = {}
    for a in arg.attrs:
        attrs.setdefault(a.module, []).append((a.name, a.value))
    if not visit(root, 0, ""):
        return None
    mpat, ppat, bpat = _pc_pattern(cands), _pc_pattern(praw), _pc_pattern(braw)
    psel = tuple(i for i, k in enumerate(ppat) if k == i)
    bsel = tuple(i for i, k in enumerate(bpat) if k == i)
    # None for the all-distinct pattern: checked with one set instead of a full pattern
    plain = lambda pat: None if pat == tuple(range(len(pat))) else pat  # noqa: E731
    return (tuple(zip(types, src, mkeys, pkeys, bkeys, akeys)), plain(mpat), plain(ppat),
            plain(bpat), psel, bsel, len(ppat) == len(psel) and len(bpat) == len(bsel))


def _pc_plan_tensors(root, plan):
    """The tensors named_parameters() + named_buffers() give for `root`, read through the
    structure plan; None when `root`'s structure differs from the plan in any way."""
    visits, mpat, ppat, bpat, psel, bsel, all_selected = plan
    cands = [root]
    praw = []
    braw = []
    for cls, at, mk, pk, bk, ak in visits:
        mod = cands[at]
        if type(mod) is not cls:
            return None
        if ak:  # Note [module attributes read] (the sentinel: a value no attribute holds)
            get = mod.__dict__.get
            for name, want in ak:
                v = get(name, _pc_plan_tensors)
                if v is not want and (type(v) is not type(want) or v != want):
                    return None
        # an empty dict stays empty: truthiness is cheaper than building a key tuple
        d = mod._modules
        if mk:
            if tuple(d) != mk:
                return None
            cands += d.values()
        elif d:
            return None
        d = mod._parameters
        if pk:
            if tuple(d) != pk:
                return None
            praw += d.values()
        elif d:
            return None
        d = mod._buffers
        if bk:
            if tuple(d) != bk:
                return None
            braw += d.values()
        elif d:
            return None
    # Without sharing in the plan, a submodule that became shared is visited twice, so its
    # tensors repeat and fail the tensor patterns: only a plan with sharing needs mpat.
    if mpat is not None and _pc_pattern(cands) != mpat:
        return None
    if ppat is None:
        ids = set(map(id, praw))
        if len(ids) != len(praw) or _PC_NONE_ID in ids:
            return None
    elif _pc_pattern(praw) != ppat:
        return None
    if bpat is None:
        if braw:
            ids = set(map(id, braw))
            if len(ids) != len(braw) or _PC_NONE_ID in ids:
                return None
    elif _pc_pattern(braw) != bpat:
        return None
    if all_selected:
        praw += braw
        return praw
    return [praw[i] for i in psel] + [braw[i] for i in bsel]


def _pc_batch_guard(flat, checks):
    """One C++ check of every graph input at once -- exact type, dispatch keys, dtype,
    device, requires_grad, sizes and strides equal to `flat`'s (torch._C._dynamo.guards.
    TensorGuards, what Dynamo's guards used; present in torch 2.0-2.14). It accepts a
    subset of what the driver's own checks accept, so a pass skips them and a miss falls
    back to them. Dynamic dims are left to the driver (None: any size, and any strides of
    that input: its layout is the driver's check). None where torch lacks it or it does not
    take these tensors."""
    try:
        from torch._C._dynamo.guards import TensorGuards
        sizes = [[None if d in c.spec.dynamic else n for d, n in enumerate(t.shape)]
                 for t, c in zip(flat, checks)]
        strides = [[None] * t.dim() if c.spec.dynamic else list(t.stride())
                   for t, c in zip(flat, checks)]
        guard = TensorGuards(*flat, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides)
        return guard.check if guard.check(*flat) else None
    except Exception:  # noqa: BLE001 - an optional fast path: the Python checks remain
        return None


# ---------------------------------------------------------------------------------------------
# The call plan: the convention decoded once into what the per-call stages read.

_PC_TENSOR, _PC_MODULE, _PC_PYTREE, _PC_CONST, _PC_SAME, _PC_OPTIM = 0, 1, 2, 3, 4, 5  # args
_PC_OUT_GRAPH, _PC_OUT_INPUT, _PC_OUT_ALIAS, _PC_OUT_CONST, _PC_OUT_DTENSOR = 0, 1, 2, 3, 4
_PC_OUT_SIZE = 5


@_pc_record
class _PcCheck:
    """What one graph input must be at a call."""

    where: str
    spec: object  # its PcTensorInput
    shape: object  # torch.Size; None when a dim is dynamic (then checked dim by dim)
    dtype: object  # torch.dtype
    device: object  # torch.device
    stride: object  # tuple; None where strides are not checked
    order: object  # dynamic dims: the example's dims outer to inner, for its layout; or None


@_pc_record
class _PcPlan:
    """Everything the per-call stages read, decoded from the convention once at load."""

    fn_name: str
    Err: type
    nargs: int
    codes: tuple  # per argument: _PC_TENSOR / _PC_MODULE / _PC_PYTREE / _PC_CONST
    payloads: tuple  # per argument: PcModuleArg, (TreeSpec, leaves), baked value, same_as
    paths: tuple  # per argument: its name
    checks: tuple  # _PcCheck per graph input
    fast: tuple  # per input (shape, dtype, device-or-True, stride-or-None); () if dynamic
    dynamic: bool
    all_cpu: bool
    check_strides: bool
    constants: list  # tensors passed after the inputs
    mutations: tuple  # (input, output)
    grads: tuple  # (input, output)
    out_spec: object  # TreeSpec of fn's result
    sizes: object  # the result's tree literal where it holds a torch.Size, else None
    outs: tuple  # per result leaf: (code, index or value, (size, stride, offset) or None)
    single_out: int  # graph output index when fn's result is that one tensor, else -1
    device_types: tuple
    reuse_flat: bool  # nothing reads `flat` after the graph call (it empties its list)
    read: object  # tuple of the graph inputs the compiled graph takes; None: all of them
    distinct: tuple  # (input, is mutated): must not share memory with each other at a call
    same_size: tuple  # (shape id, ((input, dim), ...)): dynamic dims that share one size
    guards: tuple  # (compiled expression, ((name, input, dim), ...), PcGuard)
    guards_ok: object  # all guards as one function of the graph inputs; None without guards
    dyn_inputs: tuple  # (graph input, its dims with bounds, contiguous layout) per dynamic one
    dtensors: tuple  # _PcDT per DTensor graph input (Note [DTensor at the boundary])
    meshes: tuple  # PcMesh
    clear_grads: tuple = ()  # parameters whose .grad a call drops first (opt.zero_grad in fn)
    data_guards: tuple = ()  # PcDataGuard
    process_groups: tuple = ()  # PcProcessGroup
    # per graph input: requires_grad as captured, None where not checked; () where fn runs no
    # backward (Note [requires_grad at the boundary])
    grad_flags: tuple = ()
    needs_grad: bool = False  # gradients off is refused (Note [a backward under no_grad])


@_pc_record
class _PcDT:
    """A DTensor graph input, output or gradient: its layout, with its placements decoded."""

    index: int  # the graph input, graph output, or (gradients) graph output
    layout: object  # PcDTensor
    placements: tuple  # torch Placement objects
    where: str
    from_local: object  # DTensor.from_local, looked up once at load (not per call)


class _PcState:
    """Per-artifact state the calls share: module structure plans, the batch guard, and the
    DTensor specs last accepted per input (a parameter keeps its spec object: checked once)."""

    __slots__ = ("module_plans", "guard", "rebuilds", "specs")

    def __init__(self, nargs, ninputs=0):
        self.specs = [None] * ninputs
        # per module argument: None until the first call, False where the model's classes
        # customise the walk (Note [module structure cache])
        self.module_plans = [None] * nargs
        # _pc_batch_guard: built from the inputs of a call the full checks accepted; rebuilt
        # when a later accepted call differs in what only it looks at (e.g. requires_grad),
        # at most a few times, then the Python checks alone
        self.guard = None
        self.rebuilds = 8


def _pc_load_failure(Err, where, expected, actual):
    return Err("the artifact's metadata is malformed", invariant=7, stage="load", where=where,
               expected=expected, actual=actual,
               hint="load the python_code exactly as precompile returned it; precompile again "
                    "if it was edited")


def _pc_dtype(name, Err, where):
    dt = getattr(_pc_torch, name, None) if name.isidentifier() else None
    if not isinstance(dt, _pc_torch.dtype):
        raise _pc_load_failure(Err, where, "a torch dtype name", name)
    return dt


def _pc_device(name, Err, where):
    try:
        return _pc_torch.device(name)
    except (RuntimeError, ValueError):
        raise _pc_load_failure(Err, where, "a torch device", name) from None


def _pc_dense_order(shape, stride):
    """The dims of a dense layout, outer to inner (the example's memory format: contiguous,
    channels_last, a transpose); None when the layout is not dense."""
    order = tuple(sorted(range(len(shape)), key=lambda d: (-stride[d], d)))
    return order if _pc_dense_strides(shape, order) == _pc_strides_of(shape, stride) else None


def _pc_dense_strides(shape, order):
    """The strides of a dense tensor of `shape` laid out in `order`, size-1 dims as None
    (their stride is never read)."""
    out = [None] * len(shape)
    step = 1
    for d in reversed(order):
        out[d] = step if shape[d] != 1 else None
        step *= shape[d]
    return out


def _pc_strides_of(shape, stride):
    return [None if n == 1 else st for n, st in zip(shape, stride)]


def _pc_input_checks(conv, Err):
    checks = []
    for k, s in enumerate(conv.inputs):
        at = f"_PC_META['inputs'][{k}]"
        layout = conv.check_strides and k not in conv.unread  # invariant 6
        checks.append(_PcCheck(
            where=s.where, spec=s, shape=None if s.dynamic else _pc_torch.Size(s.shape),
            dtype=_pc_dtype(s.dtype, Err, at + "['dtype']"),
            device=_pc_device(s.device, Err, at + "['device']"),
            stride=s.stride if (layout and not s.dynamic) else None,
            order=((_pc_dense_order(s.shape, s.stride) or tuple(range(len(s.shape))))
                   if (layout and s.dynamic) else None)))
    return tuple(checks)


def _pc_arg_payloads(conv, Err):
    codes, payloads = [], []
    for k, a in enumerate(conv.args):
        at = f"_PC_META['args'][{k}]"
        try:
            if isinstance(a, PcModuleArg):
                codes.append(_PC_MODULE)
                payloads.append(a)
            elif isinstance(a, PcTensorArg):
                codes.append(_PC_TENSOR if a.same_as < 0 else _PC_SAME)
                payloads.append(a.same_as)
            elif isinstance(a, PcConstArg):
                codes.append(_PC_CONST)
                payloads.append(_pc_value(a.value))
            elif isinstance(a, PcOptimArg):
                codes.append(_PC_OPTIM)
                payloads.append(_pc_optim_payload(a, Err, at))
            else:
                codes.append(_PC_PYTREE)
                leaves = tuple((lf.path, lf.tensor, _pc_value(lf.value), lf.same_as)
                               for lf in a.leaves)
                payloads.append((_pc_treespec(a.spec, Err), leaves))
        except Err:
            raise
        except Exception as e:  # noqa: BLE001 - an edited literal: invariant 7, named
            raise _pc_load_failure(Err, at, "a decodable argument", f"{type(e).__name__}: "
                                   f"{str(e)[:120]}") from e
    return tuple(codes), tuple(payloads)


def _pc_output_plan(conv, Err):
    outs = []
    for j, o in enumerate(conv.outputs):
        if isinstance(o, PcGraphOut) and o.dtensor is not None:
            outs.append((_PC_OUT_DTENSOR, _pc_dt(o.index, o.dtensor, "fn's result", Err,
                                                 f"_PC_META['outputs'][{j}]"), None))
        elif isinstance(o, PcGraphOut):
            outs.append((_PC_OUT_GRAPH, o.index, None))
        elif isinstance(o, PcInputOut):
            outs.append((_PC_OUT_INPUT, o.index, None))
        elif isinstance(o, PcAliasOut):
            outs.append((_PC_OUT_ALIAS, o.index, (o.size, o.stride, o.offset)))
        elif isinstance(o, PcSizeOut):
            outs.append((_PC_OUT_SIZE, _pc_size_fn(o, j, Err), None))
        else:
            outs.append((_PC_OUT_CONST, _pc_value(o.value), None))
    return tuple(outs)


def _pc_size_fn(o, j, Err):
    """A size result's expression as a function of the graph inputs (checked as a guard's)."""
    code = _pc_sizes_code(o.expr, o.symbols, f"_PC_META['outputs'][{j}]['expr']", "<size>",
                          Err)
    binds = tuple((n, i, d) for n, (i, d) in o.symbols.items())
    return lambda flat: int(eval(code, _PC_GUARD_FNS,  # noqa: S307 - the artifact's own
                                 {n: flat[i].shape[d] for n, i, d in binds}))


def _pc_call_plan(conv, Err):
    """The per-call plan of a decoded convention (load-time work, done once)."""
    checks = _pc_input_checks(conv, Err)
    codes, payloads = _pc_arg_payloads(conv, Err)
    outs = _pc_output_plan(conv, Err)
    try:
        out_spec = _pc_treespec(conv.out_spec, Err)
        constants = [_pc_torch.tensor(c.data, dtype=_pc_dtype(c.dtype, Err, "constant"),
                                      device=c.device).reshape(c.shape)
                     for c in conv.constants]
    except Err:
        raise
    except Exception as e:  # noqa: BLE001 - an edited literal: invariant 7, named
        raise _pc_load_failure(Err, "_PC_META['out_spec'] / ['constants']", "decodable",
                               f"{type(e).__name__}: {str(e)[:120]}") from e
    dynamic = any(c.shape is None for c in checks)
    all_cpu = all(c.device.type == "cpu" for c in checks)
    mutations = tuple((w.input, w.output) for w in conv.mutations)
    grads = tuple((w.input, w.output, None if w.dtensor is None else _pc_dt(
        w.output, w.dtensor, conv.inputs[w.input].where + ".grad", Err,
        f"_PC_META['grads'][{j}]")) for j, w in enumerate(conv.grads))
    dtensors = tuple(_pc_dt(i, s.dtensor, s.where, Err, f"_PC_META['inputs'][{i}]")
                     for i, s in enumerate(conv.inputs) if s.dtensor is not None)
    unread = set(conv.unread)
    grad_flags = _pc_grad_flags(conv)
    return _PcPlan(
        fn_name=conv.fn_name, Err=Err, nargs=len(codes), codes=codes, payloads=payloads,
        paths=tuple(a.path for a in conv.args), checks=checks,
        fast=() if dynamic else tuple((tuple(c.shape), c.dtype, True if all_cpu else c.device,
                                       c.stride) for c in checks),
        dynamic=dynamic, all_cpu=all_cpu, check_strides=conv.check_strides,
        constants=constants, mutations=mutations, grads=grads, out_spec=out_spec, outs=outs,
        sizes=conv.out_spec if _pc_has_size(conv.out_spec) else None,
        single_out=(outs[0][1] if out_spec.is_leaf() and len(outs) == 1
                    and outs[0][0] == _PC_OUT_GRAPH else -1),
        device_types=tuple(sorted({c.device.type for c in checks} or {"cpu"})),
        reuse_flat=not (constants or mutations or grads or unread or dtensors
                        or any(o[0] in (_PC_OUT_INPUT, _PC_OUT_ALIAS, _PC_OUT_SIZE)
                               for o in outs)),
        read=tuple(i for i in range(len(checks)) if i not in unread) if unread else None,
        distinct=_pc_distinct(conv), same_size=_pc_same_size(conv),
        guards=_pc_guard_plan(conv, Err), guards_ok=_pc_guards_fn(conv),
        dyn_inputs=tuple(
            (i, tuple((d, lo, hi) for d, (lo, hi) in s.dynamic.items()
                      if lo is not None or hi is not None),
             checks[i].order == tuple(range(len(s.shape))))
            for i, s in enumerate(conv.inputs) if s.dynamic),
        dtensors=dtensors, meshes=conv.meshes,
        clear_grads=tuple(q.input for a in conv.args if isinstance(a, PcOptimArg)
                          and a.grads_cleared for g in a.groups for q in g.params),
        data_guards=conv.data_guards, process_groups=conv.process_groups,
        grad_flags=grad_flags, needs_grad=conv.backward or bool(grad_flags))


# Note [requires_grad at the boundary]
#   An artifact whose fn runs a backward (it accumulates .grad, or steps an optimizer on
#   them) computed gradients for exactly the tensors that required grad at capture. A call
#   with another pattern would be silently different from eager: a parameter frozen since
#   (requires_grad_(False)) would still get a .grad (and an optimizer step), one unfrozen
#   since would get none. So such an artifact checks each input's requires_grad against the
#   capture's, where its shape and dtype are checked; the batch guard compares it too. An
#   artifact that runs no backward ignores it, as its result carries no autograd history. A
#   DTensor's flag is its own, not its local shard's: left to the DTensor checks.
def _pc_grad_flags(conv):
    if not (conv.grads or any(isinstance(a, PcOptimArg) for a in conv.args)):
        return ()
    return tuple(None if s.dtensor is not None else bool(s.requires_grad)
                 for s in conv.inputs)


_PC_GUARD_FNS = {"__builtins__": {}, "min": min, "max": max, "abs": abs}


def _pc_guards_fn(conv):
    """Every guard in one compiled function of the graph inputs, for the hot path: the sizes
    are read where they live (`flat[6].shape[0]`), no dict is built per call. Built after
    _pc_guard_plan accepted each expression."""
    if not conv.guards:
        return None
    import re as _re

    parts = []
    for g in conv.guards:
        parts.append("(" + _re.sub(r"\b[A-Za-z_]\w*\b", lambda m: (
            "flat[%d].shape[%d]" % g.symbols[m.group(0)] if m.group(0) in g.symbols
            else m.group(0)), g.expr) + ")")
    return eval(compile("lambda flat: " + " and ".join(parts), "<guards>", "eval",  # noqa: S307
                        dont_inherit=True), dict(_PC_GUARD_FNS))


def _pc_sizes_code(expr, symbols, at, label, Err):
    """An expression over size symbols (a guard's, a size result's), compiled; one that is
    no Python or names anything but its symbols and _PC_GUARD_FNS is refused at load."""
    try:
        code = compile(expr, label, "eval", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        raise _pc_load_failure(Err, at, "a Python expression", repr(expr)[:80]) from e
    unknown = [n for n in code.co_names if n not in symbols and n not in _PC_GUARD_FNS]
    if unknown:
        raise _pc_load_failure(Err, at, "an expression over its symbols only", unknown)
    return code


def _pc_guard_plan(conv, Err):
    return tuple((_pc_sizes_code(g.expr, g.symbols, f"_PC_META['guards'][{j}]['expr']",
                                 f"<guard {g.text}>", Err),
                  tuple((n, i, d) for n, (i, d) in g.symbols.items()), g)
                 for j, g in enumerate(conv.guards))


def _pc_distinct(conv):
    """Note [aliased inputs at a call]: a compiled graph that writes into an input assumes
    it shares no memory with another input, as at capture (where one tensor passed twice
    became one input). So when it mutates inputs, the mutated ones and the user's tensors
    are checked for shared memory on every call; reads alone are safe and not checked."""
    mutated = {w.input for w in conv.mutations} | set(conv.written)
    if not mutated:
        return ()
    return tuple((i, i in mutated) for i, s in enumerate(conv.inputs)
                 if i in mutated or s.kind == "input")


def _pc_same_size(conv):
    groups = {}
    for i, s in enumerate(conv.inputs):
        for d, sid in s.shape_ids.items():
            groups.setdefault(sid, []).append((i, d))
    return tuple((sid, tuple(dims)) for sid, dims in groups.items() if len(dims) > 1)


# ---------------------------------------------------------------------------------------------
# DTensor at the boundary
#
# Note [DTensor at the boundary]
#   A DTensor (torch.distributed.tensor) is a wrapper: a local shard plus where it sits on a
#   device mesh (placements, global shape). Capture traces fn on the local shards, with each
#   DTensor rebuilt around its shard inside the trace, so the graph is plain tensors and
#   DTensor's own rules become ops, collectives included (functional collectives that name
#   their process group). The artifact is then specialized to each DTensor's layout as to a
#   shape: per call, every DTensor input is checked (type, mesh: device type, shape, dim
#   names, process groups; placements; global shape and stride) before its local shard goes
#   to the graph, whose own checks then cover the shard (shape, stride, dtype, device). DTensor
#   results and gradients are rebuilt around the graph's local outputs with their recorded
#   placements, on the runtime mesh of the inputs that share their mesh. A parameter keeps
#   its spec object from call to call, so its check runs once; a new input is checked fully.

def _pc_placements(texts, Err, at):
    import re as _re
    from torch.distributed.tensor import Partial, Replicate, Shard
    out = []
    for x in texts:
        m = _re.fullmatch(r"Shard\((\d+)\)|Replicate\(\)|Partial\((\w+)\)"
                          r"|_StridedShard\((\d+), (\d+)\)", x)
        if m is None:
            raise _pc_load_failure(Err, at + "['placements']", "Shard(d), Replicate(), "
                                   "Partial(op) or _StridedShard(d, split_factor)", x)
        if m.group(3) is not None:  # FSDP2 over tensor parallelism (2.11-2.15: private)
            from torch.distributed.tensor.placement_types import _StridedShard
            out.append(_StridedShard(int(m.group(3)), split_factor=int(m.group(4))))
            continue
        out.append(Shard(int(m.group(1))) if m.group(1) is not None
                   else Partial(m.group(2)) if m.group(2) is not None else Replicate())
    return tuple(out)


def _pc_dt(index, layout, where, Err, at):
    from torch.distributed.tensor import DTensor
    return _PcDT(index=index, layout=layout, where=where,
                 placements=_pc_placements(layout.placements, Err, at + "['dtensor']"),
                 from_local=DTensor.from_local)


def _pc_unwrap(p, st, flat):
    """Note [DTensor at the boundary]: each DTensor graph input checked and replaced in
    `flat` by its local shard. Returns the inputs as passed and the runtime mesh per mesh."""
    outer = flat[:]
    meshes = [None] * len(p.meshes)
    for dt in p.dtensors:
        i = dt.index
        t = flat[i]
        spec = getattr(t, "_spec", None)
        if spec is None or spec is not st.specs[i]:
            __tracebackhide__ = True
            _pc_check_dtensor(p, dt, t)
            st.specs[i] = spec
        mesh, k = spec.mesh, dt.layout.mesh
        if meshes[k] is None:
            meshes[k] = mesh
        elif mesh is not meshes[k] and mesh != meshes[k]:
            first = next(d.where for d in p.dtensors if d.layout.mesh == k)
            __tracebackhide__ = True
            raise p.Err(f"{p.fn_name}: {dt.where} and {first} are on different device meshes",
                        invariant=6, stage="call", where=dt.where,
                        expected=f"the device mesh of {first}, as at capture",
                        actual=str(mesh),
                        hint="distribute the model and the inputs on one mesh, as at capture")
        flat[i] = t._local_tensor
    return outer, meshes


def _pc_placement_text(x):
    """A placement as the artifact writes it: "Shard(0)", "Replicate()", "Partial(sum)",
    "_StridedShard(0, 2)" (dim, split_factor: FSDP2's dp shard of a tensor-parallel one)."""
    name = type(x).__name__
    if name == "Shard":
        return f"Shard({x.dim})"
    if name == "_StridedShard":
        return f"_StridedShard({x.dim}, {x.split_factor})"
    if name == "Partial":
        return f"Partial({x.reduce_op})"
    return f"{name}()" if name == "Replicate" else str(x)


def _pc_mesh_text(device_type, shape, dim_names):
    """A device mesh for people: "cuda [2, 4] ['dp', 'tp']"."""
    return f"{device_type} {list(shape)}" + (f" {list(dim_names)}" if dim_names else "")


def _pc_dtensor_fields(t):
    spec = t._spec
    m = spec.mesh
    return _PcFields(placements=[_pc_placement_text(x) for x in spec.placements],
                     mesh=_pc_mesh_text(m.device_type, m.shape, m.mesh_dim_names),
                     shape=list(t.shape), stride=list(t.stride()),
                     dtype=str(t.dtype).replace("torch.", ""))


def _pc_check_dtensor(p, dt, t):
    """Invariant 6 for one DTensor input: the precise error, or nothing."""
    __tracebackhide__ = True
    lay, mesh_rec = dt.layout, p.meshes[dt.layout.mesh]
    want = _PcFields(placements=list(lay.placements),
                     mesh=_pc_mesh_text(mesh_rec.device_type, mesh_rec.shape,
                                        mesh_rec.dim_names),
                     shape=list(lay.shape), stride=list(lay.stride),
                     dtype=p.checks[dt.index].spec.dtype)
    from torch.distributed.tensor import DTensor
    if not isinstance(t, DTensor):
        raise p.Err(f"{p.fn_name}: {dt.where} must be a DTensor, as at capture", invariant=6,
                    stage="call", where=dt.where, expected=want,
                    actual=type(t).__name__ if not isinstance(t, _pc_torch.Tensor)
                    else _pc_actual_fields(t),
                    hint=f"distribute it as at capture (distribute_tensor / distribute_module "
                         f"/ parallelize_module) with placements {want['placements']}")
    got = _pc_dtensor_fields(t)
    m = t._spec.mesh
    groups = [m.get_group(d).group_name for d in range(m.ndim)]
    bad = [f for f in ("mesh", "placements", "shape", "stride", "dtype") if got[f] != want[f]]
    if not bad and groups != list(mesh_rec.groups):
        got["groups"], want["groups"] = groups, list(mesh_rec.groups)
        raise p.Err(f"{p.fn_name}: {dt.where}: its device mesh uses other process groups "
                    "than at capture", invariant=6, stage="call", where=dt.where,
                    expected=want, actual=got,
                    hint="the graph's collectives name their process groups: create the "
                         "process groups and device meshes in the same order as at capture "
                         "(init_process_group, then the same init_device_mesh calls)")
    if bad:
        raise p.Err(f"{p.fn_name}: {dt.where}: DTensor {' and '.join(bad)} differ from the "
                    "example", invariant=6, stage="call", where=dt.where, expected=want,
                    actual=got,
                    hint="the artifact is specialized to each DTensor's mesh, placements and "
                         "global shape: redistribute it (.redistribute(mesh, placements)), or "
                         "precompile again with such an example",
                    extra={"mismatch": bad})


def _pc_wrap(dt, local, meshes):
    lay = dt.layout
    return dt.from_local(local, meshes[lay.mesh], dt.placements, run_check=False,
                         shape=_pc_torch.Size(lay.shape), stride=lay.stride)


# ---------------------------------------------------------------------------------------------
# Stage 1 of a call: arguments -> graph inputs
#
# Note [hidden driver frames]
#   A call's error names the argument, expected vs actual and the fix; the driver's own
#   frames above it (forward, the check that missed, the function that raises) tell the
#   user nothing. Each frame an error passes through sets `__tracebackhide__ = True`, which
#   pytest and IPython honour, so a traceback shows the user's line, then the message (the
#   %%precompile extension drops even the innermost one, which IPython would keep). On the
#   hot path it is set only in the branch that leads to a raise: an accepted call pays
#   nothing for it.


def _pc_flatten(p, st, args):
    """The graph inputs of one call: model tensors, tensor arguments and container leaves,
    in the captured order; baked values are compared with the captured ones."""
    if len(args) != p.nargs:
        __tracebackhide__ = True
        raise p.Err(f"{p.fn_name}: takes {p.nargs} positional arguments, got {len(args)}",
                    invariant=3, stage="call", where="arguments", expected=p.nargs,
                    actual=len(args), hint="call it as at capture, positionally")
    flat = []
    codes = p.codes
    for k, a in enumerate(args):
        code = codes[k]
        if code == _PC_TENSOR:
            flat.append(a)
        elif code == _PC_MODULE:
            plan = st.module_plans[k]
            tensors = _pc_plan_tensors(a, plan) if plan else None
            if tensors is None or (p.payloads[k].training is not None
                                   and a.training != p.payloads[k].training):
                __tracebackhide__ = True
                tensors = _pc_module_tensors(p, st, k, a)
            flat += tensors
        elif code == _PC_PYTREE:
            _pc_pytree_tensors(p, k, a, flat)
        elif code == _PC_SAME:
            if a is not flat[p.payloads[k]]:
                __tracebackhide__ = True
                _pc_not_same(p, p.paths[k], p.payloads[k], a)
        elif code == _PC_OPTIM:
            _pc_optim_tensors(p, k, a, flat)
        else:
            want = p.payloads[k]
            if type(a) is not type(want) or a != want:
                __tracebackhide__ = True
                _pc_baked_differs(p, p.paths[k], want, a)
    return flat


def _pc_module_tensors(p, st, k, m):
    """A model's parameters then buffers (invariant 2) by the full walk, which raises the
    precise error; remembers the model's structure for the next calls' fast path
    (Note [module structure cache])."""
    __tracebackhide__ = True
    tensors = _pc_module_walk(p, p.payloads[k], m)
    if st.module_plans[k] is not False:  # False: this model class customises the walk
        st.module_plans[k] = _pc_module_plan(m, p.payloads[k]) or False
    return tensors


def _pc_module_walk(p, arg, m):
    """named_parameters() + named_buffers() of `m`, checked against the traced names."""
    __tracebackhide__ = True
    Err, path, names = p.Err, arg.path, arg.names
    if not isinstance(m, _pc_torch.nn.Module):
        raise Err(f"{p.fn_name}: {path} must be an nn.Module", invariant=2, stage="call",
                  where=path, expected="torch.nn.Module", actual=type(m).__name__,
                  hint="pass the model (the same architecture as at capture)")
    named = list(m.named_parameters()) + list(m.named_buffers())
    if len(named) != len(names) or any(n != e for (n, _), e in zip(named, names)):
        got = [n for n, _ in named]
        at = next((j for j, (a, b) in enumerate(zip(names, got)) if a != b),
                  min(len(names), len(got)))
        entry = lambda ns: ns[at] if at < len(ns) else "(end)"  # noqa: E731
        raise Err(f"{p.fn_name}: {path}: the model's parameters/buffers differ from the "
                  "traced model", invariant=2, stage="call", where=path,
                  expected=_PcFields(entries=len(names), at=at, name=entry(names)),
                  actual=_PcFields(entries=len(got), at=at, name=entry(got)),
                  hint="build the model exactly as at capture (same class, config and weight "
                       "tying) and load your weights into it")
    if arg.training is not None and m.training != arg.training:
        raise Err(f"{p.fn_name}: {path}: train/eval mode differs from the traced model",
                  invariant=3, stage="call", where=f"{path}.training",
                  expected=arg.training, actual=m.training,
                  hint=f"call {path}.{'train' if arg.training else 'eval'}() first, or "
                       "precompile the other mode too")
    if arg.attrs:
        _pc_module_attrs(p, arg, m)
    return [t for _, t in named]


# Note [module attributes read]
#   What fn reads from a model's plain Python attributes (`self.scale`, a Dropout's `p`, a
#   flag such as `use_cache`, a submodule's `training`) decided the traced program as a baked
#   argument does, but eager reads them again at every call: a model changed after capture
#   (`model.head.scale = 2.0`, `model.drop.eval()`) would give another result in eager. So
#   capture records each such attribute fn read (bool, int, float, str, None, or a tuple of
#   them, found in the module's own __dict__, not changed by fn itself), and every call
#   compares it with the runtime model's, as a baked argument is compared: in the structure
#   plan's walk (one dict read per attribute), and with the precise error in the full walk.


def _pc_same_value(a, b):
    """Whether `a` is the baked value `b`: the same type and == (so 3.0 is not 3)."""
    return a is b or (type(a) is type(b) and a == b)


def _pc_attr_where(path, attr):
    """How a person names a model attribute the artifact checks: "m.drop.p"."""
    return ".".join(x for x in (path, attr.module, attr.name) if x)


def _pc_module_attrs(p, arg, m):
    """The attributes fn read from model `m` (arg.attrs), compared with the runtime model's;
    the first that differs is the error (Note [module attributes read])."""
    __tracebackhide__ = True
    mods = dict(m.named_modules())
    for a in arg.attrs:
        mod = mods.get(a.module)
        v = _pc_module_attrs if mod is None else mod.__dict__.get(a.name, _pc_module_attrs)
        if _pc_same_value(v, a.value):
            continue
        at = _pc_attr_where(arg.path, a)
        gone = v is _pc_module_attrs
        raise p.Err(f"{p.fn_name}: {at}: the model attribute fn read differs from its value "
                    "at capture", invariant=3, stage="call", where=at, expected=a.value,
                    actual="(no such attribute)" if gone else v,
                    hint=f"set {at} back to {a.value!r}, or precompile again with the new "
                         "value; a value meant to change between calls belongs in a tensor "
                         "(a buffer, or an argument of fn)")


def _pc_pytree_tensors(p, k, a, flat):
    """A container argument's tensor leaves onto `flat`; its structure and baked leaves are
    compared with the captured ones."""
    spec, leaves = p.payloads[k]
    values, got = _pc_pytree.tree_flatten(a)
    if got != spec:
        __tracebackhide__ = True
        raise p.Err(f"{p.fn_name}: {p.paths[k]}: structure differs from the example",
                    invariant=3, stage="call", where=p.paths[k], expected=str(spec),
                    actual=str(got),
                    hint="pass the same nesting of lists/tuples/dicts as at capture")
    for (path, is_tensor, want, same_as), leaf in zip(leaves, values):
        if same_as >= 0:
            if leaf is not flat[same_as]:
                __tracebackhide__ = True
                _pc_not_same(p, path, same_as, leaf)
        elif is_tensor:
            flat.append(leaf)
        elif type(leaf) is not type(want) or leaf != want:
            __tracebackhide__ = True
            _pc_baked_differs(p, path, want, leaf)


def _pc_not_same(p, where, same_as, got):
    __tracebackhide__ = True
    first = p.checks[same_as].where
    raise p.Err(f"{p.fn_name}: {where} must be the same tensor as {first}, as at capture",
                invariant=4, stage="call", where=where, expected=f"the tensor passed as {first}",
                actual="another tensor" if isinstance(got, _pc_torch.Tensor)
                else type(got).__name__,
                hint=f"pass {first} again as {where} (the artifact was captured with one tensor "
                     "for both, and its in-place updates are seen through both), or "
                     "precompile again with two distinct tensors")


def _pc_baked_differs(p, where, want, got):
    __tracebackhide__ = True
    raise p.Err(f"{p.fn_name}: {where}: non-tensor value differs from the one baked at "
                "capture", invariant=3, stage="call", where=where, expected=repr(want),
                actual=repr(got),
                hint="non-tensor inputs are baked: pass the captured value, or precompile "
                     "again with the new one (or pass it as a tensor)")


# ---------------------------------------------------------------------------------------------
# An optimizer argument
#
# Note [optimizer at the boundary]
#   A torch.optim.Optimizer argument is lifted like a model: its state tensors (exp_avg,
#   step, momentum_buffer, ...) and tensor hyperparameters (a tensor lr) are graph inputs,
#   read from the runtime optimizer on every call, its other hyperparameters are baked and
#   compared per call, and the parameters it steps must be the very tensors of the model
#   arguments before it. The graph updates parameters and state in place (written back like
#   buffer mutations). Gradients are consumed inside the graph, so what a call does with the
#   .grad it finds follows what fn does: when fn calls opt.zero_grad() before it reads any
#   gradient, the found .grad is dropped first (eager's zero_grad would drop it); otherwise
#   it must be None (eager would add it to the new gradient, which the graph cannot see).
#   After the call each parameter's .grad is what the traced fn left (None after
#   zero_grad()). A parameter with no state yet gets zeros (and step 0), what the optimizer's
#   own first step creates, for the optimizers where that is so (zero_init).

def _pc_optim_payload(a, Err, at):
    cls = _pc_find_class(a.module, a.name)
    if not isinstance(cls, type):
        raise _pc_load_failure(Err, at, f"the optimizer class {a.module}.{a.name}",
                               "not found")
    groups = tuple((tuple((q.input, q.keys) for q in g.params),
                    tuple((n, tuple(map(_pc_value, v)) if type(v) is list else _pc_value(v))
                          for n, v in zip(g.names, g.values)), g.tensors) for g in a.groups)
    return cls, groups, a


def _pc_optim_tensors(p, k, opt, flat):
    """An optimizer's state tensors and tensor hyperparameters onto `flat`, per group: each
    parameter's state, then the group's tensors; its parameters, class and baked
    hyperparameters are compared with the captured ones."""
    cls, groups, rec = p.payloads[k]
    path = p.paths[k]
    if type(opt) is not cls or len(opt.param_groups) != len(groups):
        _pc_optim_differs(p, path, rec, opt)
    state, check_none = opt.state, not rec.grads_cleared
    for j, (params, hyper, tensors) in enumerate(groups):
        g = opt.param_groups[j]
        ps = g["params"]
        if len(ps) != len(params):
            _pc_optim_differs(p, path, rec, opt)
        for m, (i, keys) in enumerate(params):
            t = ps[m]
            if t is not flat[i]:
                _pc_optim_param_differs(p, path, j, m, i)
            if check_none and t.grad is not None:
                _pc_optim_grad_found(p, path, i)
            s = state.get(t)
            if not s:
                s = _pc_optim_zero_state(p, path, rec, state, t, keys, len(flat))
            if len(s) != len(keys):
                _pc_optim_state_differs(p, path, i, keys, s)
            for key in keys:
                v = s.get(key)
                if not isinstance(v, _pc_torch.Tensor):
                    _pc_optim_state_differs(p, path, i, keys, s)
                flat.append(v)
        for name, want in hyper:
            got = g.get(name, _pc_optim_hyper_differs)
            if got is not want and (type(got) is not type(want) or got != want):
                _pc_optim_hyper_differs(p, f"{path}.param_groups[{j}]['{name}']", want, got)
        for name in tensors:
            flat.append(g.get(name))
    opt._opt_called = True  # what its step() tells an LR scheduler, as eager's would


def _pc_optim_zero_state(p, path, rec, state, t, keys, n):
    """A parameter's state as zeros, as the optimizer's first step creates it (zero_init)."""
    if not rec.zero_init:
        raise p.Err(f"{p.fn_name}: {path} has no state for a parameter it steps",
                    invariant=1, stage="call", where=f"{path}.state",
                    expected=f"state {list(keys)}", actual="no state",
                    hint="run one eager step first (loss.backward(); opt.step(); "
                         "opt.zero_grad()), or load the optimizer's state_dict")
    s = state[t] = {}
    for key in keys:
        c = p.checks[n].spec
        n += 1
        zeros = _pc_torch.empty_strided(c.shape, c.stride, device=c.device, dtype=_pc_dtype(
            c.dtype, p.Err, c.where)).zero_()
        lay = c.dtensor
        if lay is not None:  # the state of a DTensor parameter (TP, FSDP2): on its mesh
            zeros = type(t).from_local(
                zeros, t.device_mesh, _pc_placements(lay.placements, p.Err, c.where),
                run_check=False, shape=_pc_torch.Size(lay.shape), stride=tuple(lay.stride))
        s[key] = zeros
    return s


def _pc_optim_differs(p, path, rec, opt):
    groups = getattr(opt, "param_groups", None)
    raise p.Err(f"{p.fn_name}: {path}: the optimizer differs from the traced one",
                invariant=2, stage="call", where=path,
                expected=_PcFields(type=f"{rec.module}.{rec.name}", groups=[
                    len(g.params) for g in rec.groups]),
                actual=_PcFields(type=f"{type(opt).__module__}.{type(opt).__qualname__}",
                                 groups=[len(g.get("params", ())) for g in groups]
                                 if isinstance(groups, list) else None),
                hint="build the optimizer as at capture (same class, the same parameters in "
                     "the same param_groups), or precompile again")


def _pc_optim_param_differs(p, path, j, m, i):
    want = p.checks[i].where
    raise p.Err(f"{p.fn_name}: {path}.param_groups[{j}]['params'][{m}] is not {want}",
                invariant=2, stage="call", where=f"{path}.param_groups[{j}]['params'][{m}]",
                expected=f"the tensor passed as {want}", actual="another tensor",
                hint="build the optimizer over the parameters of the model you pass "
                     "(opt = Optimizer(model.parameters(), ...)), in the order of capture")


def _pc_optim_grad_found(p, path, i):
    where = p.checks[i].where
    raise p.Err(f"{p.fn_name}: {where}.grad holds a gradient from before the call",
                invariant=5, stage="call", where=f"{where}.grad",
                expected="None: the graph steps with the gradients fn computes",
                actual="a tensor (eager would add it to the new gradient)",
                hint=f"call {path}.zero_grad() before the call, or call it first inside fn "
                     "(before loss.backward())")


def _pc_optim_state_differs(p, path, i, keys, s):
    where = p.checks[i].where
    raise p.Err(f"{p.fn_name}: {path}: the state of {where} differs from the traced one",
                invariant=2, stage="call", where=f"{path}.state[{where}]",
                expected=f"tensors {list(keys)}",
                actual={k: type(v).__name__ for k, v in s.items()},
                hint="build the optimizer as at capture (same class and options, such as "
                     "amsgrad or momentum), or precompile again")


def _pc_optim_hyper_differs(p, where, want, got):
    if got is _pc_optim_hyper_differs:
        got = "missing"
    tensor_hint = (" Pass a tensor instead (e.g. lr=torch.tensor(1e-3) when building the "
                   "optimizer, as torch.compile recommends for LR schedulers): a tensor "
                   "hyperparameter is a graph input that may change on every call."
                   if isinstance(want, float) else "")
    raise p.Err(f"{p.fn_name}: {where} differs from the value baked at capture",
                invariant=3, stage="call", where=where, expected=repr(want),
                actual=repr(got),
                hint="a float hyperparameter is baked into the graph: set it back, or "
                     "precompile again with the new value." + tensor_hint)


# ---------------------------------------------------------------------------------------------
# Stage 2 of a call: check every graph input (invariants 2, 3, 6) before any kernel runs

_PC_TENSOR_TYPES = {_pc_torch.Tensor, _pc_torch.nn.Parameter}  # exact types: skip isinstance


def _pc_check(p, st, flat):
    """Where the batch guard (tried first, in forward) is not armed or misses: the hot-path
    tuple compare, else (or on any difference) the full checks, which raise the precise
    error."""
    if p.dynamic:
        __tracebackhide__ = True
        _pc_check_all(p, flat)
    else:
        all_cpu, strides, Tensor = p.all_cpu, p.check_strides, _pc_torch.Tensor
        for t, c in zip(flat, p.fast):
            if not ((type(t) in _PC_TENSOR_TYPES
                     or (isinstance(t, Tensor) and not _pc_is_wrapper(t)))
                    and (t.shape, t.dtype, t.is_cpu if all_cpu else t.device,
                         t.stride() if strides else None) == c):
                __tracebackhide__ = True
                _pc_check_all(p, flat)
                break
    if p.grad_flags and not all(rg is None or t.requires_grad is rg
                                for t, rg in zip(flat, p.grad_flags)):
        __tracebackhide__ = True
        _pc_check_all(p, flat)  # raises the precise error (Note [requires_grad at the boundary])
    if st.rebuilds > 0:  # accepted: guard the next calls with one C++ check
        st.rebuilds -= 1
        st.guard = _pc_batch_guard(flat, p.checks)


def _pc_check_dims(p, flat):
    """After the batch guard passed a dynamic artifact's inputs: what only the driver checks,
    their dynamic dims (bounds, layout, shared sizes, guards); any doubt goes to the full
    checks, which raise the precise error."""
    for i, bounded, contiguous in p.dyn_inputs:
        c, t = p.checks[i], flat[i]
        for d, lo, hi in bounded:
            n = t.shape[d]
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                __tracebackhide__ = True
                _pc_check_all(p, flat)
        # is_contiguous() is the one C call for the common layout; other layouts are rebuilt
        if (c.order is not None and not (contiguous and t.is_contiguous())
                and not _pc_layout_ok(c, t)):
            __tracebackhide__ = True
            _pc_check_all(p, flat)
    if p.same_size or (p.guards_ok is not None and not p.guards_ok(flat)):
        __tracebackhide__ = True
        _pc_check_shared(p, flat)  # raises the precise error for a failing guard


def _pc_is_wrapper(t):
    """A tensor subclass that wraps others (DTensor and the like): never a plain input."""
    return hasattr(type(t), "__tensor_flatten__")


def _pc_check_all(p, flat):
    __tracebackhide__ = True
    for i, c in enumerate(p.checks):
        t = flat[i]
        if type(t) not in _PC_TENSOR_TYPES and _pc_is_wrapper(t):
            _pc_fail_wrapper(p, i, t)
        if c.shape is None:
            _pc_check_dynamic(p, i, t, flat)
        elif (not isinstance(t, _pc_torch.Tensor) or t.shape != c.shape or t.dtype != c.dtype
              or t.device != c.device or not _pc_layout_ok(c, t)):
            _pc_fail_tensor(p, i, t, flat)
        if p.grad_flags and p.grad_flags[i] not in (None, t.requires_grad):
            _pc_fail_grad(p, i, t, flat)
    _pc_check_shared(p, flat)


def _pc_fail_grad(p, i, t, flat):
    __tracebackhide__ = True
    where, was = p.checks[i].where, p.grad_flags[i]
    raise p.Err(f"{p.fn_name}: {where}: requires_grad differs from the capture",
                invariant=2, stage="call", where=where, expected=f"requires_grad={was}",
                actual=f"requires_grad={bool(t.requires_grad)}",
                hint="the captured backward computes gradients for exactly the tensors that "
                     f"required grad at precompile: set {where}.requires_grad_({was}) again, "
                     "or precompile again after freezing or unfreezing",
                extra={"inputs": _pc_input_table(p, flat)})


def _pc_check_shared(p, flat):
    """Conditions across dynamic sizes: shared shape ids, then the capture's guards."""
    __tracebackhide__ = True
    for sid, dims in p.same_size:
        _pc_check_same_size(p, sid, dims, flat)
    for code, binds, g in p.guards:
        sizes = {n: flat[i].shape[d] for n, i, d in binds}
        if not eval(code, _PC_GUARD_FNS, sizes):  # noqa: S307 - the artifact's own
            _pc_guard_failed(p, g, binds, sizes)


def _pc_guard_failed(p, g, binds, sizes):
    __tracebackhide__ = True
    names = {n: f"{p.checks[i].where}.size({d})" for n, i, d in binds}
    raise p.Err(f"{p.fn_name}: the call breaks a condition the graph was captured under",
                invariant=3, stage="call", where=g.text, expected=g.text,
                actual=_PcFields((names[n], v) for n, v in sizes.items()),
                hint="this artifact serves the sizes where " + g.text + " holds (assumed at "
                     "capture because the example satisfies it"
                     + (f", needed by {g.source}" if g.source else "") + "); precompile with "
                     "an example of the sizes you need, or give the dim a range: "
                     "torch._dynamo.mark_dynamic(t, dim, min=..., max=...)",
                extra={"guard": g.expr, "source": g.source})

def _pc_layout_ok(c, t):
    """Invariant 6: the strides the kernels read. A size-1 dim's stride is never read, and
    a dynamic input must keep the example's memory format (dense, same dim order)."""
    if c.order is not None:
        return _pc_dense_strides(t.shape, c.order) == _pc_strides_of(t.shape, t.stride())
    if c.stride is None or t.stride() == c.stride:
        return True
    return all(n == 1 or a == b for n, a, b in zip(t.shape, t.stride(), c.stride))


def _pc_check_same_size(p, sid, dims, flat):
    sizes = [flat[i].shape[d] for i, d in dims]
    if any(n != sizes[0] for n in sizes):
        names = [f"{p.checks[i].where}.shape[{d}]" for i, d in dims]
        __tracebackhide__ = True
        raise p.Err(f"{p.fn_name}: dims that share the shape id {sid!r} have different sizes",
                    invariant=3, stage="call", where=", ".join(names),
                    expected=f"one size for shape id {sid!r}",
                    actual=_PcFields(zip(names, sizes)),
                    hint="pass tensors whose marked dims agree (they were marked with "
                         f"mark_unbacked(..., shape_id={sid!r}))")


def _pc_check_distinct(p, flat):
    """Note [aliased inputs at a call]."""
    seen = {}
    for i, mutated in p.distinct:
        t = flat[i]
        key = t.untyped_storage().data_ptr()
        if key == 0:  # no memory (an empty tensor)
            continue
        j = seen.setdefault(key, (i, mutated))
        if j[0] != i and (mutated or j[1]):
            a, b = p.checks[j[0]].where, p.checks[i].where
            __tracebackhide__ = True
            raise p.Err(f"{p.fn_name}: {a} and {b} share memory, and the artifact writes into "
                        f"{a if j[1] else b}", invariant=4, stage="call", where=f"{a}, {b}",
                        expected="tensors that share no memory, as at capture",
                        actual="views of one storage",
                        hint=f"pass a copy ({b}.clone()), or precompile with the same tensor "
                             "for both if that is what the computation means")


def _pc_check_dynamic(p, i, t, flat):
    __tracebackhide__ = True
    c = p.checks[i]
    s = c.spec
    if (not isinstance(t, _pc_torch.Tensor) or t.dtype != c.dtype or t.device != c.device
            or t.dim() != len(s.shape)):
        _pc_fail_tensor(p, i, t, flat)
    for d, n in enumerate(t.shape):
        if d in s.dynamic:
            lo, hi = s.dynamic[d]
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                raise p.Err(f"{p.fn_name}: {c.where}: dynamic dim {d} out of its bounds",
                            invariant=3, stage="call", where=f"{c.where}.shape[{d}]",
                            expected=f"{lo} <= size <= {hi}", actual=n,
                            hint="pass a size inside the bounds the dim was marked with "
                                 "(mark_dynamic / mark_unbacked min and max)")
        elif n != s.shape[d]:
            _pc_fail_tensor(p, i, t, flat)
    if not _pc_layout_ok(c, t):
        raise p.Err(f"{p.fn_name}: {c.where}: memory layout differs from the example",
                    invariant=6, stage="call", where=c.where,
                    expected=_PcFields(layout=_pc_layout_name(c.order)),
                    actual=_pc_actual_fields(t),
                    hint=f"pass it in the example's memory format (e.g. {c.where}.contiguous() "
                         "or .to(memory_format=torch.channels_last), as at capture)")


def _pc_layout_name(order):
    if order == tuple(range(len(order))):
        return "contiguous"
    return f"dense, dims outer to inner {list(order)}"


def _pc_expected_fields(p, c):
    s = c.spec
    shape = [f"<dynamic {d}>" if d in s.dynamic else n for d, n in enumerate(s.shape)]
    out = _PcFields(shape=shape, dtype=s.dtype, device=s.device)
    if c.stride is not None:
        out["stride"] = list(s.stride)
    elif c.order is not None:
        out["layout"] = _pc_layout_name(c.order)
    return out


def _pc_actual_fields(t):
    if not isinstance(t, _pc_torch.Tensor):
        return type(t).__name__
    return _PcFields(shape=list(t.shape), dtype=str(t.dtype).replace("torch.", ""),
                     device=str(t.device), stride=list(t.stride()))


def _pc_mismatch(c, t):
    """The fields of input `t` that differ from check `c` (empty: it passes)."""
    if not isinstance(t, _pc_torch.Tensor):
        return ["type"]
    s = c.spec
    shape_ok = (t.dim() == len(s.shape)
                and all(d in s.dynamic or n == s.shape[d] for d, n in enumerate(t.shape)))
    layout_ok = not shape_ok or _pc_layout_ok(c, t)
    return [f for f, ok in (("shape", shape_ok), ("dtype", t.dtype == c.dtype),
                            ("device", t.device == c.device),
                            ("stride" if c.order is None else "layout", layout_ok)) if not ok]


def _pc_input_table(p, flat):
    """Every graph input, expected vs actual: the explorer marks the rows that differ."""
    return [{"where": c.where, "expected": _pc_expected_fields(p, c),
             "actual": _pc_actual_fields(t), "mismatch": _pc_mismatch(c, t)}
            for c, t in zip(p.checks, flat)]


def _pc_fail_wrapper(p, i, t):
    __tracebackhide__ = True
    where = p.checks[i].where
    raise p.Err(f"{p.fn_name}: {where} is a {type(t).__name__} where the example was a plain "
                "tensor", invariant=6, stage="call", where=where, expected="torch.Tensor",
                actual=type(t).__name__,
                hint=(f"pass {where}.to_local() / .full_tensor(), or precompile with a "
                      f"{type(t).__name__} example" if hasattr(t, "to_local") else
                      f"pass a plain tensor, or precompile with a {type(t).__name__} example"))


def _pc_fail_tensor(p, i, t, flat):
    __tracebackhide__ = True
    c = p.checks[i]
    where, s, Err = c.where, c.spec, p.Err
    if not isinstance(t, _pc_torch.Tensor):
        raise Err(f"{p.fn_name}: {where} must be a tensor", invariant=6, stage="call",
                  where=where, expected="torch.Tensor", actual=type(t).__name__,
                  hint="pass the same kind of value as at capture")
    if t.dtype != c.dtype or t.device != c.device:
        inv, what, hint = 6, "dtype or device differs from the example", (
            f"convert it: {where}.to(device='{s.device}', dtype=torch.{s.dtype}), or "
            "precompile again with such an example")
    elif t.shape == c.shape and not _pc_layout_ok(c, t):
        inv, what, hint = 6, "memory layout (strides) differs from the example", (
            "the inductor artifact is specialized to the example's layout: pass "
            f"{where}.contiguous() (or the example's memory format), or use backend='eager' "
            "which accepts any layout")
    elif s.kind in ("param", "buffer"):
        inv, what = 2, "a model parameter/buffer has another shape than when traced"
        hint = ("build the model with the same configuration as at capture and load your "
                "weights into it")
    else:
        inv, what = 3, "shape differs from the example"
        hint = ("shapes are specialized at capture: pass the example's shape, or mark the "
                "dimension dynamic with torch._dynamo.mark_dynamic(t, dim) (or mark_unbacked) "
                "before precompile (inductor backend)")
        if s.dynamic:
            hint = "only the dims marked dynamic may vary, within their bounds; " + hint
    raise Err(f"{p.fn_name}: {where}: {what}", invariant=inv, stage="call", where=where,
              expected=_pc_expected_fields(p, c), actual=_pc_actual_fields(t), hint=hint,
              extra={"inputs": _pc_input_table(p, flat)})


# ---------------------------------------------------------------------------------------------
# Stages 3 and 4 of a call: run the graph, write back, rebuild the result


_pc_is_grad_enabled = _pc_torch.is_grad_enabled
_pc_set_grad_enabled = _pc_torch._C._set_grad_enabled
_pc_is_autocast_enabled = _pc_torch.is_autocast_enabled


def _pc_run(p, graph_call, flat, dts=None):
    """Call the compiled graph without autograd, then write mutations back (invariant 4) and
    accumulate gradients like eager .backward() (invariant 5). `dts`: the inputs as passed
    and the runtime meshes, where DTensors were unwrapped (Note [DTensor at the boundary])."""
    grad_was = _pc_is_grad_enabled()
    if p.needs_grad and not grad_was:
        __tracebackhide__ = True
        _pc_fail_no_grad(p, flat)
    _pc_set_grad_enabled(False)  # torch.no_grad() inline: a tenth of its cost
    try:
        if p.reuse_flat:
            args = flat
        elif p.read is None:
            args = flat + p.constants
        else:
            args = [flat[i] for i in p.read] + p.constants
        for i in p.clear_grads:  # Note [optimizer at the boundary]: fn's zero_grad comes first
            flat[i].grad = None
        device_types = p.device_types
        if (_pc_is_autocast_enabled(device_types[0]) if len(device_types) == 1
                else any(_pc_is_autocast_enabled(d) for d in device_types)):
            # ambient autocast would re-cast the graph's ops; the artifact is specialized
            with _pc_torch.autocast(device_types[0], enabled=False):
                outs = graph_call(args)
        else:
            outs = graph_call(args)
        for i, o in p.mutations:
            flat[i].copy_(outs[o])
        for i, o, dt in p.grads:
            if dt is None:
                t, g = flat[i], outs[o]
            else:
                t, g = dts[0][i], _pc_wrap(dt, outs[o], dts[1])
            if t.grad is None:
                t.grad = g
            else:
                t.grad += g
    finally:
        _pc_set_grad_enabled(grad_was)
    return outs


# Note [a backward under no_grad]
#   Under torch.no_grad() or inference_mode, eager's loss.backward() (or autograd.grad) in fn
#   raises (the loss has no grad_fn). The artifact runs its captured backward without
#   autograd, so it would accumulate gradients (and step an optimizer), or return gradients,
#   where eager stops. So an artifact whose fn ran autograd at capture (PcConvention.backward),
#   or that accumulates gradients or steps an optimizer, refuses a call with gradients off,
#   before anything runs or is written; a fn that turns gradients on itself is called inside
#   torch.enable_grad().
def _pc_fail_no_grad(p, flat):
    __tracebackhide__ = True
    raise p.Err(f"{p.fn_name}: called with gradients off, but fn runs autograd (a backward)",
                invariant=5, stage="call", where="torch.is_grad_enabled()",
                expected="gradients enabled (fn's .backward() / autograd.grad needs them)",
                actual="gradients disabled (torch.no_grad() or torch.inference_mode())",
                hint="eager's .backward() / autograd.grad raises here; call it outside "
                     "no_grad / inference_mode (or inside torch.enable_grad())",
                extra={"inputs": _pc_input_table(p, flat)})


def _pc_rebuild(p, flat, outs, dts=None):
    """fn's result: graph outputs, inputs returned as they are, views of inputs rebuilt on
    the runtime inputs (invariant 4: aliases stay aliases), DTensors rebuilt around their
    local outputs, and baked values."""
    res = []
    for code, v, view in p.outs:
        if code == _PC_OUT_GRAPH:
            res.append(outs[v])
        elif code == _PC_OUT_INPUT:
            res.append(flat[v] if dts is None else dts[0][v])
        elif code == _PC_OUT_DTENSOR:
            res.append(_pc_wrap(v, outs[v.index], dts[1]))
        elif code == _PC_OUT_ALIAS:
            res.append(flat[v].as_strided(*view))
        elif code == _PC_OUT_SIZE:
            res.append(v(flat))
        else:
            res.append(v)
    if p.sizes is None:
        return _pc_pytree.tree_unflatten(res, p.out_spec)
    return _pc_with_sizes(p.sizes, _pc_pytree.tree_unflatten(res, p.out_spec))


def _pc_has_size(lit):
    return lit.get("type") == "Size" or any(_pc_has_size(c) for c in lit.get("children", ()))


def _pc_with_sizes(lit, v):
    """`v` with each node the literal calls a Size made a torch.Size (Note [tree literal])."""
    t = lit.get("type")
    if t == "Size":
        return _pc_torch.Size(v)
    if t in ("leaf", "None", "pytree"):
        return v
    kids = lit["children"]
    if t in ("dict", "OrderedDict"):
        return type(v)((k, _pc_with_sizes(c, v[k])) for k, c in zip(lit["keys"], kids))
    items = [_pc_with_sizes(c, x) for c, x in zip(kids, v)]
    if t in ("list", "tuple", "structseq"):
        return items if t == "list" else type(v)(items)
    return type(v)(*items)


def _pc_call_failed(p, e):
    """A call that passed every check and still failed inside the compiled graph or a
    kernel (out of memory, a runtime assert of the graph, a broken tensor subclass)."""
    import traceback
    if p.data_guards and type(e) is RuntimeError:
        hit = _pc_data_guards_hit(p.data_guards, str(e))
        if hit:
            return _pc_data_guard_failed(p, hit, str(e))
    frames = traceback.extract_tb(e.__traceback__)
    inner = frames[-1] if frames else None
    return p.Err(f"{p.fn_name}: the compiled computation failed: {type(e).__name__}",
                 stage="call",
                 where=(f"{inner.filename}:{inner.lineno}: {(inner.line or '').strip()}"
                        if inner else p.fn_name),
                 expected="a call that runs once its inputs pass the checks",
                 actual=f"{type(e).__name__}: {str(e).strip()[:300]}",
                 hint="the chained exception has the original error; if it says out of "
                      "memory, use smaller inputs; otherwise report it with the artifact")


# the eager graph's failed _assert_scalar says "Runtime assertion failed for expression E on
# node 'n'"; Inductor's generated check raises RuntimeError(E) (2.13, 2.15)
_PC_ASSERT_PREFIX = "Runtime assertion failed for expression "


def _pc_data_guards_hit(data_guards, msg):
    """The data guards a failed check of the graph is about: those that share a symbol with
    it; all of them when it names a symbol none of them has (torch renamed it). None when
    the error is not such a check."""
    import re as _re
    text = msg.strip()
    if text.startswith(_PC_ASSERT_PREFIX):
        text = text[len(_PC_ASSERT_PREFIX):].split(" on node ")[0]
    elif "\n" in text or not _re.fullmatch(r"[\w\s<>=!(),.*+/%-]+", text):
        return None
    names = set(_re.findall(r"\b[a-z]\d+\b", text))
    if not names:
        return None
    return [g for g in data_guards if names & set(g.symbols)] or list(data_guards)


def _pc_data_guard_failed(p, hit, msg):
    """This call's data takes another way than the example's at a data guard."""
    lines = list(dict.fromkeys(g.source or "(no source line)" for g in hit))
    return p.Err(f"{p.fn_name}: this call's data takes another branch than the example's",
                 invariant=3, stage="call", where="; ".join(lines),
                 expected="data that decides as the example's did: "
                          + "; ".join(dict.fromkeys(g.text for g in hit)),
                 actual="the graph's check failed: " + msg.strip()[:200],
                 hint="the artifact holds only the branch the example took "
                      "(precompile(..., data_guards=True)); nothing of this call was written "
                      "back (no gradient, no in-place update). Precompile with an example "
                      "whose data takes the branch you need, or write the branch with tensor "
                      "ops (torch.where) so that one graph serves both",
                 extra={"data_guards": [g.expr for g in hit], "source": lines[0],
                        "check": msg.strip()[:200]})


def _pc_keywords_passed(p, args, kwargs):
    """forward(m, x=x): the artifact's arguments are positional only, in fn's order."""
    __tracebackhide__ = True
    key = next(iter(kwargs))
    order = ", ".join(p.paths)
    raise p.Err(f"{p.fn_name}: {key}= was passed by keyword; the artifact's arguments are "
                "positional only", stage="call", where=f"{key}=",
                expected=f"{p.nargs} positional arguments, in {p.fn_name}'s order: {order}",
                actual=f"{len(args)} positional, then keyword "
                       + ", ".join(f"{k}=" for k in kwargs),
                hint=f"pass {key} positionally: {p.fn_name}({order})")


# Note [process groups at the boundary]
#   The graph's collectives name their process groups ("0" is the default group) and bake
#   what the group's size was at capture: DDP's bucket is divided by it before its all-reduce
#   (sum), an FSDP2 gradient is averaged over it, an all-gather makes that many shards. Run
#   in a job where the group of that name has another size, the collectives would still run
#   and average wrongly, with no error. So the convention records each group (name, size,
#   the job's world size), and the first call of the artifact resolves every group by name
#   in this process and compares its size, before any kernel runs; a missing group (no
#   init_process_group) or another size is a PrecompileError. Once: a group registered
#   under a name keeps its ranks, so later calls pay nothing.

def _pc_check_process_groups(p):
    """Every process group the graph's collectives name exists here with its capture size."""
    __tracebackhide__ = True
    for g in p.process_groups:
        try:
            from torch._C._distributed_c10d import _resolve_process_group
            size = _resolve_process_group(g.name).size()
        except Exception as e:  # noqa: BLE001 - no such group here: reported as such
            size, why = None, f"no process group '{g.name}' ({type(e).__name__})"
        if size == g.size:
            continue
        ranks = lambda n: f"{n} rank" + ("s" if n != 1 else "")  # noqa: E731
        actual = why if size is None else f"process group '{g.name}' of {ranks(size)}"
        raise p.Err(f"{p.fn_name}: the artifact's collectives were made for a process group "
                    f"of {g.size} ranks (a job of {g.world}); this job's has "
                    + ("none" if size is None else str(size)), invariant=6, stage="call",
                    where=f"process group '{g.name}' (the graph's collectives)",
                    expected=f"process group '{g.name}' of {g.size} ranks", actual=actual,
                    hint=f"run this artifact in a job of {g.world} ranks (init_process_group "
                         "and the same device meshes, in the same order, before its first "
                         "call); for this job, precompile again in it (every rank, or "
                         "precompile_on_one_rank, which compiles for the job it runs in)")


def _pc_make_forward(meta, graph_call, error_class=None):
    """The artifact's forward(*args), from its metadata literal and its compiled graph."""
    p = _pc_call_plan(_pc_decode(meta, error_class), error_class or PrecompileError)
    st = _PcState(p.nargs, len(p.checks))
    single_out, n_inputs, distinct, Err = p.single_out, len(p.checks), p.distinct, p.Err
    dynamic, has_dtensors = p.dynamic, bool(p.dtensors)
    groups_unchecked = bool(p.process_groups)  # Note [process groups at the boundary]

    def forward(*args, **kwargs):
        nonlocal groups_unchecked
        if kwargs:  # an empty dict's truth test: the one cost of naming the keyword
            __tracebackhide__ = True
            _pc_keywords_passed(p, args, kwargs)
        if groups_unchecked:  # once: a registered group keeps its ranks
            __tracebackhide__ = True
            _pc_check_process_groups(p)
            groups_unchecked = False
        try:
            flat = _pc_flatten(p, st, args)
            dts = _pc_unwrap(p, st, flat) if has_dtensors else None
            guard = st.guard  # all inputs in one C++ check, armed after an accepted call
            # (it raises TypeError on another number of tensors: never hand it one)
            if guard is None or len(flat) != n_inputs or not guard(*flat):
                _pc_check(p, st, flat)
            elif dynamic:  # the guard left the dynamic dims to us
                _pc_check_dims(p, flat)
            if distinct:
                _pc_check_distinct(p, flat)
            outs = _pc_run(p, graph_call, flat, dts)
            if single_out >= 0:
                return outs[single_out]
            return _pc_rebuild(p, flat, outs, dts)
        except Err:
            __tracebackhide__ = True
            raise
        except Exception as e:  # noqa: BLE001 - every failure of a call is a PrecompileError
            __tracebackhide__ = True
            raise _pc_call_failed(p, e) from e

    forward.__name__ = forward.__qualname__ = p.fn_name
    return forward
