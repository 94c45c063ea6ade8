"""Pieces every viewer shares: the stylesheet (light and dark), escaping, tables, highlighted
source with line anchors, and the Graph block. Plain data in, HTML text out."""
from __future__ import annotations

import functools
import hashlib
import html
import json
from importlib import resources
from collections.abc import Iterable, Sequence
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from .graph import ROLE_COLORS, GraphView, node_label, node_tooltip, short_target

def esc(v: Any) -> str:
    """Any value as HTML-escaped text (every user string goes through here)."""
    return html.escape("" if v is None else str(v), quote=True)


def make_uid(data: Any, prefix: str = "pcnb") -> str:
    """A stable id prefix for one rendered object: anchors and tab names of two reports on
    one notebook page must not collide, and the same report renders the same HTML."""
    blob = json.dumps(data, sort_keys=True, default=str).encode("utf-8")
    return f"{prefix}-{hashlib.sha256(blob).hexdigest()[:10]}"


def human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def human_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def table(headers: Sequence[str] | None, rows: Iterable[Sequence[str]], *,
          cls: str = "", row_classes: Sequence[str] | None = None) -> str:
    """An HTML table (no header row when `headers` is None); `rows` hold cells that are
    ALREADY HTML (escape before); `row_classes` gives each row a class ("" for none)."""
    head = ("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead>"
            if headers is not None else "")
    body = []
    for k, r in enumerate(rows):
        rc = row_classes[k] if row_classes is not None else ""
        body.append((f'<tr class="{rc}">' if rc else "<tr>")
                    + "".join(_cell(c) for c in r) + "</tr>")
    return f'<table class="pcnb-table {cls}">{head}<tbody>{"".join(body)}</tbody></table>'



def _cell(c: Any) -> str:
    # a (html, class) pair marks a cell (mismatch, status)
    if isinstance(c, tuple):
        return f'<td class="{c[1]}">{c[0]}</td>'
    return f"<td>{c}</td>"


def yes(v: Any) -> str:
    return '<span class="pcnb-yes">yes</span>' if v else '<span class="pcnb-no">–</span>'


def highlighted_source(code: str, anchor: str, *, hl_lines: Iterable[int] = (),
                       linenostart: int = 1) -> str:
    """Python source highlighted by Pygments with line numbers; line N gets id `{anchor}-N`
    (Pygments' linespans) so links and the jump list can point at it."""
    fmt = HtmlFormatter(linenos="inline", linespans=anchor, anchorlinenos=True,
                        hl_lines=sorted(set(hl_lines)), cssclass="pcnb-hl", wrapcode=True,
                        linenostart=linenostart)
    return highlight(code, PythonLexer(), fmt)


# Note [graph without dot]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The Graph tab draws in the browser with Graphviz compiled to WebAssembly: Viz.js's
# standalone build (static/viz-global.js, wasm inlined, MIT; Graphviz itself EPL-1.0, see
# static/LICENSE-viz-js.txt), inlined in the output, so a saved page, an nbconvert export and a
# JupyterLab output need neither `dot` nor a network. The ~1.3 MB script is inlined once per
# output and evaluated once per page (window.__pcnbViz), whatever the number of graphs. The
# explorer script (static/graph_explorer.js, window.__pcnbGX) builds DOT from the nodes again
# whenever a module is opened or closed, so the kernel is never asked to redraw. When `dot` is
# installed its SVG is still embedded as the first picture: GitHub, email clients and other
# viewers that run no script then show the graph too (search and the links need the script).
# The DOT text is always in a <details> below the picture.

STATIC = "static"
# where graph_block wants the scripts; wrap() puts them at the first and drops the others, so
# that an output holding two graphs (a report and its violation) carries them once
GRAPH_SCRIPTS_MARK = "<!--pcnb-graph-scripts-->"


@functools.lru_cache(maxsize=None)
def static_text(name: str) -> str:
    """A file vendored in precompile_nb/viewers/static/ (package data)."""
    return (resources.files(__package__) / STATIC / name).read_text(encoding="utf-8")


def graph_scripts() -> str:
    """The in-browser Graphviz and the explorer, each evaluated once per page.
    See Note [graph without dot]."""
    viz = static_text("viz-global.js")
    return (
        "<script>/* Viz.js 3.31.0 (MIT; Graphviz EPL-1.0, Expat MIT), vendored in "
        "precompile_nb/viewers/static: evaluated once per page */\n"
        "if (!window.__pcnbViz) { (function (define, exports, module) { var prev = window.Viz;\n"
        + viz +
        "\nwindow.__pcnbViz = window.Viz; window.Viz = prev; }).call(window); }\n</script>"
        f"<script>{static_text('graph_explorer.js')}</script>")


def _json_script(data: Any, cls: str) -> str:
    # "<" escaped: no "</script>" or "<!--" can end the element early
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" class="{cls}">{text}</script>'


def _explorer_data(view: GraphView, kernels: Sequence[dict[str, Any]],
                   node_budget: int) -> dict[str, Any]:
    nodes = [{"name": str(n.get("name")), "target": short_target(n),
              "shape": ("[" + ", ".join(str(d) for d in n["shape"]) + "]"
                        if n.get("shape") is not None else ""),
              "dtype": n.get("dtype") or "", "role": n.get("role") or "",
              "module": n.get("module") or "", "stack": n.get("stack") or "",
              "args": [str(a) for a in n.get("args") or ()],
              "label": node_label(n), "tooltip": node_tooltip(n),
              "fill": n.get("fill") or ""} for n in view.nodes]
    return {"nodes": nodes, "kernels": list(kernels), "opened": list(view.opened),
            "budget": node_budget, "colors": ROLE_COLORS}


def graph_block(view: GraphView, uid: str, *, node_budget: int,
                kernels: Sequence[dict[str, Any]] = ()) -> str:
    """The picture, a search box, the side panel (a node's kernels, a kernel's nodes), the
    statistics, the legend and the DOT text. `kernels` are {name, kind, line, nodes, anchor,
    src} records (anchor: the id of its line in the Source tab, or None). See Note [graph
    without dot].

    >>> from precompile_nb.viewers.graph import graph_view
    >>> "pcnb-gx-data" in graph_block(graph_view([], svg=False), "g", node_budget=10)
    True
    """
    stats = [f"{view.total_nodes} nodes in the graph, {view.drawn_nodes} drawn"]
    if view.collapsed:
        stats.append(f"{len(view.collapsed)} module(s) collapsed to stay under the budget of "
                     f"{node_budget} nodes")
    elif view.total_nodes > node_budget:
        stats.append(f"over the budget of {node_budget} nodes, but there is no module "
                     "structure to collapse: drawn whole")
    stats.append(f"DOT built in {human_seconds(view.dot_seconds)}")
    if view.layout_seconds is not None:
        stats.append(f"laid out by dot in {human_seconds(view.layout_seconds)}")
    parts = [f'<p class="pcnb-muted pcnb-graph-stats">{esc("; ".join(stats))}</p>', _legend()]
    picture = ""
    if view.svg is not None:
        # dot numbers its ids node1, edge1, ... in every SVG: scope them to this picture
        picture = view.svg.replace(' id="', f' id="{uid}-')
    else:
        parts.append(f'<p class="pcnb-muted pcnb-gx-note">{esc(view.note or "no static picture")}'
                     ". The graph is laid out here by the Graphviz bundled in this page "
                     "(WebAssembly, no network); if scripts do not run, read the DOT text "
                     "below.</p>")
    help_text = ("click a node for its kernels and source lines, a kernel to outline its "
                 "nodes; click a grey module box to open it, a dashed cluster to close it")
    parts.append(
        f'<div class="pcnb-gx" id="{uid}-gx">'
        '<div class="pcnb-gx-bar"><input type="search" class="pcnb-gx-q" '
        'placeholder="search: op, node, module, shape, kernel" aria-label="search the graph">'
        '<button type="button" data-pcnb-act="collapse-all">collapse all</button>'
        '<button type="button" data-pcnb-act="reset">reset</button>'
        f'<span class="pcnb-muted pcnb-gx-status">{esc(help_text)}</span></div>'
        '<div class="pcnb-gx-main">'
        f'<div class="pcnb-svg pcnb-gx-picture" id="{uid}-gv">{picture}</div>'
        '<div class="pcnb-gx-side"></div></div>'
        + _json_script(_explorer_data(view, kernels, node_budget), "pcnb-gx-data")
        + GRAPH_SCRIPTS_MARK
        + "<script>(function (s) { var root = (s && s.closest && s.closest('.pcnb-gx')) || "
          f"document.getElementById({json.dumps(uid + '-gx')}); "
          "if (window.__pcnbGX && root) window.__pcnbGX.wire(root); })"
          "(document.currentScript);</script></div>")
    if view.collapsed:
        rows = [(esc(p), str(k)) for p, k in view.collapsed]
        parts.append("<details><summary>Collapsed modules</summary>"
                     + table(["module", "ops"], rows) + "</details>")
    parts.append(f"<details><summary>DOT source ({view.dot.count(chr(10))} lines)</summary>"
                 f'<pre class="pcnb-dot" id="{uid}-dot">{esc(view.dot)}</pre></details>')
    return "".join(parts)


def _legend() -> str:
    chips = "".join(f'<span class="pcnb-chip" style="background:{c}">{esc(r)}</span>'
                    for r, c in ROLE_COLORS.items())
    return (f'<p class="pcnb-legend">{chips}<span class="pcnb-chip pcnb-chip-hl">'
            "highlighted</span></p>")


def wrap(inner: str, uid: str) -> str:
    """One self-contained fragment: its stylesheet and its content under div.pcnb, with the
    graph scripts once if it holds a graph (Note [graph without dot])."""
    if GRAPH_SCRIPTS_MARK in inner:
        inner = inner.replace(GRAPH_SCRIPTS_MARK, graph_scripts(), 1)
        inner = inner.replace(GRAPH_SCRIPTS_MARK, "")
    return f'<div class="pcnb" id="{uid}"><style>{CSS}</style>{inner}</div>'


_LIGHT = """
  --pcnb-fg: var(--jp-content-font-color1, #1f2328);
  --pcnb-fg2: var(--jp-content-font-color2, #57606a);
  --pcnb-bg: var(--jp-layout-color0, #ffffff);
  --pcnb-bg2: var(--jp-layout-color2, #f6f8fa);
  --pcnb-border: var(--jp-border-color2, #d0d7de);
  --pcnb-accent: var(--jp-brand-color1, #0969da);
  --pcnb-kw: #cf222e; --pcnb-str: #0a3069; --pcnb-com: #6e7781; --pcnb-num: #0550ae;
  --pcnb-fn: #8250df; --pcnb-bi: #953800; --pcnb-op: #24292f;
  --pcnb-hlline: #fff8c5; --pcnb-flash: #ffd33d66;
  --pcnb-ok: #1a7f37; --pcnb-ok-bg: #dafbe1; --pcnb-warn: #7d4e00; --pcnb-warn-bg: #fff8c5;
  --pcnb-bad: #a40e26; --pcnb-bad-bg: #ffebe9; --pcnb-na: #57606a; --pcnb-na-bg: #eaeef2;
"""
_DARK = """
  --pcnb-fg: var(--jp-content-font-color1, #e6edf3);
  --pcnb-fg2: var(--jp-content-font-color2, #9198a1);
  --pcnb-bg: var(--jp-layout-color0, #0d1117);
  --pcnb-bg2: var(--jp-layout-color2, #161b22);
  --pcnb-border: var(--jp-border-color2, #30363d);
  --pcnb-accent: var(--jp-brand-color1, #4493f8);
  --pcnb-kw: #ff7b72; --pcnb-str: #a5d6ff; --pcnb-com: #8b949e; --pcnb-num: #79c0ff;
  --pcnb-fn: #d2a8ff; --pcnb-bi: #ffa657; --pcnb-op: #e6edf3;
  --pcnb-hlline: #bb800926; --pcnb-flash: #bb800966;
  --pcnb-ok: #3fb950; --pcnb-ok-bg: #2ea04326; --pcnb-warn: #d29922; --pcnb-warn-bg: #bb800926;
  --pcnb-bad: #ff7b72; --pcnb-bad-bg: #f8514926; --pcnb-na: #9198a1; --pcnb-na-bg: #6e768133;
"""
# Light by default. Dark when JupyterLab's theme is dark (body[data-jp-theme-light=false]),
# in old .jp-Theme-dark and VS Code dark, and in a standalone page when the OS prefers dark
# (not inside JupyterLab, whose own theme wins there).
CSS = (
    ".pcnb {" + _LIGHT + "}\n"
    'body[data-jp-theme-light="false"] .pcnb, .jp-Theme-dark .pcnb, body.vscode-dark .pcnb, '
    ".pcnb.pcnb-dark {" + _DARK + "}\n"
    "@media (prefers-color-scheme: dark) { body:not([data-jp-theme-light]):not(.vscode-light) "
    ".pcnb:not(.pcnb-light) {" + _DARK + "} }\n"
    """
.pcnb { color: var(--pcnb-fg); background: var(--pcnb-bg); font-family: var(--jp-ui-font-family,
  -apple-system, "Segoe UI", Helvetica, Arial, sans-serif); font-size: 13px; line-height: 1.45; }
.pcnb h3 { margin: 4px 0 8px 0; font-size: 15px; font-weight: 600; }
.pcnb h4 { margin: 14px 0 6px 0; font-size: 13px; font-weight: 600; }
.pcnb .pcnb-hl code { background: transparent; padding: 0; }
div.pcnb pre { font-size: 12px; }
.widget-tab-contents .pcnb { --pcnb-bg: var(--jp-layout-color1, transparent); }
.pcnb code, .pcnb pre { font-family: var(--jp-code-font-family, SFMono-Regular, Menlo, Consolas,
  monospace); font-size: 12px; }
.pcnb a { color: var(--pcnb-accent); text-decoration: none; }
.pcnb a:hover { text-decoration: underline; }
.pcnb .pcnb-muted { color: var(--pcnb-fg2); }
.pcnb .pcnb-table { border-collapse: collapse; margin: 4px 0 8px 0; }
.pcnb .pcnb-table th, .pcnb .pcnb-table td { border: 1px solid var(--pcnb-border);
  padding: 2px 8px; text-align: left; vertical-align: top; color: var(--pcnb-fg);
  background: var(--pcnb-bg); }
.pcnb .pcnb-table th { background: var(--pcnb-bg2); font-weight: 600; }
.pcnb .pcnb-yes { color: var(--pcnb-ok); font-weight: 600; }
.pcnb .pcnb-no { color: var(--pcnb-fg2); }
.pcnb .pcnb-dyn { color: var(--pcnb-warn); background: var(--pcnb-warn-bg); border-radius: 3px;
  padding: 0 3px; font-weight: 600; }
.pcnb .pcnb-badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px;
  font-weight: 600; }
.pcnb .pcnb-st-enforced { color: var(--pcnb-ok); background: var(--pcnb-ok-bg); }
.pcnb .pcnb-st-caller { color: var(--pcnb-warn); background: var(--pcnb-warn-bg); }
.pcnb .pcnb-st-na { color: var(--pcnb-na); background: var(--pcnb-na-bg); }
.pcnb .pcnb-st-violated { color: var(--pcnb-bad); background: var(--pcnb-bad-bg); }
.pcnb tr.pcnb-row-violated td { background: var(--pcnb-bad-bg); }
.pcnb td.pcnb-mismatch { color: var(--pcnb-bad); background: var(--pcnb-bad-bg);
  font-weight: 600; }
.pcnb tr.pcnb-mismatch td { background: var(--pcnb-bad-bg); }
.pcnb span.pcnb-mismatch { color: var(--pcnb-bad); font-weight: 600; }
.pcnb .pcnb-bar { display: inline-block; height: 8px; background: var(--pcnb-accent);
  border-radius: 2px; vertical-align: middle; }
.pcnb .pcnb-tabin { position: absolute; opacity: 0; pointer-events: none; }
.pcnb .pcnb-tablabel { display: inline-block; padding: 4px 14px; margin-right: 2px;
  cursor: pointer; border: 1px solid var(--pcnb-border); border-bottom: none;
  border-radius: 6px 6px 0 0; background: var(--pcnb-bg2); color: var(--pcnb-fg2); }
.pcnb .pcnb-tabin:checked + .pcnb-tablabel { background: var(--pcnb-bg); color: var(--pcnb-fg);
  font-weight: 600; }
.pcnb .pcnb-tabin:focus-visible + .pcnb-tablabel { outline: 2px solid var(--pcnb-accent); }
.pcnb .pcnb-panel { display: none; border: 1px solid var(--pcnb-border); padding: 8px 12px; }
.pcnb .pcnb-tin-summary:checked ~ .pcnb-p-summary,
.pcnb .pcnb-tin-source:checked ~ .pcnb-p-source,
.pcnb .pcnb-tin-graph:checked ~ .pcnb-p-graph,
.pcnb .pcnb-tin-kernels:checked ~ .pcnb-p-kernels,
.pcnb .pcnb-tin-invariants:checked ~ .pcnb-p-invariants,
.pcnb .pcnb-tin-profile:checked ~ .pcnb-p-profile { display: block; }
.pcnb .pcnb-jumps { margin: 0 0 6px 0; }
.pcnb .pcnb-jumps a { margin-right: 10px; white-space: nowrap; }
.pcnb .pcnb-src { max-height: 70vh; overflow: auto; border: 1px solid var(--pcnb-border); }
.pcnb .pcnb-hl pre { margin: 0; padding: 4px 0; background: var(--pcnb-bg2);
  color: var(--pcnb-op); }
.pcnb .pcnb-hl .linenos { color: var(--pcnb-fg2); padding: 0 8px 0 6px; user-select: none;
  -webkit-user-select: none; }
.pcnb .pcnb-hl .hll { background: var(--pcnb-hlline); display: block; }
.pcnb .pcnb-hl span[id]:target, .pcnb .pcnb-hl .pcnb-flash { background: var(--pcnb-flash); }
.pcnb .pcnb-hl .k, .pcnb .pcnb-hl .kd, .pcnb .pcnb-hl .kn, .pcnb .pcnb-hl .kc,
.pcnb .pcnb-hl .kr, .pcnb .pcnb-hl .kp, .pcnb .pcnb-hl .kt, .pcnb .pcnb-hl .ow
  { color: var(--pcnb-kw); }
.pcnb .pcnb-hl .s, .pcnb .pcnb-hl .s1, .pcnb .pcnb-hl .s2, .pcnb .pcnb-hl .sd,
.pcnb .pcnb-hl .sa, .pcnb .pcnb-hl .sb, .pcnb .pcnb-hl .sc, .pcnb .pcnb-hl .se,
.pcnb .pcnb-hl .sh, .pcnb .pcnb-hl .si, .pcnb .pcnb-hl .sx, .pcnb .pcnb-hl .sr,
.pcnb .pcnb-hl .ss, .pcnb .pcnb-hl .dl { color: var(--pcnb-str); }
.pcnb .pcnb-hl .c, .pcnb .pcnb-hl .c1, .pcnb .pcnb-hl .cm, .pcnb .pcnb-hl .cs,
.pcnb .pcnb-hl .ch, .pcnb .pcnb-hl .cp, .pcnb .pcnb-hl .cpf { color: var(--pcnb-com);
  font-style: italic; }
.pcnb .pcnb-hl .m, .pcnb .pcnb-hl .mi, .pcnb .pcnb-hl .mf, .pcnb .pcnb-hl .mh,
.pcnb .pcnb-hl .mo, .pcnb .pcnb-hl .mb, .pcnb .pcnb-hl .il { color: var(--pcnb-num); }
.pcnb .pcnb-hl .nf, .pcnb .pcnb-hl .fm, .pcnb .pcnb-hl .nc, .pcnb .pcnb-hl .nd
  { color: var(--pcnb-fn); }
.pcnb .pcnb-hl .nb, .pcnb .pcnb-hl .bp { color: var(--pcnb-bi); }
.pcnb .pcnb-hl .err { color: var(--pcnb-bad); }
.pcnb .pcnb-svg { background: #ffffff; border: 1px solid var(--pcnb-border); border-radius: 4px;
  overflow: auto; max-height: 80vh; padding: 4px; }
.pcnb .pcnb-svg svg { max-width: none; height: auto; }
.pcnb .pcnb-chip { display: inline-block; color: #111827; border: 1px solid #6b7280;
  border-radius: 4px; padding: 0 6px; margin-right: 4px; font-size: 11px; }
.pcnb .pcnb-chip-hl { background: #ffffff; border: 3px solid #dc2626; }
.pcnb pre.pcnb-dot, .pcnb pre.pcnb-message { max-height: 40vh; overflow: auto;
  background: var(--pcnb-bg2); color: var(--pcnb-fg); padding: 6px; white-space: pre; }
.pcnb details { margin: 6px 0; }
.pcnb summary { cursor: pointer; color: var(--pcnb-fg2); }
.pcnb .pcnb-violation { border-left: 4px solid var(--pcnb-bad); padding: 4px 12px;
  background: var(--pcnb-bg); }
.pcnb .pcnb-violation h3 { color: var(--pcnb-bad); }
.pcnb .pcnb-fix { border-left: 4px solid var(--pcnb-ok); padding: 2px 8px;
  background: var(--pcnb-ok-bg); }
.pcnb .pcnb-progress .pcnb-stage { display: inline-block; margin-right: 12px; }
.pcnb .pcnb-spin { display: inline-block; width: 9px; height: 9px; border-radius: 50%;
  border: 2px solid var(--pcnb-border); border-top-color: var(--pcnb-accent);
  animation: pcnb-spin 0.8s linear infinite; vertical-align: -1px; }
@keyframes pcnb-spin { to { transform: rotate(360deg); } }
.pcnb .pcnb-gx-bar { display: flex; gap: 6px; align-items: center; margin: 4px 0; }
.pcnb .pcnb-gx-bar input { width: 22em; padding: 2px 6px; color: var(--pcnb-fg);
  background: var(--pcnb-bg); border: 1px solid var(--pcnb-border); border-radius: 4px; }
.pcnb .pcnb-gx-bar button { padding: 1px 8px; color: var(--pcnb-fg); background: var(--pcnb-bg2);
  border: 1px solid var(--pcnb-border); border-radius: 4px; cursor: pointer; }
.pcnb .pcnb-gx-main { display: flex; gap: 8px; align-items: flex-start; }
.pcnb .pcnb-gx-picture { flex: 1 1 auto; min-width: 0; }
.pcnb .pcnb-gx-side { flex: 0 0 300px; max-height: 80vh; overflow: auto; font-size: 12px;
  border: 1px solid var(--pcnb-border); border-radius: 4px; padding: 4px 8px; }
.pcnb .pcnb-gx-side:empty { display: none; }
.pcnb .pcnb-gx-side ul { margin: 2px 0; padding-left: 16px; }
.pcnb .pcnb-gx-side pre { max-height: 30vh; overflow: auto; background: var(--pcnb-bg2);
  white-space: pre; padding: 4px; }
.pcnb svg.pcnb-gx-searching g.node:not(.pcnb-gx-match):not(.pcnb-gx-match-in) { opacity: 0.3; }
.pcnb g.pcnb-gx-match path, .pcnb g.pcnb-gx-match polygon,
.pcnb g.pcnb-gx-match-in path, .pcnb g.pcnb-gx-match-in polygon
  { stroke: #2563eb; stroke-width: 3px; }
.pcnb g.pcnb-gx-mark path, .pcnb g.pcnb-gx-mark polygon,
.pcnb g.pcnb-gx-mark-in path, .pcnb g.pcnb-gx-mark-in polygon
  { stroke: #dc2626; stroke-width: 4px; }
""")
