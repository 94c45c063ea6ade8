"""The precompile pipeline. Read it top to bottom:

    captured = capture(fn, example_inputs)      # make_fx, module lifting, invariants 1/3/4
    lowered  = lower(captured, backend)         # eager graph, or (AOTAutograd +) Inductor
    code     = emit(captured, lowered)          # header, graph, metadata, driver
    cache    = pack(code, backend, binaries)    # integrity-tagged envelope
    fn       = load(code, cache)                # AST-read metadata, prime caches, exec

core/ holds the stages only, one module (or, for capture, one package) each, plus what they
share: schemas.py (the records between stages), errors.py, and _compat/ (every torch internal).
May import: runtime/ (the convention's records, the driver's PrecompileError) and torch. Never
tools/, viewers/ or magics.py: those sit on top (tests/test_layout.py checks it).

Note [a load imports no stage]
  A process that only loads artifacts needs load, cache, warm and errors, and of _compat its
  warm and inductor modules. The stages (capture, lower, emit) and the capture side of
  _compat (tracing, realdata, parallel) are imported at the first precompile (build imports
  them; _compat names them in a table and imports each module at the first use of one of its
  names): `import precompile_nb` + load no longer pays for ~15 ms of module bodies it never
  runs (2-core CPU, torch 2.13, .pyc present). Nor does it import schemas, the stages'
  records (`Artifact` is imported when asked for; the cache header's CacheTag lives in
  cache.py): their dataclasses took 4.5 ms of the remaining 12 ms import.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..collector import collector_paused, young_made_old
from . import _compat
from .cache import pack
from .errors import (PrecompileError, fn_name, option_error, positional_names, raised_by_user,
                     user_frame)
from .load import load, python_entries

if TYPE_CHECKING:
    from .schemas import Artifact

BACKENDS = ("inductor", "eager")
TRACERS = ("make_fx", "dynamo")

# on_stage(stage, status, seconds): status is "start" or "done"; lets a notebook show progress
StageCallback = Callable[[str, str, float], None]


def _validate(backend: Any, tracer: Any, decompositions: Any, data_guards: Any) -> None:
    if tracer == "dynamo":
        raise option_error("precompile", "tracer", tracer, "'make_fx'",
                           "use tracer='make_fx' (the default)", planned=True,
                           what="precompile: tracer='dynamo' is planned, not implemented")
    if tracer not in TRACERS:
        raise option_error("precompile", "tracer", tracer, "'make_fx'",
                           "use tracer='make_fx' (the default)",
                           what=f"precompile: unknown tracer {tracer!r}")
    if backend not in BACKENDS:
        raise option_error("precompile", "backend", backend, "'inductor' or 'eager'",
                           "use backend='inductor' (the default: compiled kernels) or 'eager' "
                           "(the captured graph run as plain PyTorch ops)",
                           what=f"precompile: unknown backend {backend!r}")
    if decompositions is not None and not isinstance(decompositions, dict):
        raise option_error("precompile", "decompositions", decompositions,
                           "a dict {OpOverload: fn} or None",
                           "pass a dict such as torch._decomp.get_decompositions([...]), or "
                           "None for the backend's own")
    if not isinstance(data_guards, bool):
        raise option_error("precompile", "data_guards", data_guards, "True or False",
                           "pass data_guards=True to keep the example's branches on tensor "
                           "data, checked at every call, or False (the default)")


_OPTIONS = ("backend", "tracer", "decompositions", "data_guards", "tune_sizes")


def keyword_inputs_error(fn: Callable, n_positional: int, keywords: dict) -> PrecompileError:
    """precompile(fn, model, x=x): example inputs are positional only (fn's order is the
    artifact's calling convention); names the keyword, fn's order, and a misspelt option."""
    key = next(iter(keywords))
    params = positional_names(fn) or []
    name = fn_name(fn)
    order = (f"in {name}'s order: precompile({name}, {', '.join(params)})"
             if params else f"in {name}'s order")
    typo = difflib.get_close_matches(key, _OPTIONS, n=1)
    return PrecompileError(
        f"precompile: {key}= was passed by keyword; example inputs are positional only",
        stage="capture", where=f"precompile(..., {key}=...)",
        expected=f"example inputs passed positionally, in {name}'s order; the only keyword "
                 f"options are {', '.join(o + '=' for o in _OPTIONS)}",
        actual=f"{n_positional} positional, then keyword "
               + ", ".join(f"{k}=" for k in keywords),
        hint=(f"did you mean {typo[0]}=? " if typo else "")
        + f"pass {key} positionally, {order} (the artifact is called the same way: "
          f"f({', '.join(params) or '...'}))")


_SAID: set[str] = set()  # switch mistakes already warned about in this process


def _warn_switch_mistakes() -> None:
    """A misspelt switch, or a switch set to a word that is neither on nor off, changes
    nothing silently: say so, once per process, at the precompile that reads them."""
    from ._compat.scoped_patch import switch_mistakes  # Note [a load imports no stage]

    for said in switch_mistakes(os.environ):
        if said not in _SAID:
            _SAID.add(said)
            warnings.warn(f"precompile: {said}", UserWarning, stacklevel=4)


def build(fn: Callable, *example_inputs: Any, backend: str = "inductor",
          tracer: str = "make_fx", decompositions: dict | None = None,
          data_guards: bool = False, tune_sizes: Sequence[Any] | None = None,
          on_stage: StageCallback | None = None, **keyword_inputs: Any) -> Artifact:
    """precompile, keeping everything each stage recorded (for reports and tools)."""
    if keyword_inputs:
        raise keyword_inputs_error(fn, len(example_inputs), keyword_inputs)
    _validate(backend, tracer, decompositions, data_guards)
    _warn_switch_mistakes()
    from .tuning import check_tune_sizes  # Note [a load imports no stage]
    sizes = check_tune_sizes(tune_sizes)
    times: list[tuple[str, float]] = []

    def stage(name: str, f: Callable[[], Any]) -> Any:
        if on_stage:
            on_stage(name, "start", 0.0)
        t0 = time.perf_counter()
        try:
            out = f()
        except PrecompileError:
            raise
        except Exception as e:  # noqa: BLE001 - no raw error of torch's reaches the user
            if name == "capture" and raised_by_user(e):
                raise  # fn's own exception, as eager would raise it: `except ValueError` works
            raise _stage_failed(fn, name, e) from e
        dt = time.perf_counter() - t0
        times.append((name, dt))
        if on_stage:
            on_stage(name, "done", dt)
        return out

    from . import pieces
    from .capture import capture  # Note [a load imports no stage]
    from .emit import emit
    from .lower import lower
    from .schemas import Artifact

    with _compat.GLOBAL_LOCK, collector_paused():  # Note [the collector pauses for a build]
        _start_with_the_capture(backend, example_inputs)
        try:
            captured = stage("capture", lambda: capture(fn, example_inputs,
                                                        decompositions=decompositions,
                                                        data_guards=data_guards))
            lowered = stage("lower", lambda: lower(captured, backend, tune_sizes=sizes))
        finally:  # every early worker the lowering did not take, and the compile workers
            pieces.stop_workers()  # forked for it, or a sidecar started for it and not ready
            _compat.end_build_workers()
    captured = dataclasses.replace(captured, example_tensors=())  # no reference to the example
    python_code = stage("emit", lambda: emit(captured, lowered))
    cache = stage("pack", lambda: pack(python_code, backend, lowered.files + (
        python_entries(python_code) if backend == "inductor" else ())))
    return Artifact(python_code=python_code, cache=cache, captured=captured, lowered=lowered,
                    stage_seconds=tuple(times))


def _start_with_the_capture(backend: str, example_inputs: Sequence[Any]) -> None:
    """What an Inductor build starts before its capture, to run beside it."""
    if backend != "inductor":
        return
    from . import pieces  # Note [a load imports no stage]

    device = cuda_index(example_inputs)
    with young_made_old():  # the start's imports: Note [the collector pauses for a build]
        if device is not None:  # Triton's hash first: it runs beside the pool's imports
            _compat.start_triton_setup(device)  # Note [Triton's set-up while the capture runs]
            _compat.start_compile_workers()  # Note [compile workers start with the capture]
            pieces.start_workers("cuda")  # Note [piece workers start with the capture]
        elif _compat.lowering_reuse_on():  # no lowering store, no key: nothing hashes Triton
            _compat.start_triton_setup(None)  # its hash alone, for the lowering's key
        if not _compat.lowering_may_be_stored():  # a lowering taken whole needs none of it
            _compat.import_lowering()  # what the lowering imports first, beside the hash


def on_cuda(inputs: Sequence[Any]) -> bool:
    """Whether a tensor among `inputs`, or a parameter or buffer of a module among them, is
    on a CUDA device (the top level only: what precompile and the profiler decide on)."""
    return cuda_index(inputs) is not None


def cuda_index(inputs: Sequence[Any]) -> int | None:
    """The index of the CUDA device of the first tensor among `inputs` (or parameter or
    buffer of a module among them) that is on one; None where none is (see on_cuda)."""
    import itertools

    import torch

    for v in inputs:
        tensors = (itertools.chain(v.parameters(), v.buffers()) if isinstance(v, torch.nn.Module)
                   else (v,) if isinstance(v, torch.Tensor) else ())
        for t in tensors:
            if t.is_cuda:
                return t.device.index or 0
    return None


def _stage_failed(fn: Callable, stage: str, e: Exception) -> PrecompileError:
    """An error torch raised inside a stage that no check of ours foresaw, as a
    PrecompileError with the stage and the user's line (the original is its __cause__)."""
    name = getattr(fn, "__name__", type(fn).__name__)
    first = (str(e).strip().splitlines() or [""])[0]
    return PrecompileError(
        f"{'fn' if name == '<lambda>' else name}: {stage} failed: {type(e).__name__}",
        stage=stage, where=user_frame(e.__traceback__) or f"inside {stage}",
        expected=f"a computation that {stage} can handle",
        actual=f"{type(e).__name__}: {first[:300]}",
        hint="the chained exception has torch's own message; simplify or move the part it "
             "names out of fn, try backend='eager', or report it with a small example")


def precompile(fn: Callable, *example_inputs: Any, backend: str = "inductor",
               tracer: str = "make_fx", decompositions: dict | None = None,
               data_guards: bool = False, tune_sizes: Sequence[Any] | None = None,
               **keyword_inputs: Any) -> tuple[str, bytes]:
    """Compile the whole computation `fn(*example_inputs)` ahead of time.

    Returns (python_code, cache): self-contained source (needs only torch; holds no
    weights) and the compiled binaries that make loading it compile nothing.

    >>> import torch
    >>> model, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    >>> code, cache = precompile(lambda m, x: m(x), model, x, backend="eager")
    >>> f = precompile.load(code, cache)  # doctest: +SKIP
    >>> torch.allclose(f(model, x), model(x))  # doctest: +SKIP
    True

    Example inputs are positional only: a keyword other than the options is a
    PrecompileError that names it. `data_guards=True`: a branch (or a size) that depends on
    tensor data is kept as the example takes it and checked on every call, instead of being
    refused (Note [data guards] in core/capture/guards.py). `tune_sizes=[1, 256]` (or
    `[{"x.size(0)": 1}, ...]`): a CUDA graph with dynamic dims is autotuned at these sizes
    too, besides the example's and its range's ends, and its kernels keep a configuration
    per size (Note [a configuration per size] in core/tuning.py).
    """
    if keyword_inputs:
        raise keyword_inputs_error(fn, len(example_inputs), keyword_inputs)
    art = build(fn, *example_inputs, backend=backend, tracer=tracer,
                decompositions=decompositions, data_guards=data_guards,
                tune_sizes=tune_sizes)
    return art.python_code, art.cache


precompile.load = load  # type: ignore[attr-defined]
precompile.PrecompileError = PrecompileError  # type: ignore[attr-defined]


def __getattr__(name: str) -> Any:
    if name == "Artifact":  # the stages' record: imported when asked for (a load does not)
        from .schemas import Artifact
        return Artifact
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["precompile", "build", "load", "PrecompileError", "Artifact"]
