"""torch internals of handing a functional graph to Inductor without AOTAutograd's two traces
(Note [one trace between capture and Inductor]; the checked versions are named beside each).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from .scoped_patch import ScopedPatch, switched_off

# Note [one trace between capture and Inductor]
#   Inductor's compile_fx hands every graph to AOTAutograd, which traces it twice more: once
#   to learn which inputs it writes and which results alias what (its metadata pass), once
#   to functionalize it and apply Inductor's decompositions (its graph trace). precompile's
#   graph is already functional when lowering gets it (the functional copy, Note [a
#   functional graph is not traced again]; writes moved to the end or to the driver, results
#   that alias an input returned by the driver), so the metadata pass learns nothing the
#   graph does not say and functionalization changes nothing: of those two traces only the
#   decompositions are work. So, for a graph that is plainly functional (ATen and prims ops
#   that write nothing, or copy_ into an input, no BatchNorm that writes its statistics
#   unsaid: the functional re-trace says those writes, Note [BatchNorm's writes said before
#   functionalizing]; no constants), precompile traces it once with Inductor's decomposition
#   table (what AOTAutograd traces with, select_decomp_table, 2.11-2.15, with Note [the
#   upsampling torch.compile decomposes]), each node keeping the meta of the node it came
#   from as AOTAutograd's trace keeps it (original_aten, from_node, stack traces: the
#   report's kernel provenance reads them), and compile_fx's call into
#   AOTAutograd (torch._dynamo.backends.common.AotAutograd, 2.11-2.15) hands that graph to
#   Inductor's inference compiler directly: the joint-graph passes, then compile_fx_inner,
#   as AOTAutograd's inference path does (under DisableAutocast where autocast is on). The
#   generated code is the same (tests/core/test_straight_to_inductor.py compares the two, on
#   CPU and CUDA; a kernel's comment names the copy_ nodes of the graph that it computes, which
#   AOTAutograd adds after its trace, unnamed). Inductor's pre-grad passes, which look for
#   torch-level patterns an ATen graph does not have, are skipped: with AOTAutograd where
#   torch runs them inside it (2.13-2.15), and where 2.11's compile_fx runs them before it
#   (0.11-0.23 s of each zoo training step on the H200, benchmarks/results/h200_round19) by
#   a second scoped patch, on this thread only. On the H200 the two traces had cost 1.2-2.4 s
#   of each zoo training step (benchmarks/results/h200_round17).
#   Any other graph (collectives, effects, constants, a GPU graph's BatchNorm, inputs that
#   share storage and are written) goes through AOTAutograd as before, and
#   PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR=0 sends every graph there.
ENV = "PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR"


def plainly_functional(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` may skip AOTAutograd (Note [one trace between capture and Inductor])."""
    return not why_aot_autograd(gm)


def why_aot_autograd(gm: torch.fx.GraphModule) -> str:
    """Why `gm` goes through AOTAutograd, in words (the report shows it); "" where it may skip
    it (Note [one trace between capture and Inductor])."""
    from .tracing import input_writes

    if switched_off(ENV):
        return f"{ENV}=0"
    written, why = input_writes(gm, ("aten", "prims"), copies=True)
    if written is None:
        return why
    return "" if not written or _apart(gm) else "an input it writes shares storage with another"


def _apart(gm: torch.fx.GraphModule) -> bool:
    """Whether no two tensor inputs of `gm` share storage (AOTAutograd writes into inputs that
    do through a base of theirs; precompile leaves those graphs to it)."""
    from .tracing import storage_key

    keys = [storage_key(v) for n in gm.graph.nodes if n.op == "placeholder"
            for v in (n.meta.get("val"),) if isinstance(v, torch.Tensor)]
    return len(keys) == len(set(keys))


def decomposed(gm: torch.fx.GraphModule, fake_inputs: Sequence[Any]) -> torch.fx.GraphModule:
    """`gm` traced once more, in its inputs' fake mode, with Inductor's decompositions, each
    new node keeping its source node's meta (Note [one trace between capture and Inductor])."""
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.traceback import preserve_node_meta

    from .decompositions import lowering_decompositions

    def run(*args: Any) -> Any:
        return torch.fx.Interpreter(gm).run(*args)

    fake_mode = detect_fake_mode(fake_inputs)
    if fake_mode is None:  # no tensor input (a graph of constants and factories): a fresh one
        from torch._subclasses.fake_tensor import FakeTensorMode

        fake_mode = FakeTensorMode()
    with fake_mode, preserve_node_meta(), torch.no_grad():
        out = make_fx(run, decomposition_table=lowering_decompositions(), tracing_mode="real",
                      _allow_non_fake_inputs=True)(*fake_inputs)
    out.meta.update(gm.meta)
    return out


def _straight(original: Callable, patch: ScopedPatch) -> Callable:
    def __call__(self: Any, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 **kwargs: Any) -> Any:
        compiler = getattr(self, "kwargs", {}).get("inference_compiler")
        if not patch.on() or compiler is None or kwargs:
            return original(self, gm, example_inputs, **kwargs)
        no_autocast = (torch._C._DisableAutocast if torch._C._is_any_autocast_enabled()
                       else contextlib.nullcontext)
        with no_autocast():
            compiled = compiler(gm, list(example_inputs))
        return lambda *args: compiled(list(args))  # OutputCode takes its inputs boxed

    return __call__


def _aot_autograd_class() -> Any:
    from torch._dynamo.backends.common import AotAutograd

    return AotAutograd


# what compile_fx's aot_autograd(...) returns and then calls (2.11-2.15: AotAutograd, its
# keyword arguments kept as .kwargs), whichever name compile_fx imported it by
_PATCH = ScopedPatch(lambda: _aot_autograd_class().__call__,
                     lambda f: setattr(_aot_autograd_class(), "__call__", f), _straight)


def _no_pre_grad(original: Callable, patch: ScopedPatch) -> Callable:
    def _recursive_pre_grad_passes(gm: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        return gm if patch.on() else original(gm, *args, **kwargs)

    return _recursive_pre_grad_passes


def _compile_fx_module() -> Any:
    import torch._inductor.compile_fx as compile_fx

    return compile_fx


# Inductor's pre-grad passes (torch-level patterns), which 2.11's compile_fx runs before it calls
# AOTAutograd, through this module global (2.11-2.15: compile_fx._recursive_pre_grad_passes)
_PRE_GRAD = ScopedPatch(lambda: getattr(_compile_fx_module(), "_recursive_pre_grad_passes", None),
                        lambda f: setattr(_compile_fx_module(), "_recursive_pre_grad_passes", f),
                        _no_pre_grad)


@contextlib.contextmanager
def without_aot_autograd(on: bool) -> Iterator[None]:
    """While compile_fx runs inside: a graph `decomposed` made goes to Inductor's inference
    compiler directly, without the pre-grad passes (Note [one trace between capture and
    Inductor]); nothing where not `on`."""
    if not on:
        yield
        return
    with _PATCH.active(), _PRE_GRAD.active():
        yield
