"""torch internals of a captured view that Inductor's decompositions made impossible
(Note [a view the decompositions made impossible]; the checked versions are named beside each).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

# Note [a view the decompositions made impossible]
#   Capture records a reshape as the aten.view it dispatches to where its input's strides, as
#   the ATen op that made the input gives them, allow a view. Inductor's decompositions can
#   give that input other strides: Hugging Face's BLOOM concatenates an empty cache with a
#   transposed key, ATen's cat returns it contiguous, and Inductor's cat decomposition returns
#   a clone of the one non-empty tensor, which keeps the transposed strides (2.13). The view
#   can then not be taken, and the trace before Inductor, AOTAutograd's or precompile's own
#   (Note [one trace between capture and Inductor]), fails with "Cannot view a tensor ...".
#   torch.compile does not meet it: Dynamo records the reshape itself, and AOTAutograd decides
#   between view and copy under the decompositions. Where a lowering fails so, precompile
#   lowers again with the graph's aten.view nodes as aten.reshape, which the trace turns back
#   into the same view wherever the strides allow one and into reshape's copy (clone +
#   _unsafe_view) where they do not: the value the view has in eager. The graph lowering gets
#   is functional (Note [a functional graph is not traced again]), so no write reaches a
#   tensor through such a view; a view that an op writes into all the same (its first
#   argument, of a schema that says it writes) stays a view, as do the views it was taken
#   from. A graph whose views all hold lowers as it did, with no extra work: the graph is
#   rewritten (and its code generated again) only after such a failure, not before every
#   lowering. The captured graph keeps its views (the report shows it as captured).
_MESSAGE = "Cannot view a tensor with shape"  # torch._refs._reshape_view_helper, 2.11-2.15


def failed_on_a_view(e: BaseException | None) -> bool:
    """Whether a lowering failed on a view its input's strides no longer allow (Note [a view
    the decompositions made impossible]): the message on `e` or on what it was raised from."""
    seen = set()
    while e is not None and id(e) not in seen:
        if _MESSAGE in str(e):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _written_through(n: torch.fx.Node, view: object) -> bool:
    """Whether an op writes into `n` or into a view of it taken by `view` (its first argument,
    of a schema that says it writes: 2.11-2.15 OpOverload._schema.is_mutable)."""
    for u in n.users:
        if u.op != "call_function" or not u.args or u.args[0] is not n:
            continue
        schema = getattr(u.target, "_schema", None)
        if getattr(schema, "is_mutable", False) or (u.target is view and
                                                     _written_through(u, view)):
            return True
    return False


@contextlib.contextmanager
def views_as_reshapes(gm: torch.fx.GraphModule) -> Iterator[int]:
    """`gm` with each aten.view.default node an aten.reshape.default while the block runs;
    yields how many there are (Note [a view the decompositions made impossible])."""
    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is view
             and not _written_through(n, view)]
    for n in nodes:
        n.target = reshape
    if nodes:
        gm.recompile()
    try:
        yield len(nodes)
    finally:
        for n in nodes:
            n.target = view
        if nodes:
            gm.recompile()
