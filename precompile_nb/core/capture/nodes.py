"""Capture, the graph as plain data for the viewers: one GraphNodeInfo per node, with its
role (input, parameter, compute, gradient, collective, optimizer, and the
optimizer's state and tensor hyperparameters) and the module it belongs to.
"""
from __future__ import annotations

from typing import Any

import torch

from .. import _compat
from ..errors import user_frame
from ..schemas import Captured, GraphNodeInfo


def graph_nodes(c: Captured) -> tuple[GraphNodeInfo, ...]:
    gm = c.graph
    nodes = list(gm.graph.nodes)
    out_node = nodes[-1]
    outs = list(out_node.args[0]) if out_node.op == "output" else []
    user_outs = outs[:c.n_user_outputs]

    def ancestors(roots):
        seen, todo = set(), [r for r in roots if isinstance(r, torch.fx.Node)]
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            todo.extend(x.all_input_nodes)
        return seen

    forward = ancestors(user_outs)
    # gradients: what the gradient outputs, or an optimizer's step, read (not the forward)
    stepped = [n for n in nodes if _optimizer_of(n)]
    backward = ancestors(outs[c.n_user_outputs:] + stepped) - forward - set(stepped)
    ph_roles = [s.kind for s in c.inputs] + ["constant"] * len(c.constants)
    # autograd sequence number -> the forward op node that recorded it (first one wins)
    forward_of: dict[Any, torch.fx.Node] = {}
    for n in nodes:
        if n in forward and n.op == "call_function" and n.meta.get("seq_nr", -1) >= 0:
            forward_of.setdefault(n.meta["seq_nr"], n)
    ph_index = 0
    infos = []
    modules: dict[torch.fx.Node, str] = {}
    for n in nodes:
        val = n.meta.get("val")
        shape = dtype = None
        if isinstance(val, torch.Tensor):
            shape = tuple(d if isinstance(d, int) else str(d) for d in val.shape)
            dtype = str(val.dtype).replace("torch.", "")
        if n.op == "placeholder":
            role = ph_roles[ph_index] if ph_index < len(ph_roles) else "input"
            label = (c.inputs[ph_index].where if ph_index < len(c.inputs)
                     else f"constant {ph_index - len(c.inputs)}")
            ph_index += 1
            target = label
        elif n.op == "output":
            role, target = "output", "output"
        else:
            role = ("collective" if _compat.is_collective(n.target)  # tensor parallelism
                    else "optimizer" if _optimizer_of(n)
                    else "gradient" if n in backward else "compute")
            target = str(n.target).replace("torch.ops.", "")
        module = _optimizer_of(n) or _module_of(n, modules, c, ph_index, forward_of)
        modules[n] = module
        infos.append(GraphNodeInfo(
            name=n.name, op=n.op, target=target,
            args=tuple(a.name for a in n.all_input_nodes), shape=shape, dtype=dtype, role=role,
            module=module, stack=user_frame(n.meta.get("stack_trace"))))
    return tuple(infos)


def _optimizer_of(n: torch.fx.Node) -> str:
    """The optimizer argument ("opt") whose step() recorded `n`, or "" (capture/optim.py
    annotates the nodes of a traced step)."""
    custom = n.meta.get("custom") or {}
    return str(custom.get("pc_module", "")) if custom.get("pc_role") == "optimizer" else ""


def _module_of(n: torch.fx.Node, known: dict[torch.fx.Node, str], c: Captured,
               ph_index: int, forward_of: dict[Any, torch.fx.Node]) -> str:
    """The nn.Module path a node belongs to, for grouping the graph view and the profile.
    Forward ops: make_fx's nn_module_stack. Parameters/buffers: their owner ("m.0.weight" ->
    "m.0"). Backward ops carry no module stack (autograd runs them): they join the module of
    the forward op they differentiate (its autograd sequence number, _compat.
    backward_op_origins), else of the deepest forward value they read, else of the gradient
    flowing into them."""
    mstack = n.meta.get("nn_module_stack") or {}
    if mstack:
        return str(list(mstack.values())[-1][0])
    if n.op == "placeholder":
        k = ph_index - 1
        if 0 <= k < len(c.inputs) and c.inputs[k].kind in ("param", "buffer"):
            return c.inputs[k].where.rsplit(".", 1)[0]
        if 0 <= k < len(c.inputs) and c.inputs[k].kind in ("state", "hyper"):
            return c.inputs[k].where.split(".", 1)[0]  # the optimizer argument
        return ""
    if n.op == "output":
        return ""
    origin = forward_of.get(n.meta.get("seq_nr"))  # the forward op this one differentiates
    if origin is not None and origin is not n:
        return known.get(origin, "")
    fwd = [known.get(a, "") for a in n.all_input_nodes
           if a.op == "placeholder" or a.meta.get("nn_module_stack")]
    fwd = [m for m in fwd if m]
    if fwd:
        return max(fwd, key=lambda m: m.count("."))
    inherited = [known.get(a, "") for a in n.all_input_nodes if known.get(a)]
    return max(inherited, key=lambda m: m.count(".")) if inherited else ""
