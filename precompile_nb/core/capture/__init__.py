"""Stage 1: capture(fn, example_inputs) -> Captured.

A non-strict make_fx trace of the *whole* computation with every parameter, buffer and tensor
input lifted to a graph input, so no weight lives in the artifact. Capture enforces the
invariants that can be seen at trace time (1: nothing live baked; 3: no data-dependent reads;
4: no uncapturable effects) and records everything a later stage or a viewer needs.
It leaves the world as it found it: the trace runs on fake tensors, the RNG is restored.

The steps, one module each:
  lifting.py   the arguments as graph inputs, baked literals, and the function make_fx traces
  data_parallel.py  FSDP2 and DDP: their collectives written into the traced computation
  marks.py     dimension marks, and the guards the example decides
  checks.py    the invariant checks on the traced graph
  rewrites.py  the graph rewrites after the checks
  nodes.py     the graph as plain data for the viewers
  state.py     the models' Python state, restored after every trace
  guards.py    data guards: branches on tensor data kept as the example took them
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import reprlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...runtime.convention import Convention, DataGuard, Guard, ProcessGroup
from .. import _compat
from ..errors import PrecompileError, Problems, fn_name, positional_names
from ..schemas import Captured
from .checks import _check_constants, _check_nodes
from .guards import data_guards as _data_guards
from .lifting import (
    _arg_names,
    _lift,
    _Lifted,
    _make_flat_fn,
    _module_args,
    _trace_inputs,
    tree_literal,
)
from .marks import _MAX_GUARDS, _data_dependent_error, _guard, _guard_from, _numpy_error
from .nodes import graph_nodes
from .optim import finish_args
from .rewrites import (
    _drop_detach,
    _name_placeholders,
    _pin_factory_dtypes,
    _schema_mutated,
)
from .state import models_as_found, with_attributes_read

__all__ = ["capture", "Problems", "graph_nodes", "tree_literal"]


def capture(fn: Callable, example_inputs: Sequence[Any], *,
            decompositions: dict | None = None, data_guards: bool = False,
            problems: Problems | None = None) -> Captured | None:
    """Trace `fn(*example_inputs)` into one ATen graph with all tensors lifted to inputs.
    With `data_guards`, branches on tensor data are kept as the example takes them and
    checked on every call (Note [data guards] in guards.py).

    >>> import torch
    >>> c = capture(lambda m, x: m(x), [torch.nn.Linear(2, 3), torch.randn(4, 2)])
    >>> [s.where for s in c.inputs]
    ['m.weight', 'm.bias', 'x']
    """
    t0 = time.perf_counter()
    P = problems or Problems()
    _refuse_not_callable(fn)
    _refuse_wrong_count(fn, len(example_inputs))
    _refuse_ambient(P)
    names = _arg_names(fn, len(example_inputs))
    lifted = _lift(example_inputs, names, P)

    state: dict[str, Any] = {}
    flat_fn = _make_flat_fn(fn, example_inputs, lifted, state, P)
    dynamic = any(s.dynamic for s in lifted.specs)
    tracing_mode = "symbolic" if dynamic else "fake"
    traced = _trace_as_called(flat_fn, fn, example_inputs, names, lifted, decompositions,
                              data_guards, P)
    if traced is None:
        return None
    gm, guards, decided = traced
    constants = _check_constants(gm, fn, example_inputs, names, lifted, P)
    _check_nodes(gm, fn, P, data_guards)
    _pin_factory_dtypes(gm)
    _drop_detach(gm)
    _name_placeholders(gm, lifted.specs)
    gm.recompile()

    fake_inputs = tuple(n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder")
    captured = Captured(
        convention=_convention(fn, lifted, constants, state, guards, P)._replace(
            data_guards=decided, backward=_compat.graph_runs_backward(gm),
            process_groups=tuple(ProcessGroup(name=n, size=k, world=w)
                                 for n, k, w in _compat.collective_groups(gm))),
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
        example_tensors=tuple(lifted.tensors),
    )
    return dataclasses.replace(captured, nodes=graph_nodes(captured),
                               seconds=time.perf_counter() - t0)


def _refuse_not_callable(fn: Any) -> None:
    """fn is the computation itself; a result in its place (precompile(m(x), x)) is named."""
    if not callable(fn):
        raise PrecompileError(
            f"precompile's fn is not callable: it is {type(fn).__name__}", stage="capture",
            where="precompile's first argument", expected="a function, lambda or module",
            actual=f"{type(fn).__name__}: {reprlib.repr(fn)}",
            hint="pass the computation itself first, then its example inputs: "
                 "precompile(fn, *example_inputs), not precompile(fn(x), ...)")


def _refuse_wrong_count(fn: Callable, n: int) -> None:
    """As many example inputs as fn's positional parameters take (one each, in order): a
    missing or extra one is named before tracing, not a TypeError from inside the trace."""
    params = positional_names(fn)
    if params is None:  # a builtin without a signature: the trace will tell
        return
    try:
        inspect.signature(fn).bind(*([None] * n))
    except TypeError as e:
        name = fn_name(fn)
        raise PrecompileError(
            f"{name} takes {len(params)} positional argument(s), precompile got {n} example "
            "input(s)", stage="capture", where=f"precompile({name}, ...)",
            expected=f"one example input per parameter, in order: {name}({', '.join(params)})",
            actual=f"{n} example input(s): {e}",
            hint=f"pass precompile({name}, {', '.join(params) or '...'}): the model(s) as "
                 "arguments too (fn takes its models as parameters), then the tensors") from None


def _refuse_ambient(P: Problems) -> None:
    """What is around the call of precompile that capture cannot honour: an ambient
    autocast (invariant 6), another trace running (invariant 4)."""
    if ambient := _compat.autocast_enabled_devices():
        P.add(PrecompileError(
            "precompile was called under torch.autocast", invariant=6, stage="capture",
            where="ambient autocast", expected="autocast disabled around precompile",
            actual=f"enabled for {ambient}",
            hint="put the `with torch.autocast(...)` inside fn so it is part of the captured "
                 "computation, and call precompile outside it"))
    if around := _compat.ambient_trace():
        raise PrecompileError(
            "precompile was called inside another trace", invariant=4, stage="capture",
            where="the caller of precompile", expected="precompile called from eager code",
            actual=f"{around} is active",
            hint="call precompile from eager code, outside torch.compile, make_fx and "
                 "FakeTensorMode")


def _convention(fn: Callable, lifted: _Lifted, constants: list, state: dict[str, Any],
                guards: tuple[Guard, ...], P: Problems) -> Convention:
    """The calling convention as capture knows it (lower refines strides and write-backs)."""
    args = with_attributes_read(finish_args(lifted.args, state), lifted.attr_reads,
                                lifted.module_paths)
    return Convention(
        fn_name=fn_name(fn), args=args, inputs=tuple(lifted.specs),
        constants=tuple(constants), out_spec=tree_literal(state["out_spec"], "fn's result", P),
        outputs=tuple(state["out_leaves"]), mutations=(), grads=tuple(state["grads"]),
        check_strides=False, device_index=0, guards=guards, meshes=tuple(lifted.mesh_records))


# Note [inference traced as called]
#   The program always runs under no_grad and returns no autograd history, so capture traced
#   under enable_grad only so that a backward inside fn is recorded. But eager itself runs
#   other code when no gradient is recorded: nn.TransformerEncoderLayer's fused fast path
#   (Note [fused inference fast paths]) is taken only under no_grad. So precompile called
#   under no_grad (an inference fn, as eager would run it there) traces under no_grad; should
#   that trace fail or report any problem (fn runs its own backward, which needs gradients),
#   it traces again as before, under enable_grad, and that trace's outcome is the capture's.
#   Called with gradients enabled, capture traces once, under enable_grad.


def _trace_as_called(flat_fn: Callable, fn: Callable, example_inputs: Sequence[Any],
                     names: list[str], L: _Lifted, decompositions: dict | None,
                     data_guards: bool, P: Problems,
                     ) -> tuple[torch.fx.GraphModule, tuple[Guard, ...],
                                tuple[DataGuard, ...]] | None:
    """_trace under the caller's grad mode first (Note [inference traced as called])."""
    if not torch.is_grad_enabled():
        scratch = Problems(collect=True)
        try:
            traced = _trace(flat_fn, fn, example_inputs, names, L, decompositions,
                            data_guards, scratch, grad=False)
        except Exception:  # noqa: BLE001 - traced again under enable_grad, errors and all
            traced = None
        if traced is not None and not scratch.errors:
            return traced
    return _trace(flat_fn, fn, example_inputs, names, L, decompositions, data_guards, P,
                  grad=True)


def _trace(flat_fn: Callable, fn: Callable, example_inputs: Sequence[Any], names: list[str],
           L: _Lifted, decompositions: dict | None, data_guards: bool, P: Problems, *,
           grad: bool,
           ) -> tuple[torch.fx.GraphModule, tuple[Guard, ...], tuple[DataGuard, ...]] | None:
    """make_fx of the whole computation; with dynamic dims, repeated under each guard the
    example decides (Note [guards from the example]); with data guards, on fakes that carry
    the example's values (Note [data guards])."""
    dynamic = [s.dynamic for s in L.specs]
    guards: list[Guard] = []
    while True:
        trace_inputs = _trace_inputs(L)
        fake_mode, symbols = None, {}
        if any(dynamic):  # invariant 3: marked dims become symbolic sizes
            fake_mode, trace_inputs, symbols = _compat.fake_with_unbacked(
                trace_inputs, dynamic, [g.expr for g in guards], real=data_guards)
        elif data_guards:
            fake_mode, trace_inputs = _compat.fake_with_real_values(trace_inputs)
        before = {str(c) for c in _compat.runtime_asserts(fake_mode)}
        with (_compat.preserved_rng_state(), torch.set_grad_enabled(grad),
              _compat.no_autocast(), _compat.backward_op_origins(),
              _compat.tracing_as_a_compiler(), _compat.fused_fast_paths(),
              models_as_found(example_inputs, L.attr_reads),
              _compat.attribute_reads(L.module_paths, L.attr_reads),
              _compat.real_values() if data_guards else contextlib.nullcontext()):
            try:
                gm = _compat.make_fx_trace(
                    flat_fn, trace_inputs, decompositions=decompositions, fake_mode=fake_mode,
                    modules=_module_args(example_inputs, names), user_fn=fn)
                decided = (_data_guards(gm, fake_mode, fn, L, symbols, P) if data_guards
                           else ())
                asserted = [_guard(c, True, symbols, L, None)
                            for c in _compat.runtime_asserts(fake_mode) if str(c) not in before]
                return gm, tuple(guards) + tuple(g for g in asserted if g is not None), decided
            except _compat.data_dependent_errors() as e:
                guard = _guard_from(e, symbols, L)
                if guard is None or len(guards) >= _MAX_GUARDS:
                    _data_dependent_error(e, fn, symbols, L, P)
                    return None
                guards.append(guard)
            except RuntimeError as e:  # after them: they are RuntimeErrors too
                if not _compat.reads_into_numpy(e):
                    raise
                _numpy_error(e, fn, P)
                return None
