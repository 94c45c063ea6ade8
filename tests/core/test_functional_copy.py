"""Note [a functional graph is not traced again]: a graph that writes nothing is copied, not
re-traced, and the copy computes what the graph does; a graph that writes is re-traced."""
from __future__ import annotations

import torch

from precompile_nb.core import _compat
from precompile_nb.core.capture import capture

aten = torch.ops.aten


def _mlp_step(m, x):
    loss = m(x).square().mean()
    loss.backward()
    return loss


def _writes_step(m, x):
    y = m(x)
    y.add_(1.0)  # an in-place op: functionalization has work to do
    loss = y.square().mean()
    loss.backward()
    return loss


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))


def test_a_graph_that_writes_nothing_is_copied_and_the_capture_is_left_alone():
    c = capture(_mlp_step, [_net(), torch.randn(3, 4)])
    before = [(n.name, n.op, n.target) for n in c.graph.graph.nodes]
    f = _compat.functionalize(c.graph, c.fake_inputs)
    assert f is not c.graph and f.graph is not c.graph.graph
    assert [(n.name, n.op, n.target) for n in f.graph.nodes] == before
    # the copy computes what the graph does
    real = list(c.example_tensors)
    for got, want in zip(f(*real), c.graph(*real)):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want)
    # lowering edits its graph (unread inputs erased): the capture's graph is not touched
    f.graph.erase_node(next(n for n in reversed(f.graph.nodes) if n.op == "output"))
    assert [(n.name, n.op, n.target) for n in c.graph.graph.nodes] == before


def test_a_graph_that_writes_is_traced_functionally():
    c = capture(_writes_step, [_net(), torch.randn(3, 4)])
    inplace = [n for n in c.graph.graph.nodes if n.target is aten.add_.Tensor]
    assert inplace  # the capture kept the write
    f = _compat.functionalize(c.graph, c.fake_inputs)
    assert not any(n.target is aten.add_.Tensor for n in f.graph.nodes)
    real = list(c.example_tensors)
    for got, want in zip(f(*real), c.graph(*real)):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want)
