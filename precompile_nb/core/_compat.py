"""The one door to torch internals.

Every private torch API precompile_nb uses, and every torch-version branch, lives here with a
comment naming the versions it was checked on (2.11 on the GPU machine, 2.13 in CI, 2.14).
Nothing here patches torch globally; what must be patched is patched inside a context manager
and restored.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx as _make_fx

# One lock for everything that touches process-global compiler state: the inductor cache dir
# environment, module reparametrization of shared example models, the RNG save/restore. torch
# 2.14.1's own precompile is not thread-safe; we serialize capture+lower and the cache
# unpacking in load.
GLOBAL_LOCK = threading.RLock()

def torch_build_id() -> str:
    """Identifies the torch build a cache was made with: version + git revision + CUDA."""
    git = getattr(torch.version, "git_version", "") or ""
    return f"{torch.__version__}+{git[:12]}+cuda={torch.version.cuda}"


# ---------------------------------------------------------------------------------------------
# capture


def make_fx_trace(fn: Callable, inputs: Sequence[Any], *, decompositions, fake_mode=None,
                  modules: dict[str, torch.nn.Module] | None = None):
    """Non-strict make_fx trace (2.11-2.14: same keyword names). Closed-over real tensors are
    allowed through as constants so that capture can name every one of them (invariant 1).
    With `fake_mode`, `inputs` are already fake (unbacked dims) and traced as they are.
    `modules` (argument name -> module) become the scope root make_fx records nn_module_stack
    against, so graph nodes know their module path ("m.0"): make_fx looks for the root on
    `fn._orig_mod` (2.11-2.14)."""
    if modules:
        root = torch.nn.Module()
        for name, mod in modules.items():
            root.add_module(name, mod)
        fn._orig_mod = root  # type: ignore[attr-defined]
    tracer = _make_fx(
        fn,
        decomposition_table=decompositions,
        tracing_mode="fake" if fake_mode is None else "real",
        _allow_non_fake_inputs=True,
        record_module_stack=True,
        record_stack_traces=True,
    )
    if fake_mode is None:
        return tracer(*inputs)
    with fake_mode:
        return tracer(*inputs)


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
        setup_stacktrace_preservation_hooks)

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
                       assumptions: Sequence[str] = (),
                       ) -> tuple[Any, list[Any], dict[str, tuple[int, int]]]:
    """Fake copies of `tensors` in one FakeTensorMode with a ShapeEnv, where the dims in
    `dynamic[i]` are unbacked symbolic sizes (invariant 3: a guard on one fails the trace),
    known to lie within their (min, max) bounds, and where every Python expression in
    `assumptions` (over the symbol names, e.g. "u0 <= 880801") is known to hold.
    Returns (fake mode, fakes, {symbol name: (tensor index, dim)}).
    2.13/2.14: DimDynamic.UNBACKED; 2.11: DimDynamic.SIZE_LIKE_UNBACKED."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                       StatelessSymbolicContext)

    unbacked = getattr(DimDynamic, "UNBACKED", None) or getattr(DimDynamic, "SIZE_LIKE_UNBACKED")
    shape_env = ShapeEnv()
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


def guard_condition(e: BaseException) -> Any:
    """The sympy condition a data-dependent guard error could not decide
    (GuardOnDataDependentSymNode.cond, 2.11-2.14), or None."""
    return getattr(e, "cond", None)


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
    from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                               DynamicOutputShapeException)
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return (GuardOnDataDependentSymNode, DataDependentOutputException,
            DynamicOutputShapeException)


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


def functionalize(gm: torch.fx.GraphModule, fake_inputs: Sequence[Any]
                  ) -> torch.fx.GraphModule:
    """Re-trace `gm` functionally (what AOTAutograd does first): mutations become copy_ into
    placeholders at the end of the graph; views stay views."""
    fn = torch.func.functionalize(gm, remove="mutations")
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(fake_inputs)
    with fake_mode:
        # inputs are already fake: trace with them as they are (keeps unbacked sizes)
        return _make_fx(fn, tracing_mode="real", _allow_non_fake_inputs=True)(*fake_inputs)


# ---------------------------------------------------------------------------------------------
# lowering (inductor)


@contextlib.contextmanager
def private_compile_cache() -> Iterator[str]:
    """A fresh, private TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR for one compile, so that
    exactly the binaries of this artifact land in it and can be packed into its cache
    (2.11-2.14: torch._inductor.utils.fresh_cache). Yields the directory; removed after."""
    import tempfile

    from torch._inductor.utils import fresh_cache

    parent = tempfile.mkdtemp(prefix="precompile_nb_")
    try:
        with fresh_cache(dir=parent, delete=True):
            yield os.environ["TORCHINDUCTOR_CACHE_DIR"]
    finally:
        import shutil

        shutil.rmtree(parent, ignore_errors=True)


def inductor_compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                     dynamic: bool = False) -> tuple[str, torch.fx.GraphModule, Callable]:
    """AOTAutograd + Inductor on a functional graph. Returns (the generated module's source,
    the post-AOTAutograd graph Inductor lowered, the compiled callable).
    With dynamic sizes, Inductor's layout optimization is off (config.layout_optimization,
    2.11-2.14): it picks convolution layouts from the sizes, and with a symbolic batch it
    assumed a layout the convolution then did not return (a CNN's every call failed)."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    seen: dict[str, Any] = {}

    def inner(inner_gm, inner_inputs, **kwargs):
        seen["gm"] = inner_gm
        compiled = compile_fx_inner(inner_gm, inner_inputs, **kwargs)
        seen["source"] = compiled.source_code  # 2.11-2.14: CompiledFxGraph.source_code
        return compiled

    layout = {"layout_optimization": False} if dynamic else {}
    with same_kernel_keys(), inductor_config.patch(layout):
        compiled = compile_fx(gm, list(example_inputs), inner_compile=inner)
    if "source" not in seen:
        raise RuntimeError("precompile_nb internal error: Inductor produced no module source")
    return seen["source"], seen["gm"], compiled


@contextlib.contextmanager
def recording_triton_launchers() -> Iterator[None]:
    """While Inductor compiles for CUDA: tag each Triton launcher it builds with the compile
    result it came from (2.11-2.14: CompileResult._gen_launcher_code(scope, def_args,
    runner_args) makes every kernel's launcher, static or not), so that
    triton_launch_records can read how the chosen binary of each kernel is launched."""
    try:
        from torch._inductor.runtime import triton_heuristics as th

        original = th.CompileResult._gen_launcher_code
    except (ImportError, AttributeError):  # another Inductor: no records, load compiles
        yield
        return

    def gen_launcher_code(self: Any, scope: Any, def_args: Any, runner_args: Any) -> Any:
        launcher = original(self, scope, def_args, runner_args)
        launcher._pc_compile_result = self
        return launcher

    th.CompileResult._gen_launcher_code = gen_launcher_code
    try:
        yield
    finally:
        th.CompileResult._gen_launcher_code = original


def triton_launch_records(kernel_vars: Sequence[str]) -> dict[str, dict[str, Any]]:
    """How to launch each Triton kernel of the module just compiled (and autotuned) without
    Triton or Inductor: {variable: record} for the variables `kernel_vars` of Inductor's module
    (`<var> = async_compile.triton(...)`). A record is what torch's static CUDA launcher needs
    for the one binary the kernel runs, {"function", "hash", "num_warps", "shared",
    "arg_types", "scratch", "def_args", "call_args", "grid", "device", "cc"}, or {"why": ...}
    when the warm path cannot launch it (more than one configuration left, TMA, ...).
    Call inside recording_triton_launchers' compile, before the compile's caches are gone."""
    if not kernel_vars:
        return {}
    try:
        from torch._inductor.codecache import PyCodeCache
        from torch._inductor.runtime import triton_heuristics as th

        modules = [*getattr(PyCodeCache, "modules", ()),
                   *getattr(PyCodeCache, "modules_no_attr", {}).values()]
        module = next((m for m in modules
                       if all(isinstance(getattr(m, v, None), th.CachingAutotuner)
                              for v in kernel_vars)), None)
    except Exception as e:  # noqa: BLE001 - a record is optional: load then says why
        return {v: {"why": f"recording failed ({type(e).__name__}: {str(e)[:120]})"}
                for v in kernel_vars}
    if module is None:
        return {v: {"why": "Inductor's module was not found after the compile"}
                for v in kernel_vars}
    return {v: _launch_record(getattr(module, v), th) for v in kernel_vars}


def _launch_record(autotuner: Any, th: Any) -> dict[str, Any]:
    """One kernel's launch record (triton_launch_records). Mirrors, per version 2.11-2.14,
    StaticTritonCompileResult.make_launcher: the same def args, the same call args (every
    constexpr dropped: the cubin has them baked in), the same grid expressions."""
    if len(autotuner.launchers) != 1:
        return {"why": f"{len(autotuner.launchers)} configurations are left: it is autotuned at "
                       "its first call (precompile autotunes only static-size graphs without "
                       "collectives)"}
    launcher = autotuner.launchers[0]
    result = getattr(launcher, "_pc_compile_result", None)
    if result is None:
        return {"why": "its launcher was not built by this compile"}
    kernel = result.kernel
    try:
        if not type(kernel).__name__.startswith("StaticallyLaunched"):
            # Inductor launches this one through Triton (e.g. its cubin file name was
            # shortened by Triton, so Inductor did not find it): the binary is the same
            meta = kernel.metadata
            if getattr(meta, "launch_pdl", False) or getattr(meta, "launch_cooperative_grid",
                                                              False):
                return {"why": "it needs launch attributes (PDL or a cooperative grid)"}
            kernel._cubin_path = ""  # read by the constructor; we load the cache's copy
            kernel = _static_cuda_kernel_class()(kernel)
        _, def_args, none_args = result._get_arg_lists(kernel.arg_names,
                                                       kernel.declared_constexprs)
        call_args = [a for i, a in enumerate(kernel.arg_names)
                     if i not in kernel.full_constexprs and a not in none_args]
        grid = th.GridExpr.from_meta(result.inductor_meta, result.config)
        scratch = int(bool(kernel.has_global_scratch)) + int(bool(kernel.has_profile_scratch))
        import inspect

        signature = list(inspect.signature(launcher).parameters)
        if signature != [*def_args, "stream"]:
            return {"why": f"its launcher takes {signature}, not {[*def_args, 'stream']}"}
        props = autotuner.device_props
        return {"function": str(kernel.name), "hash": str(kernel.hash),
                "num_warps": int(kernel.num_warps), "shared": int(kernel.shared),
                "arg_types": str(kernel.arg_tys) + "O" * scratch, "scratch": scratch,
                "def_args": [str(a) for a in def_args], "call_args": [str(a) for a in call_args],
                "grid": {"prefix": [str(p) for p in grid.prefix], "x": str(grid.x_grid),
                         "y": str(grid.y_grid), "z": str(grid.z_grid)},
                "device": int(result.compile_meta.get("device") or 0),
                "cc": int(props.cc)}  # DeviceProperties.cc: 90 for sm_90, as cuda_capability
    except Exception as e:  # noqa: BLE001 - NotImplementedError from the static launcher's
        # checks, or another Inductor's internals: no record, and load says why
        return {"why": f"torch's static launcher cannot launch it ({type(e).__name__}: "
                       f"{str(e)[:160]})"}


def _static_cuda_kernel_class() -> Any:
    try:  # 2.11-2.13 name
        from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel
    except ImportError:
        from torch._inductor.runtime.static_cuda_launcher import (  # type: ignore[no-redef]
            StaticallyLaunchedCudaKernel)
    return StaticallyLaunchedCudaKernel


def autotune_now(compiled: Callable, example_inputs: Sequence[Any]) -> None:
    """Run a freshly compiled CUDA graph once, inside its private compile cache, so that
    Inductor's autotuner benchmarks every multi-config Triton kernel now and writes its
    choice (`<kernel>.best_config`, 2.11-2.14: CachingAutotuner with autotune_local_cache)
    next to the kernel in the cache the artifact ships: neither load nor the first call
    benchmarks anything. Inputs are stand-ins with the example's sizes, strides, dtypes and
    devices (random floats, zero integers: valid indices); the timings depend on sizes."""
    args = []
    for t in example_inputs:
        real = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                   device=t.device)
        args.append(real.normal_() if real.is_floating_point() else real.zero_())
    with torch.no_grad():
        compiled(*args)
    torch.cuda.synchronize()


def strip_inductor_main(source: str) -> str:
    """Drop the benchmark harness Inductor appends to its module (get_args / __main__); it
    imports test utilities and is never called by the artifact (2.11-2.14 layout). Then make
    what is left reproducible (reproducible_inductor_source)."""
    for marker in ("\n\ndef get_args():", "\n\ndef benchmark_compiled_module("):
        cut = source.find(marker)
        if cut != -1:
            source = source[:cut].rstrip() + "\n"
            break
    return reproducible_inductor_source(source)


# Comments Inductor writes into its module that differ between two compiles of the same
# graph by the same torch on the same machine (2.11-2.14: torch/_inductor/codegen/wrapper.py,
# triton.py, select_algorithm.py, cutlass/, rocm/, cutedsl/, nv_universal_gemm/):
#   # AOT ID: ['3_inference']          AOTAutograd's process-wide graph counter
#                                       (PythonWrapperCodegen.write_header): how many graphs
#                                       this process compiled before
#   # kernel path: /tmp/.../ab/cab.py  where the kernel's source was written in the compile's
#                                       cache dir: for precompile a private temp dir, deleted
#                                       (define_kernel of Triton / template / CUDA kernels)
#   # Original path: /x/y.py:12        the source file of a user-defined Triton kernel; a
#                                       notebook cell's is /tmp/ipykernel_<pid>/<hash>.py
# Only these comment tokens are rewritten: every executed byte (kernel sources, whose hashes
# key the compiled binaries, kernel names, calls) stays as Inductor wrote it. Checked on 2.13
# (CPU) and 2.11+cu130 (H200): with these rewritten, two compiles give the same module, in one
# process or two, and a fresh process's warm load still compiles nothing.
_AOT_ID = re.compile(r"(#\s*AOT ID:\s*)(.*)")
_AOT_COUNTER = re.compile(r"(['\"])\d+_")
_BUILD_PATH = re.compile(r"(#\s*kernel path:\s*)(\S.*?)\s*\Z")
_SOURCE_PATH = re.compile(r"(#\s*Original path:\s*)(\S.*?)(:\d+)?\s*\Z")
_NORMALISED_MARKERS = ("AOT ID:", "kernel path:", "Original path:")


def reproducible_comment(comment: str) -> str:
    """One comment of Inductor's module with its build-specific parts neutralised (see the
    table above): `# kernel path: <cache>/<file name>`, `# Original path: <source>/<file
    name>:<line>`, `# AOT ID: ['inference']` (no counter); any other comment as it is."""
    m = _BUILD_PATH.match(comment)
    if m:
        return f"{m.group(1)}<cache>/{_basename(m.group(2))}"
    m = _SOURCE_PATH.match(comment)
    if m:
        return f"{m.group(1)}<source>/{_basename(m.group(2))}{m.group(3) or ''}"
    m = _AOT_ID.match(comment)
    if m:
        return m.group(1) + _AOT_COUNTER.sub(r"\1", m.group(2))
    return comment


def _basename(path: str) -> str:
    # the build machine's separator, whichever it was (Inductor normalises to '/' on Windows)
    return re.split(r"[\\/]", path)[-1]


def reproducible_inductor_source(source: str) -> str:
    """`source` with the comments that name the build machine's temporary compile dirs or
    count this process's earlier compiles rewritten (reproducible_comment), so that the same
    function, inputs and torch build give a byte-identical python_code, and a shipped
    artifact names no private path of the machine that built it. Only real comment tokens
    change (found with tokenize: a kernel source inside a string literal that happens to hold
    such a line is executed code and stays as it is); a source tokenize cannot read is
    returned as it is."""
    if not any(marker in source for marker in _NORMALISED_MARKERS):
        return source
    import io
    import tokenize

    lines = io.StringIO(source).readlines()  # the same line split tokenize's rows count
    edits: list[tuple[int, int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                new = reproducible_comment(tok.string)
                if new != tok.string:
                    (row, start), (_, end) = tok.start, tok.end
                    edits.append((row - 1, start, end, new))
    except (tokenize.TokenError, SyntaxError):
        return source
    for row, start, end, new in edits:
        line = lines[row]
        lines[row] = line[:start] + new + line[end:]
    return "".join(lines)


# Inductor's CPU ISA probes (2.11-2.14: torch._inductor.cpu_vec_isa): before it compiles or
# looks up a C++ kernel, a process builds tiny probe libraries into the inductor cache dir and
# remembers the answers in functools caches for the rest of its life. A fresh process loading
# an artifact runs them too; unless the probes' binaries ship with the cache it runs the C++
# compiler. A process only builds them once, so only its first compile leaves them in a
# private compile dir.

def isa_probe_sources() -> frozenset[bytes]:
    """The C++ sources of every ISA probe (class attributes named *_code on the VecISA
    classes), to tell probe files from kernel files in a compile dir."""
    from torch._inductor import cpu_vec_isa as m

    out = set()
    for obj in vars(m).values():
        if isinstance(obj, type) and issubclass(obj, m.VecISA):
            for k in dir(obj):
                v = getattr(obj, k, None)
                if k.endswith("_code") and isinstance(v, str):
                    out.add(v.encode())
    return frozenset(out)


def run_isa_probes_fresh(cache_dir: str) -> None:
    """Run the ISA probes as a fresh process does, into `cache_dir`. In this process the
    answers are cached and re-probing is not the same (the probes' flags depend on earlier
    answers, so the binaries' names differ): a short-lived child process does it."""
    import subprocess
    import sys

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    subprocess.run([sys.executable, "-c",
                    "from torch._inductor import cpu_vec_isa; cpu_vec_isa.pick_vec_isa()"],
                   env=env, check=False, timeout=300, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def inductor_cache_dir() -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return cache_dir()


def triton_cache_dir(device_index: int) -> str:
    """torch._inductor.runtime.cache_dir_utils.triton_cache_dir without importing
    torch._inductor (2.11-2.14): TRITON_CACHE_DIR, else <inductor cache dir>/triton/<device>."""
    directory = os.getenv("TRITON_CACHE_DIR")
    if directory is not None:
        return directory
    return os.path.join(light_inductor_cache_dir(), "triton", str(device_index))


def relocate_cache_file(root: str, rel: str, data: bytes, dest: str) -> bytes:
    """The bytes to install for one cache file at `dest`. Triton (3.x) keeps, beside each
    compiled kernel, a group file `__grp__<name>.json` that lists the kernel's files by
    ABSOLUTE path, and treats a listed file that is not there as a cache miss: installed
    as-is, every group would point into the (deleted) private compile dir, and every kernel
    would compile again. Point them at the files' new home."""
    name = rel.rsplit("/", 1)[-1]
    if root != "triton" or not (name.startswith("__grp__") and name.endswith(".json")):
        return data
    import json

    try:
        group = json.loads(data)
        children = group["child_paths"]
        here = os.path.dirname(dest)
        group["child_paths"] = {c: os.path.join(here, os.path.basename(str(p)))
                                for c, p in children.items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return data  # not a group file we know: as it was (at worst Triton recompiles)
    return json.dumps(group).encode()


# Files of a private compile dir that are not kernel binaries: caches of *our* graph at
# the FX/AOT level (we never take those paths at load) and lock files.
SKIP_CACHE_PARTS = ("fxgraph", "aotautograd", "locks", "pcache", "autotune_local_cache")


def mark_unbacked(t: torch.Tensor, dim: int) -> None:
    torch._dynamo.decorators.mark_unbacked(t, dim)


def mark_dynamic(t: torch.Tensor, dim: int, lo: int | None, hi: int | None) -> None:
    """torch._dynamo.mark_dynamic with its min/max (2.11-2.14)."""
    torch._dynamo.mark_dynamic(t, dim, min=lo, max=hi)


def treespec_children(spec: Any) -> list[Any]:
    """A TreeSpec's child specs: `children()` where it exists (2.13, 2.14: `children_specs`
    is deprecated there), else `children_specs` (2.11)."""
    children = getattr(spec, "children", None)
    if callable(children):
        return list(children())
    return list(spec.children_specs)


def namedtuple_class(spec: Any) -> type | None:
    """The namedtuple class of a TreeSpec node, or None: pytree keeps namedtuples under the
    type `collections.namedtuple` with the class as context (2.11-2.14), or under the class
    itself in older layouts."""
    from torch.utils._pytree import is_namedtuple_class

    for cand in (spec.context, spec.type):
        if isinstance(cand, type) and is_namedtuple_class(cand):
            return cand
    return None


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


@contextlib.contextmanager
def same_kernel_keys() -> Iterator[None]:
    """Compile (precompile) and look up (load) kernels under the same settings, so that a
    kernel's cache key is the same in both processes and a loading process finds the
    binaries the cache installed instead of compiling them again:

    - C++: Inductor's precompiled header (2.11-2.14: config.cpp_cache_precompile_headers)
      lives in a per-user dir outside TORCHINDUCTOR_CACHE_DIR, every fresh process runs the
      C++ preprocessor over it before it looks for a cached kernel, and the flag enters every
      kernel's key: off for both.
    - Triton: its key holds the ptxas version, which Triton caches per process
      (triton.backends.nvidia.compiler.get_ptxas_version). Inductor asks for it while it
      generates code, *before* it points Triton at torch's own ptxas (TRITON_PTXAS_PATH, set
      by _set_triton_ptxas_path when the first kernel compiles), so a compiling process keys
      its kernels with Triton's bundled ptxas and a loading process with torch's: every
      kernel compiled again. Point Triton at torch's ptxas first and forget the cached
      version, in both."""
    _settle_triton_ptxas()
    from torch._inductor import config

    if hasattr(config, "cpp_cache_precompile_headers"):
        with config.patch(cpp_cache_precompile_headers=False):
            yield
    else:
        yield


@contextlib.contextmanager
def running_artifact(cached: bool) -> Iterator[None]:
    """The settings a loaded artifact's module runs under (load execs it inside this):
    kernel keys as at precompile, and, when the cache put every binary in place, kernel
    loads and ISA probes kept in this process."""
    with same_kernel_keys(), in_process_kernel_loads(cached), isa_probes_in_process(cached):
        yield


def in_process_kernel_loads(cached: bool) -> contextlib.AbstractContextManager:
    """While a loaded artifact's module runs: when the cache put every binary in place,
    loading a kernel is reading a file, so keep it in this process. Otherwise Inductor starts
    its pool of compile worker processes (2.11-2.14: config.compile_threads > 1) at the first
    kernel, seconds of start-up that buy nothing here."""
    from torch._inductor import config

    return config.patch(compile_threads=1) if cached else contextlib.nullcontext()


@contextlib.contextmanager
def isa_probes_in_process(cached: bool) -> Iterator[None]:
    """While a loaded artifact's module runs with its cache in place: Inductor's CPU ISA
    probe checks that each probe library loads by starting a Python process per ISA that
    dlopens it (2.11-2.13: VecISA._probe_load; ~10 processes, 2-3 s on a small machine).
    The libraries come from the cache, built by the same torch, and libtorch is already
    loaded here, so dlopen them in this process instead. torch >= 2.14 skips the child when
    a `.load_ok` marker sits beside the library (the cache ships it); a torch without
    _probe_load is left as it is. A different answer than at precompile could only change
    the kernels' cache key, i.e. make them compile, never run the wrong code."""
    from torch._inductor import cpu_vec_isa as m

    original = m.VecISA.__dict__.get("_probe_load")
    if not cached or original is None:
        yield
        return

    def _probe_load(self, output_path: str) -> bool:
        import ctypes

        try:
            ctypes.CDLL(output_path)
        except OSError:
            return False
        return True

    m.VecISA._probe_load = _probe_load
    try:
        yield
    finally:
        m.VecISA._probe_load = original


def _settle_triton_ptxas() -> None:
    if torch.version.cuda is None or not torch.cuda.is_available():
        return
    try:
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path
        from triton.backends.nvidia.compiler import get_ptxas_version
    except ImportError:  # no triton, or a layout without these (then nothing to settle)
        return
    _set_triton_ptxas_path()
    if hasattr(get_ptxas_version, "cache_clear"):
        get_ptxas_version.cache_clear()


# ---------------------------------------------------------------------------------------------
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
    """Shard, Replicate and Partial are what an artifact carries (convention.placement_text);
    not _StridedShard (FSDP2 + TP) or a norm Partial."""
    from torch.distributed.tensor import Partial, Replicate, Shard
    return type(p) in (Shard, Replicate, Partial)


def mesh_groups(mesh: Any) -> list[str]:
    """The process group name of each mesh dim (what functional collectives name)."""
    return [mesh.get_group(d).group_name for d in range(mesh.ndim)]


def dtensor_from_local(local: torch.Tensor, mesh: Any, placements: Sequence[Any],
                       shape: Sequence[int], stride: Sequence[int]) -> torch.Tensor:
    from torch.distributed.tensor import DTensor
    return DTensor.from_local(local, mesh, placements, run_check=False,
                              shape=torch.Size(shape), stride=tuple(stride))


def data_parallel_wrapper(m: torch.nn.Module) -> tuple[str, str] | None:
    """(path, kind) of the first submodule that a data-parallel wrapper drives from its own
    hooks: FSDP2's fully_shard (FSDPModule), FSDP1, DDP (2.11-2.14 classes); else None."""
    import sys
    kinds = []
    if "torch.distributed.fsdp" in sys.modules:
        fsdp = sys.modules["torch.distributed.fsdp"]
        kinds += [(getattr(fsdp, "FSDPModule", None), "FSDP2 (fully_shard)"),
                  (getattr(fsdp, "FullyShardedDataParallel", None), "FSDP")]
    if "torch.nn.parallel" in sys.modules:
        kinds.append((torch.nn.parallel.DistributedDataParallel, "DistributedDataParallel"))
    kinds = [(cls, name) for cls, name in kinds if isinstance(cls, type)]
    for path, sub in m.named_modules():
        for cls, name in kinds:
            if isinstance(sub, cls):
                return path, name
    return None


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



# ---------------------------------------------------------------------------------------------
# the warm load: a cached C++ artifact runs without the compiler stack (Note [warm load] in
# warm.py). Nothing below imports torch._inductor at load: that package's own __init__ pulls
# in torch._dynamo and sympy (~1 s on 2.13), which is exactly what a warm load avoids.


def light_inductor_cache_dir() -> str:
    """inductor_cache_dir() without importing torch._inductor: the same rule as
    torch._inductor.runtime.cache_dir_utils.cache_dir (2.11-2.14): TORCHINDUCTOR_CACHE_DIR,
    else <tempdir>/torchinductor_<user> ("/var/tmp" in fbcode); made absolute, exported (as
    cache_dir does, so that an Inductor imported later agrees) and created."""
    directory = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if directory is None:
        import getpass
        import tempfile

        from torch._environment import is_fbcode

        try:
            user = getpass.getuser()
        except (KeyError, ModuleNotFoundError, OSError):
            getuid = getattr(os, "getuid", None)
            user = f"uid_{getuid()}" if callable(getuid) else "unknown_user"
        directory = os.path.join("/var/tmp" if is_fbcode() else tempfile.gettempdir(),
                                 "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
    directory = os.path.abspath(directory)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    os.makedirs(directory, exist_ok=True)
    return directory


def cpp_binding_source(argtypes: Sequence[str], source: str) -> str | None:
    """The whole C++ file Inductor builds for `async_compile.cpp_pybinding(argtypes, source)`:
    the kernel plus its Python-binding suffix (2.11-2.14:
    CppPythonBindingsCodeCache.load_pybinding_async formats suffix_template so). precompile
    matches it against the compile dir's `.cpp` files to find each kernel's binary; were the
    format to change, nothing matches (None when the class lacks these attributes) and load
    takes the compile path, saying so."""
    from torch._inductor.codecache import CppPythonBindingsCodeCache as cc

    names = ("suffix_template", "call_entry_function", "entry_function", "extra_parse_arg")
    if not all(isinstance(getattr(cc, n, None), str) for n in names):
        return None
    parseargs = ", ".join(f"parse_arg<{t.replace('const ', '')}>(args, {n})"
                          for n, t in enumerate(argtypes))
    return source + cc.suffix_template.format(
        arg_len=len(argtypes), call_entry_func=cc.call_entry_function.format(parseargs),
        entry_func=cc.entry_function, extra_parse_arg=cc.extra_parse_arg.format(array_len=-1))


def extern_kernel_location(name: str) -> str | None:
    """Where `extern_kernels.<name>` of Inductor's generated module lives outside
    torch._inductor, as a dotted path from `torch`: "torch.addmm",
    "torch.ops.mkldnn._linear_pointwise.binary"; None for a Python function of
    torch._inductor itself (bias_addmm, conv1x1_via_mm) or an unknown name. (2.11-2.14:
    torch._inductor.select_algorithm.extern_kernels, filled by ExternKernelChoice.)"""
    from torch._inductor.select_algorithm import extern_kernels

    obj = getattr(extern_kernels, name, None)
    if isinstance(obj, torch._ops.OpOverload):
        ns, op = obj._schema.name.split("::")
        return f"torch.ops.{ns}.{op}.{obj._overloadname}"
    if isinstance(obj, torch._ops.OpOverloadPacket):
        ns, op = obj._qualified_op_name.split("::")
        return f"torch.ops.{ns}.{op}"
    fname = getattr(obj, "__name__", None)
    if obj is not None and fname and getattr(torch, fname, None) is obj:
        return f"torch.{fname}"
    return None


def resolve_torch_path(path: str) -> Any:
    """The object at a dotted path from `torch` that extern_kernel_location wrote."""
    parts = path.split(".")
    if parts[0] != "torch":
        raise AttributeError(path)
    obj: Any = torch
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def load_cpp_kernel(path: str, key: str) -> Callable:
    """The `kernel` function of a C++ kernel's Python-binding library that Inductor built,
    imported as Inductor imports it (2.11-2.14: CppPythonBindingsCodeCache._load_library_inner):
    the library reads the address of torch's tensor-data-pointer helper from an environment
    variable at import; the module is `<key>.kernel` (its init function is PyInit_kernel) and
    is registered in sys.modules under that name, so Inductor finds it there if it loads the
    same kernel later in this process."""
    import importlib.util
    import sys

    os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(
        torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)
    name = f"{key}.kernel"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"not a loadable extension module: {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module.kernel


def can_launch_cubins() -> str | None:
    """Why this process cannot launch cached cubins itself, or None when it can (a CUDA
    build of torch with its static launcher, torch._C._StaticCudaLauncher, 2.8+)."""
    if not hasattr(torch._C, "_StaticCudaLauncher"):
        return "this torch has no static CUDA launcher (torch._C._StaticCudaLauncher)"
    if not torch.cuda.is_available():
        return "CUDA is not available in this process"
    return None


def cuda_capability(device_index: int) -> int:
    """The compute capability of a GPU as Inductor writes it (90 for sm_90)."""
    major, minor = torch.cuda.get_device_capability(device_index)
    return major * 10 + minor


def load_cubin(path: str, function: str, shared: int, device_index: int) -> Any:
    """The handle of one kernel of a cubin file, loaded by torch's static CUDA launcher
    (2.11-2.12 return (function, n_regs, n_spills), 2.13+ (module, function, n_regs,
    n_spills)). Like Inductor's, the module stays loaded for the life of the process.
    The CUDA driver's refusal (a RuntimeError) is an OSError naming the file, as a C++
    kernel library that does not load is: the warm load then compiles instead."""
    torch.cuda.init()
    try:
        return torch._C._StaticCudaLauncher._load_kernel(path, function, shared,
                                                         device_index)[-3]
    except RuntimeError as e:
        raise OSError(f"cannot load kernel {function} from {path}: {e}") from e


def launch_cubin() -> Callable[..., None]:
    """_launch_kernel(function, grid_x, grid_y, grid_z, num_warps, shared, arg_types, args,
    stream) of torch's static CUDA launcher (2.8+)."""
    return torch._C._StaticCudaLauncher._launch_kernel


def profiler_module() -> Any:
    """torch.autograd.profiler, whose `_is_profiler_enabled` Inductor's kernels read per
    launch (2.11-2.14)."""
    return torch.autograd.profiler


def record_function_fast() -> Any:
    """torch._C._profiler._RecordFunctionFast: the profiler range Inductor opens around each
    Triton launch while a profiler runs (2.11-2.14)."""
    return torch._C._profiler._RecordFunctionFast


# What Inductor's generated CPU module imports from torch._inductor, name by name (2.11-2.14:
# PythonWrapperCodegen.write_header and CppWrapper's; checked on 2.13's inference and
# training modules). The warm load serves exactly these; a module that imports anything else
# from torch._inductor takes the compile path.
WARM_IMPORTS: dict[str, frozenset[str]] = {
    "torch._inductor.hooks": frozenset({"run_intermediate_hooks"}),
    "torch._inductor.utils": frozenset({"maybe_profile"}),
    "torch._inductor.codegen.memory_planning": frozenset({"_align"}),
    "torch._inductor.async_compile": frozenset({"AsyncCompile"}),
    "torch._inductor.select_algorithm": frozenset({"extern_kernels"}),
    # CUDA modules (Triton kernels): the bandwidth-profiling markers, imported always, called
    # only in modules compiled with profile_bandwidth (the warm path refuses those)
    "torch._inductor.runtime.triton_heuristics": frozenset({"start_graph", "end_graph"}),
}


def warm_module_attrs(async_compile: Callable, extern_kernels: Any) -> dict[str, dict[str, Any]]:
    """The objects a warm load hands the generated module for the imports in WARM_IMPORTS:
    the caller's AsyncCompile and extern_kernels, and light copies of three small helpers
    that behave as Inductor's do (2.11-2.14); `triton` for the module's plain imports."""
    import sys
    import types

    hooks = sys.modules.get("torch._inductor.hooks")
    return {
        "torch._inductor.hooks": {"run_intermediate_hooks": (
            # an intermediate hook can only be registered through that module: if nobody
            # imported it, there is none to run
            hooks.run_intermediate_hooks if hooks is not None else _no_intermediate_hooks)},
        "torch._inductor.utils": {"maybe_profile": _maybe_profile},
        "torch._inductor.codegen.memory_planning": {"_align": _align},
        "torch._inductor.async_compile": {"AsyncCompile": async_compile},
        "torch._inductor.select_algorithm": {"extern_kernels": extern_kernels},
        "torch._inductor.runtime.triton_heuristics": {"start_graph": _no_graph_marker,
                                                      "end_graph": _no_graph_marker},
        # `import triton` / `import triton.language as tl`: the module names them, only the
        # kernel sources (strings the warm path never compiles) use them
        "triton": {"language": types.SimpleNamespace()},
    }


def _no_graph_marker(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("precompile_nb: start_graph/end_graph called on the warm path (the "
                       "planner refuses modules that call them): load with cache=None and "
                       "report this as a precompile_nb bug")


def _no_intermediate_hooks(name: str, value: Any) -> None:
    return None


@contextlib.contextmanager
def _maybe_profile(should_profile: bool, *args: Any, **kwargs: Any) -> Iterator[Any]:
    # torch._inductor.utils.maybe_profile (2.11-2.14)
    if should_profile:
        with torch.profiler.profile(*args, **kwargs) as p:
            yield p
    else:
        yield


def _align(nbytes: int) -> int:
    # torch._inductor.utils._align (2.11-2.14): round up to ALIGN_BYTES = 64
    return (nbytes + 63) & -64
