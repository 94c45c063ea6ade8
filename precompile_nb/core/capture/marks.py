"""Capture, dynamic dimensions: dimension marks honoured or refused, and the guards the
example decides (Note [guards from the example]).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ...runtime.convention import Guard, dense_order
from .. import _compat
from ..errors import PrecompileError, Problems, fn_name, user_frame

if TYPE_CHECKING:
    from .lifting import _Lifted


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
    expr = _compat.condition_source(cond, holds)
    used = {n: symbols[n] for n in sorted(names)}
    return Guard(expr=expr, symbols=used, text=sizes_text(expr, used, L.specs), source=source)


def sizes_text(expr: str, symbols: dict[str, tuple[int, int]], specs: Any) -> str:
    """An expression over size symbols as people read it: "u0 <= 8" -> "x.size(0) <= 8"."""
    text = expr
    for n in sorted(symbols, key=len, reverse=True):
        i, d = symbols[n]
        text = re.sub(rf"\b{n}\b", f"{specs[i].where}.size({d})", text)
    return text


def _data_dependent_error(e: BaseException, fn: Callable, symbols: dict[str, tuple[int, int]],
                          L: _Lifted, P: Problems) -> None:
    hit = next((v for k, v in symbols.items() if re.search(rf"\b{k}\b", str(e))), None)
    if hit is not None:
        spec = L.specs[hit[0]]
        dim = f"{spec.where}.shape[{hit[1]}]"
        P.add(PrecompileError(
            f"{fn_name(fn)}: the computation branches on the dynamic dim {dim}",
            invariant=3, stage="capture", where=user_frame(e.__traceback__) or dim,
            expected="a graph that works for every size of the dim",
            actual=str(e).splitlines()[0],
            hint=_dynamic_dim_fix(e, dim, spec.where, hit[1], hit in L.assumable),
            extra={"input": spec.where, "dim": hit[1],
                   "source": user_frame(e.__traceback__)}))
        return
    P.add(PrecompileError(
        f"{fn_name(fn)}: a value or a branch depends on tensor data",
        invariant=3, stage="capture",
        where=user_frame(e.__traceback__) or "inside fn",
        expected="control flow and shapes fixed by the example inputs",
        actual=f"{type(e).__name__}: {str(e).splitlines()[0]}",
        hint=_data_dependent_fix(user_frame(e.__traceback__)),
        extra={"source": user_frame(e.__traceback__)}))


def _numpy_error(e: BaseException, fn: Callable, P: Problems) -> None:
    """fn turned a traced tensor into a NumPy array: its values would be read into Python."""
    source = user_frame(e.__traceback__)
    P.add(PrecompileError(
        f"{fn_name(fn)} converts a tensor to a NumPy array", invariant=3, stage="capture",
        where=source or "inside fn", expected="tensor values stay torch tensors inside fn",
        actual=".numpy() / np.asarray(tensor)",
        hint="write that part with torch ops (torch.* has most NumPy functions), or do the "
             "NumPy work outside fn, on its inputs or its result",
        extra={"source": source}))


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


def _check_marks(t: torch.Tensor, where: str, kind: str, marks: _compat.DimMarks,
                 P: Problems) -> dict[int, tuple[int | None, int | None]]:
    """Invariant 3: a dimension mark is honoured or refused here, never dropped. Returns the
    dynamic dims honoured (an input's marks on dims it has), with their bounds."""
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
    if bad := [d for d in marked if d not in range(t.dim())]:  # torch.compile ignores them
        refuse(f"{where}: dim {bad[0]} is marked dynamic, but {where} has {t.dim()} dims",
               f"marked dims {marked} for shape {list(t.shape)}",
               f"mark a dim by its index from 0 to {t.dim() - 1}"
               + (f" ({bad[0] + t.dim()} for {bad[0]})" if -t.dim() <= bad[0] < 0 else ""))
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
    return ({d: r for d, r in {**marks.unbacked, **marks.dynamic}.items() if d not in bad}
            if kind == "input" else {})


def _data_dependent_fix(line: str | None) -> str:
    """What to do about a data-dependent branch; for a random draw in a Python `if` (LayerDrop:
    `if torch.rand([]) < p`), how to turn it off for the precompiled step."""
    fix = ("keep .item(), .tolist(), bool(tensor) and data-dependent shapes out of fn: compute "
           "with tensors (torch.where instead of if), or do the data-dependent part outside "
           "the precompiled computation")
    if line and ("rand" in line or "drop" in line.lower()):
        return ("a random draw decides a Python branch (LayerDrop): set the layer-drop "
                "probability to 0 (e.g. config.layerdrop = 0.0; with 0 the branch is decided "
                "and captured) or precompile the model in eval(); otherwise " + fix)
    return ("if the data of your calls takes this branch the way the example does (a check "
            "for non-finite values, a loss that skips absent labels, experts that all get "
            "tokens), precompile(..., data_guards=True) keeps the example's branch and checks "
            "it on every call (another branch is a PrecompileError, nothing written back); "
            "otherwise " + fix)
