"""Whether a traced graph holds ops that autograd ran inside fn (a .backward() or an
autograd.grad), read off the nodes' metadata."""
from __future__ import annotations

import torch


def graph_runs_backward(gm: torch.fx.GraphModule) -> bool:
    """True where fn ran autograd while it was traced: torch marks each node the autograd
    engine records node.meta["autograd_backward"] (torch.fx.proxy, 2.11-2.15). A backward
    that makes no op (nothing to differentiate) leaves no mark, and then nothing to refuse."""
    return any(n.meta.get("autograd_backward") for n in gm.graph.nodes)
