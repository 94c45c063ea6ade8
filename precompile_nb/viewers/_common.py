"""Pieces every viewer shares: the stylesheet (light and dark), escaping, tables, highlighted
source with line anchors, and the Graph block. Plain data in, HTML text out."""
from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from .graph import ROLE_COLORS, GraphView

# Where the browser fetches Graphviz-in-WebAssembly when no static SVG was made
# (see Note [graph without dot]).
WASM_GRAPHVIZ_URL = "https://cdn.jsdelivr.net/npm/@hpcc-js/wasm@2/dist/index.js"


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
# With the `dot` binary the Graph tab embeds a static SVG (works offline, in emails, on
# GitHub). Without it, the DOT text is embedded and a <script type="module"> imports
# @hpcc-js/wasm (Graphviz compiled to WebAssembly) from a CDN to lay it out in the browser;
# that only happens when the page is opened in a browser with network access and scripts
# allowed. The DOT text is always in a <details> below the picture, so nothing is lost when
# neither works, and the page says which path was taken.

def graph_block(view: GraphView, uid: str, *, node_budget: int) -> str:
    """The picture (SVG, or DOT laid out in the browser), its statistics, the legend and the
    DOT text. See Note [graph without dot]."""
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
    if view.svg is not None:
        # dot numbers its ids node1, edge1, ... in every SVG: scope them to this picture
        svg = view.svg.replace(' id="', f' id="{uid}-')
        parts.append(f'<div class="pcnb-svg">{svg}</div>')
    else:
        parts.append(
            f'<p class="pcnb-muted">{esc(view.note or "no static picture")}. The picture below '
            "is laid out in your browser by Graphviz-WebAssembly when this page is opened with "
            "network access; the DOT text is below either way.</p>"
            f'<div class="pcnb-svg pcnb-wasm" id="{uid}-gv"></div>'
            + _wasm_script(uid))
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


def _wasm_script(uid: str) -> str:
    ids = json.dumps({"host": f"{uid}-gv", "dot": f"{uid}-dot"})
    return (
        '<script type="module">\n'
        "// Graphviz compiled to WebAssembly (@hpcc-js/wasm), fetched from a CDN only when this\n"
        "// page is opened in a browser with network access; the DOT text stays the fallback.\n"
        f"const ids = {ids};\n"
        "const host = document.getElementById(ids.host);\n"
        "const src = document.getElementById(ids.dot);\n"
        "if (host && src) {\n"
        f'  import("{WASM_GRAPHVIZ_URL}")\n'
        "    .then((m) => m.Graphviz.load())\n"
        '    .then((gv) => { host.innerHTML = gv.layout(src.textContent, "svg", "dot"); })\n'
        "    .catch((e) => { host.textContent = 'Graphviz-WebAssembly did not load (' + e +\n"
        "                    '): read the DOT source below.'; });\n"
        "}\n"
        "</script>")


def wrap(inner: str, uid: str) -> str:
    """One self-contained fragment: its stylesheet and its content under div.pcnb."""
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
.pcnb .pcnb-tin-invariants:checked ~ .pcnb-p-invariants { display: block; }
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
""")
