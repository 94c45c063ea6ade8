"""The graph view of a real transformer training step (thousands of nodes) stays readable:
module clusters collapse under the node budget and lay out quickly."""
from __future__ import annotations

import dataclasses
import shutil

import pytest
import torch
from torch import nn

from precompile_nb.core.capture import capture
from precompile_nb.viewers.graph import graph_view


def _transformer_step_nodes() -> list[dict]:
    torch.manual_seed(0)
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True,
                                   dropout=0.1), num_layers=8)
    x = torch.randn(2, 8, 32)

    def step(model, x):
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    c = capture(step, [model, x])
    return [dataclasses.asdict(n) for n in c.nodes]


def test_transformer_training_step_graph_collapses_modules_and_renders():
    nodes = _transformer_step_nodes()
    assert len(nodes) > 1000, len(nodes)
    modules = {n["module"] for n in nodes if n["module"]}
    assert any(m.startswith("model.layers.7") for m in modules)  # real module paths
    view = graph_view(nodes, node_budget=300, svg=shutil.which("dot") is not None, timeout=120)
    assert view.total_nodes == len(nodes)
    assert view.drawn_nodes <= 300 + len(view.collapsed) and view.collapsed
    print(f"{len(nodes)} nodes -> {view.drawn_nodes} drawn, {len(view.collapsed)} clusters "
          f"collapsed; DOT {view.dot_seconds:.3f}s, layout {view.layout_seconds}s")
    if shutil.which("dot"):
        assert view.svg and view.svg.count('class="node"') == view.drawn_nodes
        assert view.layout_seconds is not None  # laid out by dot, not timed out
    # opening a collapsed cluster on demand draws its ops
    target, n_ops = max(view.collapsed, key=lambda c: c[1])  # e.g. a self_attn block
    opened = graph_view(nodes, node_budget=300, expand={target}, svg=False)
    assert target not in dict(opened.collapsed)
    # its ops are drawn; other clusters close instead so the picture stays within budget
    assert dict(opened.collapsed) != dict(view.collapsed) and n_ops > 1
    assert opened.drawn_nodes <= 300 + len(opened.collapsed)


@pytest.mark.parametrize("budget", [100])
def test_graph_with_a_small_budget_still_shows_every_top_level_module(budget):
    nodes = _transformer_step_nodes()
    view = graph_view(nodes, node_budget=budget, svg=False)
    for k in range(8):
        assert f"model.layers.{k}" in view.dot
