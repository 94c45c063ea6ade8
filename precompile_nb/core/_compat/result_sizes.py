"""A number in fn's result that is computed from dynamic sizes, as an expression over the
graph inputs' dims (Note [sizes in the result] in core/capture/lifting.py)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def size_expression(n: Any, tensors: Sequence[torch.Tensor]
                    ) -> tuple[str, dict[str, tuple[int, int]]] | int | None:
    """A SymInt met while tracing as (Python expression over its symbols, symbol -> (tensor,
    dim) of `tensors` whose size it is), an int where it is a number after all, or None where
    it names a size no input dim holds (a count from data). Read off the SymInt's sympy
    expression (n.node.expr, 2.11-2.15) and torch's PythonPrinter, as guards are."""
    from torch.utils._sympy.printers import PythonPrinter

    expr = n.node.expr
    if expr.is_number:
        return int(expr)
    dims: dict[str, tuple[int, int]] = {}
    for i, t in enumerate(tensors):
        for d, size in enumerate(t.shape):
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                dims.setdefault(size.node.expr.name, (i, d))
    names = sorted(s.name for s in expr.free_symbols)
    if not names or not set(names) <= set(dims):
        return None
    return PythonPrinter().doprint(expr), {k: dims[k] for k in names}
