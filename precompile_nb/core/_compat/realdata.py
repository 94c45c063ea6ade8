"""torch internals of data guards (Note [data guards] in capture/guards.py): fake tensors that
carry their real values while capture traces, what the trace decided from those values, and
the checks of those decisions as graph nodes.

torch's own mechanism, the one torch.export's draft mode uses (checked on 2.13 and 2.15; the
config and the ShapeEnv paths exist from 2.5 on, 2.11 included):
`torch._functorch.config.fake_tensor_propagate_real_tensors`, read when a FakeTensorMode is
made, makes the mode keep a real copy of every fake tensor and run each op on the copies too.
Where the trace then needs a value or a branch that depends on tensor data, ShapeEnv decides
it with the real value and records the decision as a deferred runtime assert (message
"propagate_real_tensors: <expr> == <value>") instead of raising GuardOnDataDependentSymNode.
`insert_deferred_runtime_asserts` writes those asserts into the graph as `_assert_scalar`
nodes right after the op that produced the value; Inductor compiles them into checks at the
same place of the program.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_DECIDED = "propagate_real_tensors"  # the message prefix of a decision by real values
# ShapeEnv's record of the unbacked symbols' real values (2.13-2.15; older: unbacked_var_to_val)
_REAL_VALS = ("real_tensor_prop_unbacked_vals", "unbacked_var_to_val")


@dataclass(frozen=True)
class Decision:
    """One decision the trace took from the example's data."""

    expr: Any  # the sympy condition that held for the example ("Eq(u0, 1)", "u0 > 0")
    symbols: tuple[str, ...]  # its unbacked symbols
    values: dict[str, Any]  # symbol -> its value at the example
    stack: str  # the Python stack where it was decided, traceback text


@contextlib.contextmanager
def real_values() -> Iterator[None]:
    """A FakeTensorMode made inside keeps real values (see the module docstring); ShapeEnv's
    warning per decision (a logger of torch's) is quiet meanwhile: capture reports them.
    And the cross-check of each op's fake and real results skips a storage offset that is a
    fresh data-dependent size: torch compares it with `!=` before it records the symbol's
    real value (right after), so writing into `out[start:end]` with `start` read from data
    (transformers' MoE backward before 5.24) failed as a data-dependent branch; it skips a
    real result that is None (the check would raise TypeError); and it skips the device of a
    0-dim result that the real kernel keeps on the host where the fake one says the GPU: the
    RNG seed and offset of CUDA's memory-efficient attention (2.11: a Qwen3-MoE training step
    with data_guards on an H100 failed with "metadata mismatch ... at output[2], for func:
    aten._scaled_dot_product_efficient_attention"). The check only compares metadata, the
    graph does not depend on it (2.13, 2.15: fake_utils._check_fake_real_tensors, imported by
    the mode at each call; patched here and restored)."""
    import torch._functorch.config as functorch_config
    from torch._subclasses import fake_utils

    log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level, original = log.level, fake_utils._check_fake_real_tensors

    def check(real_out: Any, fake_out: Any, context: str = "", sizes: bool = True,
              strides: bool = False, storage_offset: bool = True, requires_grad: bool = True,
              ) -> None:
        if not isinstance(real_out, torch.Tensor):
            return None  # a real kernel returned None where the fake returns a tensor (2.13:
            # native_batch_norm_backward's grad_input, for an input that needs no grad)
        if real_out.dim() == 0 and real_out.device.type == "cpu" != fake_out.device.type:
            return None  # a seed or offset eager keeps on the host (see above)
        if not isinstance(fake_out.storage_offset(), torch.SymInt):
            return original(real_out, fake_out, context, sizes, strides, storage_offset,
                            requires_grad)
        # the rest of torch's check: dtype, device, and sizes / strides where asked
        torch._prims.utils.compare_tensor_meta(real_out, fake_out, check_sizes=sizes,
                                               check_strides=strides, allow_rhs_unbacked=True)
        return None

    log.setLevel(logging.ERROR)
    fake_utils._check_fake_real_tensors = check
    try:
        with functorch_config.patch(fake_tensor_propagate_real_tensors=True), \
                _bool_values_as_bools():
            yield
    finally:
        fake_utils._check_fake_real_tensors = original
        log.setLevel(level)


@contextlib.contextmanager
def _bool_values_as_bools() -> Iterator[None]:
    """The real value of a tensor's bool (`if t.all():`, `if torch.rand([]) < p:`) recorded as
    a sympy bool. torch 2.11's FakeTensorMode records it as int(value) under the SymBool's
    key `Eq(u0, 1)`, so ShapeEnv's decision by real values got `1` where it needs `True` and
    recorded no guard: the example's branch was kept UNCHECKED (a call with other data ran it
    silently; 2.13 and 2.15 record the bool). Patched on ShapeEnv while capture traces,
    restored after; a no-op where the value is already a bool."""
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    original = ShapeEnv.__dict__.get("set_real_tensor_prop_unbacked_vals")
    if original is None:
        yield
        return

    def set_value(self: Any, k: Any, v: Any) -> None:
        if isinstance(k, sympy.logic.boolalg.Boolean) and not isinstance(v, torch.Tensor) \
                and type(v) is int and v in (0, 1):
            v = bool(v)
        return original(self, k, v)

    ShapeEnv.set_real_tensor_prop_unbacked_vals = set_value
    try:
        yield
    finally:
        ShapeEnv.set_real_tensor_prop_unbacked_vals = original


def fake_with_real_values(tensors: Sequence[torch.Tensor]) -> tuple[Any, list[Any]]:
    """Fake copies of `tensors`, static shapes, in a FakeTensorMode with a ShapeEnv that keeps
    their real values (as make_fx's own fake mode, plus the real copies)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with real_values():
        mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True,
                              allow_non_fake_inputs=True)
    return mode, [mode.from_tensor(t) for t in tensors]


def decisions(mode: Any) -> list[Decision]:
    """What the trace in `mode` decided from real values, in the order decided, each once."""
    env = getattr(mode, "shape_env", None)
    real = _real_vals(env)
    seen: dict[str, Decision] = {}
    for entries in getattr(env, "deferred_runtime_asserts", {}).values():
        for ra in entries:
            if not str(getattr(ra, "msg", "")).startswith(_DECIDED) or str(ra.expr) in seen:
                continue
            names = tuple(sorted(s.name for s in ra.expr.free_symbols))
            stack = getattr(ra, "stack", None)
            seen[str(ra.expr)] = Decision(
                expr=ra.expr, symbols=names,
                values={s.name: real[s] for s in ra.expr.free_symbols if s in real},
                stack="".join(stack.format()) if stack is not None else "")
    return list(seen.values())


_SLICES = {"slice", "slice_scatter", "narrow"}


def assume_nonnegative_bounds(gm: torch.fx.GraphModule, mode: Any
                              ) -> list[tuple[str, Any, torch.fx.Node]]:
    """Each bound of a slice in `gm` that is a value read from data (a plain unbacked
    symbol), >= 0 at the example and not known to be: `symbol >= 0` deferred as a runtime
    assert of the mode's ShapeEnv (so Inductor's lowering of the slice need not ask whether
    it counts from the end, which it could not decide: 2.13). Returns (symbol, its example
    value, the slice node) per assumption."""
    import sympy

    env, real, out, seen = mode.shape_env, _real_vals(mode.shape_env), [], set()
    for n in gm.graph.nodes:
        name = getattr(n.target, "__name__", "") if n.op == "call_function" else ""
        if name.split(".")[0] not in _SLICES:
            continue
        for a in n.args[2:4]:
            v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            e = v.node.expr if isinstance(v, torch.SymInt) else None
            if (not isinstance(e, sympy.Symbol) or e in seen or e not in real
                    or int(real[e]) < 0 or env.bound_sympy(e).lower >= 0):
                continue
            seen.add(e)
            env.guard_or_defer_runtime_assert(sympy.Ge(e, 0), "precompile_nb: slice bound")
            out.append((e.name, int(real[e]), n))
    return out


def insert_checks(gm: torch.fx.GraphModule, mode: Any) -> None:
    """The mode's deferred runtime asserts as `_assert_scalar` nodes of `gm`, each where its
    values are first known (torch.fx.passes.runtime_assert, 2.11-2.15)."""
    from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

    insert_deferred_runtime_asserts(gm, mode.shape_env, "precompile_nb data guards")
    _bool_asserts_on_bools(gm)
    gm.recompile()


def _bool_asserts_on_bools(gm: torch.fx.GraphModule) -> None:
    """A check on a tensor's bool (`Eq(u0, 1)`, u0 the bool) is inserted by 2.11 as
    `cast_symbool_to_symint_guardless(b) == 1`, and that cast's SymInt is not tracked by the
    tracer that re-traces the graph at lowering (functionalize: "is not tracked with proxy").
    The check is the bool itself (`== 1`) or its negation (`== 0`): assert that instead.
    2.13 and 2.15 insert no such cast: a no-op there."""
    import operator

    from torch.fx.experimental.symbolic_shapes import cast_symbool_to_symint_guardless

    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not cast_symbool_to_symint_guardless:
            continue
        for u in list(n.users):
            other = [a for a in u.args if a is not n]
            if u.target is not operator.eq or len(u.args) != 2 or other not in ([1], [0]):
                continue
            if other == [1]:
                u.replace_all_uses_with(n.args[0])
            else:
                with gm.graph.inserting_before(u):
                    u.replace_all_uses_with(gm.graph.call_function(torch.sym_not, (n.args[0],)))
            gm.graph.erase_node(u)
        if not n.users:
            gm.graph.erase_node(n)


def forget_real_values(gm: torch.fx.GraphModule, mode: Any) -> None:
    """After capture: no real tensor stays referenced from the graph (they are the example's
    activations), and nothing later (lowering) decides by the example's data: the mode stops
    propagating and ShapeEnv forgets the values, so a decision Inductor would need is an
    error there instead of an unchecked assumption."""
    from torch.utils import _pytree as pytree

    for n in gm.graph.nodes:
        for v in pytree.tree_leaves(n.meta.get("val")):
            if isinstance(v, torch.Tensor) and hasattr(v, "real_tensor"):
                v.real_tensor = None
    mode.propagate_real_tensors = False
    # and fakes made later (Inductor's pattern matcher fakes its example tensors with this
    # mode) get no real copy: with a symbolic size there is none to make (2.13, 2.15:
    # FakeTensorConverter.meta_converter and its describer each keep copy_data)
    meta = getattr(getattr(mode, "fake_tensor_converter", None), "meta_converter", None)
    for holder in (meta, getattr(meta, "describer", None)):
        if holder is not None and hasattr(holder, "copy_data"):
            holder.copy_data = False
    _real_vals(mode.shape_env).clear()


def _real_vals(env: Any) -> dict:
    for name in _REAL_VALS:
        vals = getattr(env, name, None)
        if isinstance(vals, dict):
            return vals
    return {}


def producers(gm: torch.fx.GraphModule) -> dict[str, torch.fx.Node]:
    """Unbacked symbol name -> the graph node whose result defines it (`unbacked_bindings`,
    recorded by make_fx, 2.11-2.15)."""
    out: dict[str, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        for s in (n.meta.get("unbacked_bindings") or {}):
            out.setdefault(str(s), n)
    return out


def is_random(n: torch.fx.Node) -> bool:
    """An op that draws random numbers (ATen's nondeterministic_seeded tag)."""
    tags = getattr(n.target, "tags", ()) if n.op == "call_function" else ()
    return torch.Tag.nondeterministic_seeded in tags
