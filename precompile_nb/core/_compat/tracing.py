"""torch internals of capture: make_fx, fake tensors and symbolic sizes, dimension marks,
autocast and RNG state, pytree specs, and DTensor (the checked versions are named beside
each).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx as _make_fx

from .answers import _answering_on_this_thread, _compiler_answers, _marked
from .batch_norm import batch_norm_writes_unsaid, writes_said
from .scoped_patch import switched_off
from .stack_frames import stack_lines_read_when_kept


def make_fx_trace(fn: Callable, inputs: Sequence[Any], *, decompositions, fake_mode=None,
                  modules: dict[str, torch.nn.Module] | None = None,
                  user_fn: Callable | None = None):
    """Non-strict make_fx trace (2.11-2.14: same keyword names). Closed-over real tensors are
    allowed through as constants so that capture can name every one of them (invariant 1).
    With `fake_mode`, `inputs` are already fake (unbacked dims) and traced as they are.
    `modules` (argument name -> module) become the scope root make_fx records nn_module_stack
    against, so graph nodes know their module path ("m.0"): make_fx looks for the root on
    `fn._orig_mod` (2.11-2.14). `user_fn` (the user's function that `fn` calls): its lines
    are recorded in node.meta["stack_trace"] too (_user_stack_traces)."""
    if modules:
        root = torch.nn.Module()
        for name, mod in modules.items():
            root.add_module(name, mod)
        fn._orig_mod = root  # type: ignore[attr-defined]
    tracer = _make_fx(
        fn,
        decomposition_table=_explicit_table(decompositions),
        tracing_mode="fake" if fake_mode is None else "real",
        _allow_non_fake_inputs=True,
        record_module_stack=True,
        record_stack_traces=True,
    )
    with _user_stack_traces(user_fn or fn), stack_lines_read_when_kept():
        if fake_mode is None:
            return tracer(*inputs)
        with fake_mode:
            return tracer(*inputs)


@contextlib.contextmanager
def _user_stack_traces(fn: Callable) -> Iterator[None]:
    """While tracing, fn's own frames count for node.meta["stack_trace"], so a node made on
    one of fn's lines (an .item(), a closed-over read) names it. make_fx keeps only frames
    named `forward` and the registered anchors (2.11-2.14: TracerBase._filter_traceback_frames
    and torch.fx.proxy._STACK_TRACE_ANCHORS, a private set of (filename, co_name)): fn's
    code is added if absent and removed after. A torch without the set: no change (the
    errors fall back to the graph node's name)."""
    import torch.fx.proxy as fx_proxy

    anchors = getattr(fx_proxy, "_STACK_TRACE_ANCHORS", None)
    code = getattr(fn, "__code__", None)
    key = (code.co_filename, code.co_name) if code is not None else None
    if not isinstance(anchors, set) or key is None or key in anchors:
        yield
        return
    anchors.add(key)
    try:
        yield
    finally:
        anchors.discard(key)


def _explicit_table(decompositions: dict | None) -> dict:
    """make_fx's decomposition_table, never None. 2.15 injects its own aten.detach ->
    aten.alias decomposition into a post-dispatch trace given no table at all (an explicit
    one, even empty, opts out), so every fn's .detach() became a dead aten.alias node that
    _drop_detach does not know and that no kernel computes; 2.11-2.14 treat None and {} the
    same."""
    return {} if decompositions is None else decompositions


@contextlib.contextmanager
def backward_op_origins() -> Iterator[None]:
    """While tracing: each op that autograd runs inside fn's .backward() / autograd.grad is
    tagged node.meta["seq_nr"] with the sequence number of the forward op it differentiates
    (forward ops carry their own), so the graph can tell which module a backward op belongs
    to. How AOTAutograd tags its joint graphs (2.11-2.14: fx.traceback.preserve_node_meta and
    _functorch's setup_stacktrace_preservation_hooks on the roots' grad_fns); the two entry
    points are wrapped only inside this context and restored after."""
    import torch.fx.traceback as fx_traceback
    from torch._functorch._aot_autograd.logging_utils import (
        setup_stacktrace_preservation_hooks,
    )

    backward, grad = torch.autograd.backward, torch.autograd.grad

    def hooked(roots: Any) -> None:
        ts = [roots] if isinstance(roots, torch.Tensor) else list(roots or ())
        fns = [t.grad_fn for t in ts if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        if fns:
            setup_stacktrace_preservation_hooks(fns)

    def tagged_backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        hooked(tensors)
        return backward(tensors, *args, **kwargs)

    def tagged_grad(outputs: Any, *args: Any, **kwargs: Any) -> Any:
        hooked(outputs)
        return grad(outputs, *args, **kwargs)

    torch.autograd.backward, torch.autograd.grad = tagged_backward, tagged_grad
    try:
        with fx_traceback.preserve_node_meta():
            yield
    finally:
        torch.autograd.backward, torch.autograd.grad = backward, grad


def fake_with_unbacked(tensors: Sequence[torch.Tensor],
                       dynamic: Sequence[dict[int, tuple[int | None, int | None]]],
                       assumptions: Sequence[str] = (), *, real: bool = False,
                       ) -> tuple[Any, list[Any], dict[str, tuple[int, int]]]:
    """Fake copies of `tensors` in one FakeTensorMode with a ShapeEnv, where the dims in
    `dynamic[i]` are unbacked symbolic sizes (invariant 3: a guard on one fails the trace),
    known to lie within their (min, max) bounds, and where every Python expression in
    `assumptions` (over the symbol names, e.g. "u0 <= 880801") is known to hold.
    With `real`, the fakes carry their real values (realdata.real_values: data guards).
    Returns (fake mode, fakes, {symbol name: (tensor index, dim)}).
    2.13/2.14: DimDynamic.UNBACKED; 2.11: DimDynamic.SIZE_LIKE_UNBACKED."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (
        DimDynamic,
        ShapeEnv,
        StatelessSymbolicContext,
    )

    unbacked = getattr(DimDynamic, "UNBACKED", None) or getattr(DimDynamic, "SIZE_LIKE_UNBACKED")
    from .realdata import real_values

    shape_env = ShapeEnv()
    with real_values() if real else contextlib.nullcontext():
        mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)
    fakes, symbols = [], {}
    with shape_env.ignore_fresh_unbacked_symbols():
        for i, (t, dyn) in enumerate(zip(tensors, dynamic)):
            ctx = StatelessSymbolicContext(
                dynamic_sizes=[unbacked if d in dyn else DimDynamic.STATIC
                               for d in range(t.dim())],
                constraint_sizes=[None] * t.dim())
            f = mode.from_tensor(t, symbolic_context=ctx)
            for d in dyn:
                symbols[str(f.shape[d])] = (i, d)
            fakes.append(f)
    sizes = {name: fakes[i].shape[d] for name, (i, d) in symbols.items()}
    with mode:
        for (i, d) in symbols.values():
            lo, hi = dynamic[i][d]
            if lo is not None:
                torch._check(fakes[i].shape[d] >= lo)
            if hi is not None:
                torch._check(fakes[i].shape[d] <= hi)
        for expr in assumptions:
            holds = eval(expr, {"__builtins__": {}}, dict(sizes))  # noqa: S307 - ours
            # 2.11's printer writes a size's truth as the bare size ("u0"): a SymInt
            torch._check(holds != 0 if isinstance(holds, (int, torch.SymInt)) else holds)
    return mode, fakes, symbols


def runtime_asserts(mode: Any) -> list[Any]:
    """The conditions the trace asserted on symbolic sizes (torch._check, broadcasting of two
    dynamic dims): ShapeEnv.deferred_runtime_asserts, symbol -> [RuntimeAssert(expr, ...)]
    (2.11-2.14), in the order recorded, each once."""
    env = getattr(mode, "shape_env", None)
    seen: dict[str, Any] = {}
    for entries in getattr(env, "deferred_runtime_asserts", {}).values():
        for ra in entries:
            seen.setdefault(str(ra.expr), ra.expr)
    return list(seen.values())


def may_stop_midway(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph checks something of its own while it runs, after earlier kernels
    did: an assert on values (aten._assert_scalar / _assert_async and their functional forms;
    not _assert_tensor_metadata, which the trace decided), or a size the data decides (an
    unbacked symbol, checked where it is computed: torch.fx.experimental.symbolic_shapes.
    free_unbacked_symbols, 2.11-2.15)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    for n in gm.graph.nodes:
        name = getattr(n.target, "__name__", str(n.target))
        if n.op == "call_function" and "assert" in name and "tensor_metadata" not in name:
            return True
        val = n.meta.get("val")
        if isinstance(val, (torch.Tensor, torch.SymInt, list, tuple)) and \
                free_unbacked_symbols(val):
            return True
    return False


def guard_condition(e: BaseException) -> Any:
    """The sympy condition a data-dependent guard error could not decide
    (GuardOnDataDependentSymNode.cond, 2.11-2.14), or None."""
    return getattr(e, "cond", None)


def lowering_guard_condition(e: BaseException) -> Any:
    """guard_condition of the error Inductor's lowering raised: InductorError keeps the
    LoweringException as inner_exception, which is raised `from None` in the handler of the
    guard error, so that one is its __context__ (2.13-2.15)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if guard_condition(e) is not None:
            return guard_condition(e)
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return None


def assume(fake_inputs: Sequence[Any], sizes: dict[str, Any], expr: str) -> None:
    """Make the ShapeEnv of `fake_inputs` know that `expr` (over the symbol names in `sizes`,
    symbol name -> its SymInt) holds, as fake_with_unbacked does with its assumptions."""
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode([t for t in fake_inputs if isinstance(t, torch.Tensor)])
    # the printer writes sympy's Max/Min as max/min (the driver's guard names): symbolic here
    fns = {"__builtins__": {}, "max": torch.sym_max, "min": torch.sym_min, "abs": abs}
    with mode:
        holds = eval(expr, fns, dict(sizes))  # noqa: S307 - ours
        torch._check(holds != 0 if isinstance(holds, (int, torch.SymInt)) else holds)


def condition_source(cond: Any, holds: bool = True) -> str:
    """A sympy condition (or its negation) as a Python expression over its symbol names:
    "u0 <= 880801", "(2048*u0) != 0" (no `not`: a symbolic bool has no Python truth value)."""
    import sympy
    from torch.utils._sympy.printers import PythonPrinter

    return PythonPrinter().doprint(cond if holds else sympy.Not(cond))


def condition_at(cond: Any, sizes: dict[str, int]) -> tuple[Any, bool] | None:
    """(condition, its truth) at the given symbol values; None if it names other symbols.
    A guard error can also ask for a size's value itself ("Could not extract specialized
    integer from u0", int(size)): that is the condition `u0 == <its value>`."""
    import sympy

    free = {s.name: s for s in cond.free_symbols}
    if not set(free) <= set(sizes):
        return None
    value = cond.xreplace({free[n]: sizes[n] for n in free})
    boolean = (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanFunction,
               sympy.logic.boolalg.BooleanAtom)  # not Boolean: a Symbol is one too
    if not isinstance(cond, boolean):
        return sympy.Eq(cond, value), True
    return cond, bool(value)


def reparametrize(module: torch.nn.Module, mapping: dict[str, torch.Tensor]):
    """Temporarily make `module` read its parameters/buffers from `mapping` (2.11-2.14)."""
    return torch.nn.utils.stateless._reparametrize_module(module, mapping, tie_weights=False,
                                                          strict=False)


def data_dependent_errors() -> tuple[type[BaseException], ...]:
    """Exceptions a fake/symbolic trace raises on data-dependent reads (.item(), nonzero)."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
    )
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return (GuardOnDataDependentSymNode, DataDependentOutputException,
            DynamicOutputShapeException)


def reads_into_numpy(e: BaseException) -> bool:
    """Whether `e` is what a fake trace raises where fn turns a tensor into a NumPy array
    (.numpy(), np.asarray(t); 2.11-2.15: RuntimeError ".numpy() is not supported for tensor
    subclasses.")."""
    return isinstance(e, RuntimeError) and ".numpy() is not supported" in str(e)


def has_effects(op: Any) -> bool:
    """True for ops registered as side-effecting (aten._print, effectful custom ops)."""
    from torch._higher_order_ops.effects import has_effects as _has_effects

    if not isinstance(op, torch._ops.OpOverload):
        return False
    return bool(_has_effects(op))  # 2.11-2.14: has_effects(op)


def autocast_enabled_devices() -> list[str]:
    return [d for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)]


def no_autocast() -> contextlib.ExitStack:
    """Disable ambient autocast on every device where it is on (the dry-run checker traces
    on after reporting it)."""
    stack = contextlib.ExitStack()
    for d in autocast_enabled_devices():
        stack.enter_context(torch.autocast(d, enabled=False))
    return stack


def ambient_trace() -> str | None:
    """What is tracing around this call, or None: a dispatch mode of a trace on the stack
    (FakeTensorMode, make_fx's proxy mode: 2.11-2.15, torch.utils._python_dispatch), or
    Dynamo compiling (torch.compiler.is_compiling)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    for mode in _get_current_dispatch_mode_stack():
        name = type(mode).__name__
        if name in ("FakeTensorMode", "ProxyTorchDispatchMode", "FunctionalTensorMode"):
            return name
    if torch.compiler.is_compiling():
        return "torch.compile (or another precompile) is tracing"
    return None


def is_nested(t: torch.Tensor) -> bool:
    """A nested tensor, strided or jagged (2.11-2.15: Tensor.is_nested)."""
    return bool(getattr(t, "is_nested", False))


# Note [fused inference fast paths]
#   In eval mode with no gradient to record, nn.TransformerEncoderLayer runs one fused op,
#   aten._transformer_encoder_layer_fwd (2.11-2.15), unless `torch.overrides.
#   has_torch_function(args)` says an argument overrides torch functions. That function also
#   answers True whenever any torch function mode is active, and make_fx always runs one of
#   its own (TorchFunctionMetadataMode, which only records which torch function made a node),
#   as does capture (_DecidedDraws). So a capture decomposed the layer into ~40 ops that
#   Inductor compiles, where eager and torch.compile (Dynamo reads the check on the real
#   arguments) run the fused op: 6.7x torch.compile's cold time on the benchmarks'
#   transformer inference. While capture traces, the module attribute is answered for the
#   arguments themselves whenever the only active modes are those two: the fast path is
#   taken exactly when eager takes it, and the trace holds the op eager runs. Callers that
#   imported the function by name (torch.nn.functional, the C++ checks) are unaffected; a
#   user's own mode, or an argument that overrides __torch_function__, still answers True.
#   Swapped as Note [answers for the tracing thread] says: only a tracing thread's answer
#   changes.
_REAL_HAS_TORCH_FUNCTION = torch.overrides.has_torch_function


def _has_torch_function_of_args(args: Any) -> bool:
    if not _REAL_HAS_TORCH_FUNCTION(args):
        return False
    if not _marked("fast_paths"):
        return True
    from torch.fx.experimental.proxy_tensor import TorchFunctionMetadataMode
    from torch.overrides import _get_current_function_mode_stack

    ours = (TorchFunctionMetadataMode, _DecidedDraws)
    if not all(type(m) in ours for m in _get_current_function_mode_stack()):
        return True
    off = torch._C._disabled_torch_function_impl
    return any(isinstance(a, torch.Tensor) and type(a) is not torch.Tensor
               and getattr(type(a), "__torch_function__", off) is not off for a in args)


def fused_fast_paths() -> contextlib.AbstractContextManager[None]:
    """While capture traces: torch.nn's fused inference fast paths are taken as in eager
    (Note [fused inference fast paths])."""
    return _answering_on_this_thread(torch.overrides, "has_torch_function",
                                     _has_torch_function_of_args, "fast_paths")


# Note [decided random draws]
#   LayerDrop, as transformers and fairseq write it, draws one uniform number and branches on
#   it in Python: `if torch.rand([]) < self.layerdrop: skip the layer`. A Python branch on a
#   tensor is data-dependent (invariant 3), and torch.compile only runs it by breaking the
#   graph. But a draw of torch.rand lies in [0, 1): against a bound outside that interval
#   the comparison has one answer for every draw (layerdrop = 0.0, the default of most
#   configs, never skips). So while capture traces, a comparison of a one-element
#   torch.rand draw with a Python number that decides it is answered with that Python bool.
#   The draw itself stays in the graph: the eager backend advances the generator exactly as
#   eager does; Inductor draws its random numbers from seeds of its own, as torch.compile
#   does. Any other comparison (layerdrop = 0.1) stays data-dependent and is refused.
# `draw < p` reaches a torch function mode as TensorBase.lt (2.13, 2.15), `torch.lt(draw, p)`
# as torch.lt; `p > draw` is draw.lt(p)
_UNIFORM_CMP = {getattr(owner, name): name for name in ("lt", "le", "gt", "ge")
                for owner in (torch.Tensor, torch)}
_UNIFORM_CMP.update({getattr(torch.Tensor, f"__{name}__"): name
                     for name in ("lt", "le", "gt", "ge")})


def _decide_uniform(op: str, bound: float) -> bool | None:
    """`u OP bound` for every u in [0, 1), or None where draws differ."""
    if op in ("lt", "le"):
        return True if bound >= 1 else False if (bound <= 0 if op == "lt" else bound < 0) \
            else None
    return False if bound >= 1 else True if (bound < 0 if op == "gt" else bound <= 0) else None


class _DecidedDraws(torch.overrides.TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.draws: dict[int, Any] = {}  # id -> weakref of a one-element torch.rand result

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        op = _UNIFORM_CMP.get(func)
        if op is not None and len(args) == 2 and isinstance(args[1], (int, float)) \
                and not isinstance(args[1], bool) and self._is_draw(args[0]):
            decided = _decide_uniform(op, float(args[1]))
            if decided is not None:
                return decided
        out = func(*args, **kwargs)
        if func is torch.rand and isinstance(out, torch.Tensor) and out.numel() == 1:
            import weakref

            self.draws[id(out)] = weakref.ref(out)
        return out

    def _is_draw(self, t: Any) -> bool:
        ref = self.draws.get(id(t)) if isinstance(t, torch.Tensor) else None
        return ref is not None and ref() is t


def decided_random_draws() -> contextlib.AbstractContextManager:
    """While capture traces: comparisons a torch.rand draw cannot change are answered
    (Note [decided random draws])."""
    return _DecidedDraws()


@contextlib.contextmanager
def preserved_rng_state() -> Iterator[None]:
    """Fake tracing of random ops advances the real generators (seen on 2.13): capture must
    leave the world as it found it, so restore them."""
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def storage_key(t: torch.Tensor) -> Any:
    """A key equal for tensors (fake ones too) that share storage."""
    from torch.multiprocessing.reductions import StorageWeakRef

    return StorageWeakRef(t.untyped_storage())


def functionalize(gm: torch.fx.GraphModule, fake_inputs: Sequence[Any], *,
                  batch_norm: bool = False, rewrites: dict | None = None,
                  ) -> torch.fx.GraphModule:
    """Re-trace `gm` functionally (what AOTAutograd does first): mutations become copy_ into
    placeholders at the end of the graph; views stay views. `batch_norm`: native_batch_norm,
    whose schema does not say that it writes the running statistics, runs as the op whose
    schema does, so those writes move to the end too (Note [BatchNorm's writes said before
    functionalizing]). `rewrites`: decompositions of functional ops applied in the same
    re-trace (conv_as_mm.plan_for)."""
    from torch._guards import detect_fake_mode

    if not rewrites and _nothing_to_functionalize(gm) and \
            not switched_off("PRECOMPILE_NB_FUNCTIONAL_COPY"):
        return _graph_copy(gm)  # Note [a functional graph is not traced again]
    fake_mode = detect_fake_mode(fake_inputs)
    with fake_mode:
        # inputs are already fake: trace with them as they are (keeps unbacked sizes)
        fn = torch.func.functionalize(writes_said(gm) if batch_norm else gm,
                                      remove="mutations")
        return _make_fx(fn, decomposition_table=_explicit_table(rewrites), tracing_mode="real",
                        _allow_non_fake_inputs=True)(*fake_inputs)


# Note [a functional graph is not traced again]
#   functionalize re-traces the captured graph so that each write into a tensor becomes a
#   copy_ at the end. A graph that writes nothing (no op whose schema says it writes, no
#   BatchNorm, whose schema does not say it writes its running statistics, only ATen ops)
#   comes out of that re-trace as it went in, so it is copied instead: the captured graph
#   stays untouched for what reads it later. The zoo's bert, llama and gpt2 training steps
#   write nothing: on the development machine their re-trace took 0.42, 0.35 and 0.36 s, the
#   copy 0.03-0.04 s (benchmarks/results/cpu_round15; the H200 rows of round 14 spent 0.8, 0.5
#   and 0.4 s there). A step with an in-place op or a BatchNorm is traced as before.
#   PRECOMPILE_NB_FUNCTIONAL_COPY=0 re-traces every graph (benchmarks/before_lowering.py).


def _nothing_to_functionalize(gm: torch.fx.GraphModule) -> bool:
    """Whether every node of `gm` is a placeholder, the output, an operator.getitem or an ATen
    op that writes nothing (Note [a functional graph is not traced again])."""
    return input_writes(gm, ("aten",), copies=False)[0] == set()


def input_writes(gm: torch.fx.GraphModule, namespaces: tuple[str, ...], *, copies: bool,
                 ) -> tuple[set[torch.fx.Node] | None, str]:
    """The inputs `gm` writes, where it is functional but for those writes: every node a
    placeholder, the output, an operator.getitem or an op of `namespaces` that writes
    nothing, no BatchNorm that writes its statistics unsaid, and, with `copies`, copy_ into
    an input that no later node reads; "" beside them. Where it is not: None, and the first
    node that makes it so, in words (the functional copy's check and Note [one trace between
    capture and Inductor] read it; the report shows the words)."""
    import operator

    written: set[torch.fx.Node] = set()
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        again = written.intersection(n.all_input_nodes)
        if again:
            return None, f"{n.name} reads input {next(iter(again)).name} after a write into it"
        if n.op == "placeholder" or (n.op == "call_function" and n.target is operator.getitem):
            continue
        t = n.target
        if n.op != "call_function":
            return None, f"{n.name} is a {n.op} node, not an op call"
        if not isinstance(t, torch._ops.OpOverload) or t.namespace not in namespaces:
            return None, f"{n.name} runs {getattr(t, '__name__', t)}, not an ATen op"
        if batch_norm_writes_unsaid(t):
            return None, (f"{n.name} ({t.__name__}) writes BatchNorm's running statistics "
                          "without its schema saying so")
        if t._schema.is_mutable:
            if not (copies and t is torch.ops.aten.copy_.default and
                    n.args[0].op == "placeholder"):
                return None, f"{n.name} ({t.__name__}) writes in place"
            written.add(n.args[0])
    return written, ""


def _graph_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A new GraphModule over a node-by-node copy of gm's graph (each node's meta copied, its
    values shared), so that changes to the copy leave gm as it is."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in gm.graph.nodes:
        env[n] = graph.node_copy(n, lambda a: env[a])
    return torch.fx.GraphModule(gm, graph)


def mark_unbacked(t: torch.Tensor, dim: int) -> None:
    torch._dynamo.decorators.mark_unbacked(t, dim)


def mark_dynamic(t: torch.Tensor, dim: int, lo: int | None, hi: int | None) -> None:
    """torch._dynamo.mark_dynamic with its min/max (2.11-2.14)."""
    torch._dynamo.mark_dynamic(t, dim, min=lo, max=hi)


@dataclass(frozen=True)
class DimMarks:
    """What torch._dynamo's dimension marks on a tensor ask for (2.11-2.14 attribute names).
    unbacked: mark_unbacked dims (strict ones too) -> (min, max); shape_ids: dim -> shared id;
    specialize_on: dims with mark_unbacked(specialize_on=[...]); dynamic: mark_dynamic /
    maybe_mark_dynamic dims; hint_overrides: dims with hint_override."""

    unbacked: dict[int, tuple[int | None, int | None]]
    shape_ids: dict[int, str]
    specialize_on: tuple[int, ...]
    dynamic: dict[int, tuple[int | None, int | None]]  # mark_dynamic dims -> (min, max)


def dim_marks(t: torch.Tensor) -> DimMarks:
    """Every dimension mark on `t`. mark_unbacked(strict=True) records its dim in
    _dynamo_strict_unbacked_indices only; mark_unbacked(min=, max=) in
    _dynamo_unbacked_bounds (2.13+); shape_id in _dynamo_shape_ids (2.13+); mark_dynamic in
    _dynamo_dynamic_indices, maybe_mark_dynamic in _dynamo_weak_dynamic_indices."""
    def ints(name: str) -> set[int]:
        v = getattr(t, name, None)
        return {int(d) for d in v} if isinstance(v, (set, list, tuple, frozenset)) else set()

    def table(name: str) -> dict:
        v = getattr(t, name, None)
        return v if isinstance(v, dict) else {}

    bounds = table("_dynamo_unbacked_bounds")
    unbacked = ints("_dynamo_unbacked_indices") | ints("_dynamo_strict_unbacked_indices")
    special = table("_specialize_on")
    return DimMarks(
        unbacked={d: tuple(bounds.get(d, (None, None))) for d in sorted(unbacked)},
        shape_ids={int(d): str(s) for d, s in table("_dynamo_shape_ids").items()},
        specialize_on=tuple(sorted(int(d) for d, v in special.items() if v)),
        dynamic=_dynamic_ranges(t, ints("_dynamo_dynamic_indices")
                                | ints("_dynamo_weak_dynamic_indices")))


def _dynamic_ranges(t: torch.Tensor, dims: set[int]) -> dict[int, tuple[int | None, int | None]]:
    """mark_dynamic's min/max per dim: _DimRange(dim, min, max) entries of
    _dynamo_dynamic_range (2.11-2.14)."""
    out: dict[int, tuple[int | None, int | None]] = {d: (None, None) for d in sorted(dims)}
    for r in getattr(t, "_dynamo_dynamic_range", None) or ():
        d = int(getattr(r, "dim", -1))
        if d in out:
            out[d] = (getattr(r, "min", None), getattr(r, "max", None))
    return out


# DTensor (torch.distributed.tensor, public since 2.5; `_local_tensor` and `_spec` are the
# attributes DTensor's own __tensor_flatten__ reads, 2.11-2.14)
def is_dtensor(t: Any) -> bool:
    import sys
    mod = sys.modules.get("torch.distributed.tensor")  # never imported for a plain model
    return mod is not None and isinstance(t, mod.DTensor)


def dtensor_local(t: torch.Tensor) -> torch.Tensor:
    """The local shard of a DTensor, as the graph takes it."""
    return t._local_tensor


def dtensor_mesh(t: torch.Tensor) -> Any:
    return t._spec.mesh


def is_carried_placement(p: Any) -> bool:
    """Shard, Replicate, Partial and _StridedShard (FSDP2's shard of a tensor-parallel
    parameter, 2.11-2.15) are what an artifact carries (convention.placement_text); not a
    norm Partial."""
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    return type(p) in (Shard, Replicate, Partial, _StridedShard)


def mesh_groups(mesh: Any) -> list[str]:
    """The process group name of each mesh dim (what functional collectives name)."""
    return [mesh.get_group(d).group_name for d in range(mesh.ndim)]


def dtensor_from_local(local: torch.Tensor, mesh: Any, placements: Sequence[Any],
                       shape: Sequence[int], stride: Sequence[int]) -> torch.Tensor:
    from torch.distributed.tensor import DTensor
    return DTensor.from_local(local, mesh, placements, run_check=False,
                              shape=torch.Size(shape), stride=tuple(stride))


def is_collective(target: Any) -> bool:
    """An op of torch's functional collectives (_c10d_functional: all_reduce, all_gather_into_
    tensor, reduce_scatter_tensor, wait_tensor, ...; 2.11-2.14)."""
    ns = getattr(target, "namespace", None)
    return ns in ("_c10d_functional", "c10d_functional", "_dtensor")


def rename_node(node: torch.fx.Node, name: str) -> None:
    """Give a graph node a readable name, kept unique by the graph's namespace (2.11-2.14:
    Node._rename)."""
    node._rename(name)


def is_aten_op(name: str) -> bool:
    """True if torch.ops.aten has an op packet of that name."""
    return bool(name) and hasattr(torch.ops.aten, name)


def is_tensor_subclass(t: torch.Tensor) -> bool:
    """A traceable wrapper subclass such as DTensor (2.11-2.14: torch.utils._python_dispatch)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return is_traceable_wrapper_subclass(t)


@contextlib.contextmanager
def optimizer_step_tracing(annotation: dict[str, Any]) -> Iterator[None]:
    """While an optimizer's step() is traced (Note [optimizer at the boundary] in
    runtime/driver.py): torch.compiler.is_compiling() answers True on this thread, what
    torch.optim's own code reads to keep the step count a tensor (`_get_value`) and to skip
    its eager-only device checks and grouping, as under torch.compile (Note [tracing as a
    compiler]); and every node recorded is annotated (node.meta["custom"], fx.traceback.
    annotate under preserve_node_meta) so the graph knows it belongs to the optimizer."""
    import torch.fx.traceback as fx_traceback

    with _compiler_answers(("is_compiling",)), fx_traceback.annotate(annotation):
        yield


def optimizer_scalar_dtype() -> torch.dtype:
    """The dtype of an Adam-family "step" count on the CPU, as its first step creates it
    (torch.optim.optimizer._get_scalar_dtype, 2.11-2.14)."""
    from torch.optim.optimizer import _get_scalar_dtype

    return _get_scalar_dtype()
