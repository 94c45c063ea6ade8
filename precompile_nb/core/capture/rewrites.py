"""Capture, the graph rewrites after the checks: factory dtypes pinned, detach dropped,
placeholders named after what they are, and the inputs an op's schema writes.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from ...runtime.convention import TensorInput
from .. import _compat

_FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "arange", "scalar_tensor",
              "empty_strided", "randint", "linspace", "eye", "new_zeros", "new_ones",
              "new_empty", "new_full", "zeros_like", "ones_like", "empty_like", "full_like",
              "rand_like", "randn_like"}


def _pin_factory_dtypes(gm: torch.fx.GraphModule) -> None:
    """Factory ops traced without dtype= would follow the *caller's* default dtype at run
    time; pin them to what capture saw (invariant 6: dtypes are specialized)."""
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        if n.target.__name__.split(".")[0] not in _FACTORIES:
            continue
        schema_args = {a.name for a in n.target._schema.arguments}
        val = n.meta.get("val")
        if "dtype" in schema_args and n.kwargs.get("dtype") is None and isinstance(
                val, torch.Tensor):
            n.kwargs = {**n.kwargs, "dtype": val.dtype}


def _schema_mutated(gm: torch.fx.GraphModule) -> set[int]:
    """Graph inputs written by an op's schema (native_batch_norm writes its running stats
    without bumping the fake tensor's version counter)."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        for a, v in zip(n.target._schema.arguments, n.args):
            if a.alias_info is not None and a.alias_info.is_write and v in phs:
                out.add(phs.index(v))
        # legacy schemas that update running stats without declaring it (training=True)
        if n.target.__name__.split(".")[0] in _BN_LEGACY and len(n.args) > 5 and n.args[5]:
            out.update(phs.index(v) for v in n.args[3:5] if v in phs)
    return out


_BN_LEGACY = {"native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm"}


def _name_placeholders(gm: torch.fx.GraphModule, specs: Sequence[TensorInput]) -> None:
    """arg7_1 -> m_1_running_mean: the graph, the eager source and the viewers read better."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, s in zip(phs, specs):
        name = re.sub(r"\W+", "_", s.where).strip("_") or "input"
        if name[0].isdigit():
            name = "_" + name
        _compat.rename_node(n, name)


def _drop_detach(gm: torch.fx.GraphModule) -> None:
    """detach is a no-op once autograd has been traced away; dropping it keeps Inductor from
    materialising copies of it."""
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.detach.default:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
