"""The captured graph as a Graphviz picture: report["graph"]["nodes"] -> DOT -> SVG.

Nodes are labelled by their op and result shape/dtype, colored by role, and grouped into
clusters by nn.Module path (nested paths nest). See Note [collapsing big graphs] for how a graph
of thousands of nodes stays readable. Plain data in, text out: nothing here imports torch.

    view = graph_view(report["graph"]["nodes"])
    view.svg or view.dot      # the picture, or the DOT text when `dot` is not installed
"""
from __future__ import annotations

import heapq
import math
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ROLE_COLORS", "GraphView", "graph_to_dot", "graph_view", "heat_fills", "module_paths",
           "render_svg", "node_label", "node_tooltip"]

# fill colors per node role; dark text on them stays readable in light and dark themes
# because the picture keeps its own white background
ROLE_COLORS: dict[str, str] = {
    "param": "#fde68a",
    "buffer": "#fed7aa",
    "input": "#bfdbfe",
    "constant": "#e9d5ff",
    "compute": "#dcfce7",
    "gradient": "#fbcfe8",
    "collective": "#fca5a5",  # all-reduce / all-gather / reduce-scatter of tensor parallelism
    "output": "#d1d5db",
}
_GROUP_COLOR = "#e5e7eb"
_UNKNOWN_COLOR = "#ffffff"
_HIGHLIGHT = 'color="#dc2626", penwidth=4'

DOT_INSTALL_HINT = ("install Graphviz for a static picture: `apt-get install graphviz`, "
                    "`brew install graphviz` or `conda install -c conda-forge graphviz`")

# Note [collapsing big graphs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A transformer's training step is thousands of ATen nodes; dot lays that out in minutes as an
# unreadable hairball. Above `node_budget` nodes we draw module clusters as one summary node
# ("layers.3.attn — 212 ops") and keep one edge per pair of drawn items. Which clusters stay
# open is chosen greedily: start with every top-level module collapsed, then repeatedly open
# the biggest collapsed cluster whose contents (its own nodes plus one node per child module)
# still fit in the budget. Modules in `expand`, and the modules holding a highlighted node (an
# invariant violation must be visible), are always open, even past the budget. Nodes outside
# any module (module "") are always drawn one by one: a graph with no module structure is
# drawn whole, whatever its size, and GraphView says so.
#
# Note [dot layout time]
# ~~~~~~~~~~~~~~~~~~~~~~
# dot's cost grows with edges that span many ranks (each becomes a chain of virtual nodes): a
# node feeding a hundred nodes down a long chain in an opened cluster takes dot minutes at
# default settings. Big drawings therefore bound network simplex (nslimit, nslimit1) and
# crossing minimisation (mclimit), which keeps ATen-shaped graphs of a few hundred nodes
# under a second; render_svg also has a timeout, after which the DOT text is shown instead.


@dataclass(frozen=True)
class GraphView:
    """One drawing of a graph: the DOT text, the SVG when `dot` is installed, and what was
    collapsed to get there."""

    dot: str
    svg: str | None  # None: no `dot` binary (render in the browser or read the DOT text)
    total_nodes: int  # nodes in the captured graph
    drawn_nodes: int  # nodes in the picture (summary nodes count one each)
    collapsed: tuple[tuple[str, int], ...]  # (module path, ops inside) drawn as one node
    modules: tuple[str, ...]  # every module path (cluster) of the graph, outermost first
    dot_seconds: float  # building the DOT text
    layout_seconds: float | None  # running dot; None when it did not run
    note: str | None = None  # why there is no SVG (no dot binary, layout timed out)
    opened: tuple[str, ...] = ()  # module paths drawn open (as clusters)
    nodes: tuple[dict[str, Any], ...] = ()  # the graph's nodes, for the browser's explorer


def _split_path(path: str) -> list[str]:
    """'layers.0.attn' -> ['layers', 'layers.0', 'layers.0.attn'] (dots inside [...] kept)."""
    if not path:
        return []
    parts, depth, cur = [], 0, ""
    for ch in path:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        if ch == "." and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def module_paths(nodes: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """Every module path of the graph, nested paths included, outermost first.

    >>> module_paths([{"module": "layers.0.attn"}, {"module": ""}])
    ('layers', 'layers.0', 'layers.0.attn')
    """
    seen: dict[str, None] = {}
    for n in nodes:
        for p in _split_path(n.get("module") or ""):
            seen.setdefault(p, None)
    return tuple(sorted(seen, key=lambda p: (len(_split_path(p)), _natural(p))))


def _natural(path: str) -> tuple[tuple[int, int | str], ...]:
    # layers.2 before layers.10
    return tuple((0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", path) if t)


class _Tree:
    """Module paths as a tree: the nodes directly in each, the child modules, the totals."""

    def __init__(self, nodes: Sequence[dict[str, Any]]) -> None:
        self.direct: dict[str, list[dict[str, Any]]] = {"": []}
        self.children: dict[str, list[str]] = {"": []}
        self.count: dict[str, int] = {"": 0}
        for n in nodes:
            module = n.get("module") or ""
            chain = [""] + _split_path(module)
            for parent, child in zip(chain, chain[1:]):
                if child not in self.children:
                    self.children[child] = []
                    self.direct[child] = []
                    self.count[child] = 0
                    self.children[parent].append(child)
            for p in chain:
                self.count[p] += 1
            self.direct[module].append(n)

    def cost_to_open(self, path: str) -> int:
        # opening replaces its summary node by its own nodes and one node per child module
        return len(self.direct[path]) + len(self.children[path]) - 1


def _plan(tree: _Tree, total: int, node_budget: int, forced: set[str]) -> set[str]:
    """The set of module paths drawn open. See Note [collapsing big graphs]."""
    if total <= node_budget:
        return set(tree.children)
    opened = {""}
    drawn = len(tree.direct[""]) + len(tree.children[""])
    for path in sorted(forced, key=lambda p: len(_split_path(p))):
        for p in _split_path(path):
            if p in tree.children and p not in opened:
                opened.add(p)
                drawn += tree.cost_to_open(p)
    heap = [(-tree.count[c], c) for p in opened for c in tree.children[p] if c not in opened]
    heapq.heapify(heap)
    while heap:
        _, path = heapq.heappop(heap)
        cost = tree.cost_to_open(path)
        if drawn + cost > node_budget:
            continue  # drawn only grows: it will not fit later either
        opened.add(path)
        drawn += cost
        for c in tree.children[path]:
            heapq.heappush(heap, (-tree.count[c], c))
    return opened


def _q(s: str) -> str:
    """A DOT quoted string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def short_target(node: dict[str, Any]) -> str:
    """'aten.addmm.default' -> 'aten.addmm'; '<built-in function getitem>' -> 'getitem'."""
    t = str(node.get("target", ""))
    if node.get("op") != "call_function":
        return t
    m = re.fullmatch(r"<built-in function (\w+)>", t)
    if m:
        return m.group(1)
    return t[: -len(".default")] if t.endswith(".default") else t


def node_label(node: dict[str, Any]) -> str:
    """A node's label in the picture: its op, then its shape and dtype."""
    label = short_target(node)
    shape, dtype = node.get("shape"), node.get("dtype")
    if shape is not None or dtype:
        meta = "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else ""
        label += "\n" + " ".join(x for x in (meta, dtype or "") if x)
    return label


def _cluster_id(k: int, path: str) -> str:
    return _q(f"cluster_{k}_" + re.sub(r"\W+", "_", path).strip("_"))


def _group_id(path: str) -> str:
    return _q("module:" + path)


def _fill(n: dict[str, Any]) -> str:
    """A node's own "fill" (the Profile tab colours nodes by time), else its role's colour."""
    return str(n.get("fill") or ROLE_COLORS.get(n.get("role", ""), _UNKNOWN_COLOR))


def heat_fills(seconds: dict[str, float]) -> dict[str, str]:
    """Node name -> a colour from white (no time) to red (the slowest node), for a graph
    coloured by time.

    >>> heat_fills({"a": 2.0, "b": 1.0, "c": 0.0})
    {'a': '#dc2626', 'b': '#ee9292', 'c': '#ffffff'}
    """
    top = max(seconds.values(), default=0.0)
    out = {}
    for name, s in seconds.items():
        f = max(0.0, min(1.0, s / top)) if top > 0 else 0.0
        rgb = [round(255 + (c - 255) * f) for c in (0xdc, 0x26, 0x26)]
        out[name] = "#" + "".join(f"{c:02x}" for c in rgb)
    return out


def graph_to_dot(nodes: Sequence[dict[str, Any]], *, node_budget: int = 400,
                 expand: Iterable[str] = frozenset(),
                 highlight: Iterable[str] = frozenset()) -> str:
    """Graphviz DOT for the captured graph's nodes (report["graph"]["nodes"]).

    Above `node_budget` nodes, module clusters not in `expand` are collapsed into one node
    each (Note [collapsing big graphs]); nodes named in `highlight` get a thick red outline.

    >>> dot = graph_to_dot([{"name": "x", "op": "placeholder", "target": "x", "args": [],
    ...                      "shape": [2], "dtype": "float32", "role": "input", "module": ""}])
    >>> dot.startswith("digraph")
    True
    """
    return _build(nodes, node_budget, set(expand), set(highlight))[0]


def _build(nodes: Sequence[dict[str, Any]], node_budget: int, expand: set[str],
           highlight: set[str]) -> tuple[str, int, tuple[tuple[str, int], ...], set[str]]:
    tree = _Tree(nodes)
    forced = set(expand) | {n.get("module") or "" for n in nodes if n.get("name") in highlight}
    opened = _plan(tree, len(nodes), node_budget, forced - {""})

    # each node is drawn as itself, or as the summary node of its outermost collapsed module
    rep: dict[str, str] = {}
    for n in nodes:
        r = _q("n:" + str(n["name"]))
        for p in _split_path(n.get("module") or ""):
            if p not in opened:
                r = _group_id(p)
                break
        rep[str(n["name"])] = r

    lines = ["digraph G {",
             '  graph [rankdir=TB, bgcolor="white", fontname="Helvetica", fontsize=11, '
             "newrank=true];",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, '
             'color="#6b7280", fontcolor="#111827"];',
             '  edge [color="#6b7280", arrowsize=0.6];']
    collapsed: list[tuple[str, int]] = []
    drawn = 0
    clusters = 0

    def write(path: str, indent: str) -> None:
        nonlocal drawn, clusters
        for n in tree.direct[path]:
            attrs = [f"label={_q(node_label(n))}",
                     f'fillcolor="{_fill(n)}"',
                     f"tooltip={_q(node_tooltip(n))}"]
            if n.get("name") in highlight:
                attrs.append(_HIGHLIGHT)
            lines.append(f"{indent}{rep[str(n['name'])]} [{', '.join(attrs)}];")
            drawn += 1
        for c in tree.children[path]:
            if c in opened:
                clusters += 1
                lines.append(f"{indent}subgraph {_cluster_id(clusters, c)} {{")
                lines.append(f'{indent}  label={_q(c)}; style="rounded,dashed"; '
                             'color="#9ca3af"; fontcolor="#374151";')
                write(c, indent + "  ")
                lines.append(f"{indent}}}")
            else:
                lines.append(f"{indent}{_group_id(c)} [label={_q(f'{c} — {tree.count[c]} ops')}, "
                             f'shape=box3d, style=filled, fillcolor="{_GROUP_COLOR}", '
                             f"tooltip={_q(f'module {c}: {tree.count[c]} nodes, collapsed')}];")
                collapsed.append((c, tree.count[c]))
                drawn += 1

    write("", "  ")
    if drawn > 150:  # Note [dot layout time]
        lines.insert(2, "  graph [nslimit=2, nslimit1=2, mclimit=0.5];")
    lines += _edge_lines(nodes, rep)
    lines.append("}")
    shown = {p for p in opened if all(q in opened for q in _split_path(p))} - {""}
    return "\n".join(lines) + "\n", drawn, tuple(collapsed), shown


def _edge_lines(nodes: Sequence[dict[str, Any]], rep: dict[str, str]) -> list[str]:
    """One edge per pair of drawn items; its weight shows how many graph edges it stands for."""
    lines = []
    edges: dict[tuple[str, str], int] = {}
    for n in nodes:
        dst = rep[str(n["name"])]
        for a in n.get("args") or ():
            src = rep.get(str(a))
            if src is None or src == dst:
                continue  # an arg outside the graph, or an edge inside a collapsed module
            edges[(src, dst)] = edges.get((src, dst), 0) + 1
    for (src, dst), k in edges.items():
        if k > 1:  # one edge per pair of drawn items; its weight shows how many it stands for
            lines.append(f'  {src} -> {dst} [penwidth={min(1 + math.log2(k), 5):.1f}, '
                         f'tooltip="{k} edges"];')
        else:
            lines.append(f"  {src} -> {dst};")
    return lines


def node_tooltip(n: dict[str, Any]) -> str:
    """A node's tooltip: name, role, target, module, user source line."""
    parts = [f"{n.get('name')} ({n.get('role', '?')})", str(n.get("target", ""))]
    if n.get("module"):
        parts.append(f"module {n['module']}")
    if n.get("stack"):
        parts.append(str(n["stack"]))
    return "\n".join(parts)


def render_svg(dot: str, *, timeout: float = 60.0) -> str | None:
    """Lay out DOT text with the Graphviz `dot` binary into an inline <svg> element; None when
    `dot` is not installed (see DOT_INSTALL_HINT). Raises subprocess.TimeoutExpired when the
    layout takes longer than `timeout` seconds (Note [dot layout time]).

    >>> svg = render_svg("digraph { a -> b }")
    >>> svg is None or svg.startswith("<svg")
    True
    """
    exe = shutil.which("dot")
    if exe is None:
        return None
    # the dot binary directly, not graphviz.Source.pipe: that has no timeout, and a layout
    # that runs for minutes must not hang the notebook
    proc = subprocess.run([exe, "-Tsvg"], input=dot.encode("utf-8"), capture_output=True,
                          timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"graphviz dot failed ({proc.returncode}): "
                           f"{proc.stderr.decode('utf-8', 'replace').strip()[:500]}")
    svg = proc.stdout.decode("utf-8")
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def graph_view(nodes: Sequence[dict[str, Any]], *, node_budget: int = 400,
               expand: Iterable[str] = frozenset(), highlight: Iterable[str] = frozenset(),
               svg: bool = True, timeout: float = 60.0) -> GraphView:
    """DOT for the nodes, laid out to SVG when possible, with the time each step took.

    >>> graph_view([], svg=False).drawn_nodes
    0
    """
    t0 = time.perf_counter()
    dot, drawn, collapsed, opened = _build(nodes, node_budget, set(expand), set(highlight))
    t1 = time.perf_counter()
    picture, note = None, None
    if svg:
        try:
            picture = render_svg(dot, timeout=timeout)
        except subprocess.TimeoutExpired:
            note = (f"dot took longer than {timeout:g} s to lay out {drawn} nodes: showing the "
                    "DOT text; open fewer modules or lower the node budget")
        if picture is None and note is None:
            note = "no `dot` binary: " + DOT_INSTALL_HINT
    t2 = time.perf_counter()
    return GraphView(dot=dot, svg=picture, total_nodes=len(nodes), drawn_nodes=drawn,
                     collapsed=collapsed, modules=module_paths(nodes), dot_seconds=t1 - t0,
                     layout_seconds=(t2 - t1) if picture is not None else None, note=note,
                     opened=tuple(p for p in module_paths(nodes) if p in opened),
                     nodes=tuple(nodes))
