"""Capture, data guards: the branches and sizes that depend on tensor data, kept as the example
took them and checked by the graph on every call (Note [data guards]).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ...runtime.convention import DataGuard
from .. import _compat
from ..errors import PrecompileError, Problems, fn_name, user_frame

if TYPE_CHECKING:
    from .lifting import _Lifted

# Note [data guards]
#   A Python branch on tensor data (`if not torch.isfinite(h).all():`, `if idx.size(0) > 0:`
#   after a nonzero, a loop over `offs.tolist()`) is refused at capture by default (invariant
#   3): one graph cannot hold both ways. Many such branches go the same way for every batch a
#   model is trained on (activations are finite; every expert receives tokens). With
#   precompile(..., data_guards=True) capture traces with the example's real values beside the
#   fake ones (core/_compat/realdata.py), so each such branch, or each size that depends on
#   data, is decided as the example decides it, and every decision becomes a check inside the graph,
#   placed right after the op that produced the value and before anything uses it. A call
#   whose data would decide otherwise fails that check, and the driver raises a
#   PrecompileError naming the branch's line and what the example did. Nothing of such a call
#   is written back: with Inductor every write into an input (gradients, BatchNorm statistics,
#   an optimizer's update) is done by the driver after the graph returns; with the eager
#   backend the graph is lowered functionalized, its writes at its end (lower.py).
#   A size that the data decides but the graph needs no branch on (how many rows nonzero
#   returns, then a gather of them) stays symbolic: one graph serves every count.
#   Never for a random draw: a branch on `torch.rand([]) < p` (LayerDrop) would fail at random
#   calls, so it stays refused with the LayerDrop fix (_data_dependent_fix).

_PRODUCED_BY = {
    "_local_scalar_dense": "the value .item() / bool() / .tolist() read from a tensor",
    "nonzero": "the number of rows of nonzero's result",
}


def data_guards(gm: torch.fx.GraphModule, mode: Any, fn: Callable, L: _Lifted,
                symbols: dict[str, tuple[int, int]], P: Problems) -> tuple[DataGuard, ...]:
    """The decisions the trace took from the example's data as DataGuards, their checks
    written into `gm`; a decision on a random draw or on a mark_unbacked size is refused."""
    made = _compat.data_decisions(mode)
    producers = _compat.unbacked_producers(gm)
    out = []
    for d in made:
        source = user_frame(d.stack)
        if _refused(d, producers, fn, L, symbols, source, P):
            continue
        out.append(DataGuard(expr=str(d.expr), symbols=d.symbols,
                             text=_text(d, producers), source=source))
    if made:  # the slices of data-dependent bounds: assumed not to count from the end
        for name, value, n in _compat.assume_nonnegative_bounds(gm, mode):
            out.append(DataGuard(
                expr=f"{name} >= 0", symbols=(name,), source=user_frame(n.meta.get("stack_trace")),
                text=f"{name} >= 0 held, {name} = {value} (a slice bound read from a tensor)"))
        _compat.insert_data_checks(gm, mode)
    _compat.forget_real_values(gm, mode)
    return tuple(out)


def _text(d: Any, producers: dict[str, torch.fx.Node]) -> str:
    """'Eq(u0, 1) held, u0 = 1 (the value .item() / bool() ... read from a tensor)'."""
    parts = []
    for name in d.symbols:
        n = producers.get(name)
        base = _op_name(n)
        what = _PRODUCED_BY.get(base, f"a value of {base}" if base else "a data-dependent value")
        value = d.values.get(name)
        parts.append(f"{name} = {value} ({what})" if value is not None else f"{name}: {what}")
    return f"{d.expr} held, " + ", ".join(parts)


def _op_name(n: torch.fx.Node | None) -> str:
    if n is None or n.op != "call_function":
        return ""
    if n.target is torch.sym_ite and n.args and isinstance(n.args[0], torch.fx.Node):
        return _op_name(n.args[0])  # bool(t) is read as sym_ite(t.item(), 1, 0)
    name = getattr(n.target, "__name__", str(n.target))
    if name.startswith("sym_size") and n.args and isinstance(n.args[0], torch.fx.Node):
        return _op_name(n.args[0])
    return name.split(".")[0]


def _refused(d: Any, producers: dict[str, torch.fx.Node], fn: Callable, L: _Lifted,
             symbols: dict[str, tuple[int, int]], source: str | None, P: Problems) -> bool:
    nodes = [producers[s] for s in d.symbols if s in producers]
    unbacked = [s for s in d.symbols if s in symbols and symbols[s] not in L.assumable]
    if unbacked:
        i, dim = symbols[unbacked[0]]
        where = f"{L.specs[i].where}.shape[{dim}]"
        P.add(PrecompileError(
            f"{fn_name(fn)}: the computation branches on the dynamic dim {where}",
            invariant=3, stage="capture", where=source or where,
            expected="a graph that works for every size of the dim (mark_unbacked)",
            actual=f"the branch {d.expr} was decided by the example",
            hint="mark it with torch._dynamo.mark_dynamic instead (the example then decides "
                 "and the artifact checks it), or remove the size-dependent branch",
            extra={"source": source}))
        return True
    if any(_only_random(n) for n in nodes):
        P.add(PrecompileError(
            f"{fn_name(fn)}: a branch depends on a random draw", invariant=3,
            stage="capture", where=source or "inside fn",
            expected="control flow that the data of a call decides the same way each time",
            actual=f"{d.expr} was decided by one draw of a random op",
            hint="a data guard would fail at random calls. Set the probability that decides "
                 "it to 0 or 1 (LayerDrop: config.layerdrop = 0.0), precompile in eval(), or "
                 "draw the mask outside fn, pass it as a tensor, and write the skip as "
                 "torch.where(keep, layer(x), x)",
            extra={"source": source}))
        return True
    return False


def _only_random(n: torch.fx.Node) -> bool:
    """Whether `n`'s value comes from a random draw and no input: LayerDrop's
    `torch.rand([]) < p`, not a check of activations that passed through dropout."""
    seen, stack, random = set(), [n], False
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        if m.op == "placeholder":
            return False
        random = random or _compat.is_random_op(m)
        stack.extend(m.all_input_nodes)
    return random
