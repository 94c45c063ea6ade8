"""graph_to_dot / render_svg on recorded and hand-made graphs (no torch)."""
from __future__ import annotations

import re
import shutil
import time

import pytest
from viewer_data import layered_graph, node, node_count

from precompile_nb.viewers import graph as graph_mod
from precompile_nb.viewers.graph import ROLE_COLORS, graph_to_dot, graph_view, render_svg

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="needs the Graphviz `dot` binary (apt-get install graphviz)")


def cluster_depths(dot: str) -> dict[str, int]:
    """Label of each cluster -> how deep it is nested (1 = top level)."""
    depth, out = 0, {}
    pending = None
    for line in dot.splitlines():
        s = line.strip()
        if s.startswith('subgraph "cluster_'):
            depth += 1
            pending = depth
        elif pending is not None and s.startswith("label="):
            out[re.match(r'label="([^"]*)"', s).group(1)] = pending
            pending = None
        elif s == "}":
            depth -= 1
    return out


def test_small_graph_draws_every_node_with_its_op_shape_and_dtype(report_inductor):
    nodes = report_inductor["graph"]["nodes"]
    dot = graph_to_dot(nodes)
    assert node_count(dot) == len(nodes)
    assert '"n:addmm" [label="aten.addmm\\n[5, 16] float32"' in dot
    assert '"n:getitem" [label="getitem\\n[5, 16] float32"' in dot  # builtin getitem, shortened
    x = next(n["name"] for n in nodes if n["op"] == "placeholder" and n["target"] == "x")
    assert f'"n:{x}" [label="x\\n[5, 8] float32"' in dot  # inputs are labelled by their name


def test_nodes_are_filled_with_the_color_of_their_role():
    nodes = [node(f"n_{role}", role=role) for role in ROLE_COLORS]
    dot = graph_to_dot(nodes)
    for role, color in ROLE_COLORS.items():
        line = next(ln for ln in dot.splitlines() if ln.strip().startswith(f'"n:n_{role}"'))
        assert f'fillcolor="{color}"' in line
    assert len(set(ROLE_COLORS.values())) == len(ROLE_COLORS)  # roles are told apart


def test_each_module_path_is_a_cluster_and_nested_paths_nest():
    nodes = [node("a", module="enc.0"), node("b", args=["a"], module="enc.1"),
             node("c", args=["b"], module="enc.1.attn"), node("d", args=["c"], module="dec"),
             node("e", args=["d"])]
    dot = graph_to_dot(nodes)
    assert cluster_depths(dot) == {"enc": 1, "enc.0": 2, "enc.1": 2, "enc.1.attn": 3, "dec": 1}
    assert node_count(dot) == 5


def test_graph_of_5000_nodes_in_40_modules_collapses_under_the_budget_and_renders():
    nodes = layered_graph(40, 124)
    assert len(nodes) == 5002
    t0 = time.perf_counter()
    view = graph_view(nodes, node_budget=400, svg=shutil.which("dot") is not None)
    seconds = time.perf_counter() - t0
    print(f"\n5002-node graph: DOT in {view.dot_seconds * 1000:.1f} ms, dot layout in "
          f"{view.layout_seconds if view.layout_seconds is None else round(view.layout_seconds, 2)}"
          f" s, {view.drawn_nodes} nodes drawn, total {seconds:.2f} s")
    assert node_count(view.dot) == view.drawn_nodes <= 400
    # every op is accounted for: drawn one by one, or inside a collapsed module
    drawn_ops = view.drawn_nodes - len(view.collapsed)
    assert drawn_ops + sum(k for _, k in view.collapsed) == 5002
    assert len(view.collapsed) >= 1
    for path, ops in view.collapsed:
        assert f'"module:{path}" [label="{path} — {ops} ops"' in view.dot
    edges = [ln.strip() for ln in view.dot.splitlines() if "->" in ln]
    assert len(edges) == len(set(edges))  # one edge per pair of drawn items
    if view.svg is not None:
        assert view.svg.startswith("<svg") and view.svg.count('class="node"') == view.drawn_nodes


def test_a_graph_over_budget_opens_the_biggest_modules_that_still_fit():
    # 2 modules of 300 ops, 20 of 5: the small ones fit the budget opened, the big ones don't
    nodes = layered_graph(2, 300, prefix="big") + layered_graph(20, 5, prefix="small")
    for n in nodes[len(layered_graph(2, 300, prefix="big")):]:
        n["name"] = "s_" + n["name"]
        n["args"] = ["s_" + a for a in n["args"]]
    view = graph_view(nodes, node_budget=200, svg=False)
    assert sorted(p for p, _ in view.collapsed) == ["big.0", "big.1"]
    assert view.drawn_nodes <= 200


def test_modules_to_expand_are_drawn_node_by_node_even_over_budget():
    nodes = layered_graph(40, 124)
    dot = graph_to_dot(nodes, node_budget=400, expand={"layers.3"})
    assert '"module:layers.3"' not in dot
    assert all(f'"n:op3_{k}" [' in dot for k in range(124))
    assert '"module:layers.4"' in dot


def test_highlighted_node_gets_a_red_outline_and_its_collapsed_module_opens():
    nodes = layered_graph(40, 124)
    dot = graph_to_dot(nodes, node_budget=400, highlight={"op17_5"})
    line = next(ln for ln in dot.splitlines() if ln.strip().startswith('"n:op17_5" ['))
    assert 'color="#dc2626", penwidth=4' in line
    others = [ln for ln in dot.splitlines() if "penwidth=4" in ln]
    assert others == [line]


def test_names_with_quotes_and_backslashes_stay_valid_dot():
    nodes = [node('we"ird\\name', target='x"y', op="placeholder", role="input"),
             node("b", args=['we"ird\\name'])]
    dot = graph_to_dot(nodes)
    assert '"n:we\\"ird\\\\name"' in dot
    if shutil.which("dot"):
        assert render_svg(dot).startswith("<svg")


def test_render_svg_returns_none_without_the_dot_binary(monkeypatch):
    monkeypatch.setattr(graph_mod.shutil, "which", lambda name: None)
    assert render_svg("digraph { a -> b }") is None
    view = graph_view([node("a")])
    assert view.svg is None and view.layout_seconds is None
    assert "apt-get install graphviz" in view.note


def test_a_layout_that_times_out_shows_the_dot_text_and_says_why(monkeypatch):
    def slow(*args, timeout=None, **kwargs):
        raise graph_mod.subprocess.TimeoutExpired(args[0], timeout)

    monkeypatch.setattr(graph_mod.shutil, "which", lambda name: "/usr/bin/dot")
    monkeypatch.setattr(graph_mod.subprocess, "run", slow)
    view = graph_view(layered_graph(3, 5), timeout=0.5)
    assert view.svg is None and "longer than 0.5 s" in view.note
    assert view.dot.startswith("digraph")


@needs_dot
def test_render_svg_lays_out_the_recorded_graph(report_eager):
    view = graph_view(report_eager["graph"]["nodes"])
    assert view.svg.startswith("<svg") and "</svg>" in view.svg
    assert view.svg.count('class="node"') == len(report_eager["graph"]["nodes"])
    # dot ran, and the viewer says so: the layout's time is recorded and shown
    assert isinstance(view.layout_seconds, float)
    from precompile_nb.viewers._common import graph_block
    assert "laid out by dot in" in graph_block(view, "g", node_budget=1000)
