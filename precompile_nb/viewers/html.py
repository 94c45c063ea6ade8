"""The precompile report as static HTML: report_data(...) -> one self-contained fragment with
five tabs (Summary, Source, Graph, Kernels, Invariants), or a whole offline page.

Tabs are CSS radio buttons (no script needed to switch them); one small inline script makes
links into the source (kernel names, the section jump list) switch to the Source tab. Every
string from the report is escaped. Nothing here imports torch.

    html = render_report_html(report)         # a notebook output (_repr_html_)
    page = render_report_page(report)         # <!doctype html> page, works offline
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ._common import (esc, graph_block, highlighted_source, human_bytes, human_seconds,
                      make_uid, table, wrap, yes)
from .explorer import offending_nodes, violation_body
from .graph import graph_view, heat_fills

__all__ = ["TABS", "render_report_html", "render_report_page", "summary_html", "source_html",
           "graph_html", "graph_kernels", "kernels_html", "kernel_source_html", "invariants_html",
           "summary_text"]

TABS: tuple[tuple[str, str], ...] = (("summary", "Summary"), ("source", "Source"),
                                     ("graph", "Graph"), ("kernels", "Kernels"),
                                     ("invariants", "Invariants"))


def line_anchor(uid: str, line: int) -> str:
    """The id of python_code line `line` in the Source tab."""
    return f"{uid}-L-{line}"


# ---------------------------------------------------------------------------------------------
# Summary


def _shape(inp: dict[str, Any]) -> str:
    dyn = inp.get("dynamic") or {}
    dims = []
    for d, size in enumerate(inp.get("shape") or []):
        bounds = dyn.get(str(d), dyn.get(d))  # JSON keys are strings; hand-made dicts may not be
        if bounds is None:
            dims.append(esc(size))
            continue
        lo, hi = (list(bounds) + [None, None])[:2]
        rng = f"{'?' if lo is None else lo}..{'∞' if hi is None else hi}"
        dims.append(f'<span class="pcnb-dyn" title="dim {d} is dynamic (unbacked), bounds '
                    f'{esc(rng)}; the example had {esc(size)}">dyn({esc(size)})</span>')
    return "[" + ", ".join(dims) + "]"


def _calling_convention(data: dict[str, Any]) -> str:
    rows = []
    for k, inp in enumerate(data.get("inputs") or []):
        rows.append((esc(inp.get("index", k)), f"<code>{esc(inp.get('where'))}</code>",
                     esc(inp.get("kind")), _shape(inp), esc(inp.get("dtype")),
                     esc(inp.get("device")), esc(inp.get("stride")),
                     yes(inp.get("requires_grad")), yes(inp.get("gets_grad")),
                     yes(inp.get("mutated"))))
    note = ""
    if any(inp.get("dynamic") for inp in data.get("inputs") or []):
        note = ('<p class="pcnb-muted"><span class="pcnb-dyn">dyn(N)</span>: a dynamic '
                "dimension (any size within its bounds; N is the example's size).</p>")
    return ("<h4>Calling convention</h4>"
            '<p class="pcnb-muted">Every tensor the artifact takes, in graph-input order: '
            "model parameters and buffers are read from the model(s) passed at each call.</p>"
            + table(["#", "where", "kind", "shape", "dtype", "device", "stride",
                     "requires grad", "gets grad", "mutated"], rows, cls="pcnb-inputs")
            + note + _dtensors(data))


def _dtensors(data: dict[str, Any]) -> str:
    """Each DTensor input's layout: what the artifact checks on every call besides its local
    shard (the shape column above)."""
    rows = [(f"<code>{esc(inp.get('where'))}</code>",
             esc(", ".join(map(str, d.get("placements") or []))), esc(d.get("mesh")),
             esc(d.get("shape")), esc(", ".join(map(str, d.get("groups") or []))))
            for inp in data.get("inputs") or [] if (d := inp.get("dtensor"))]
    if not rows:
        return ""
    return ("<h4>DTensor inputs</h4>"
            '<p class="pcnb-muted">The shape above is each DTensor\'s local shard, which the '
            "graph computes on; its placements, device mesh and global shape are checked on "
            "every call.</p>"
            + table(["where", "placements", "mesh", "global shape", "process groups"], rows,
                    cls="pcnb-dtensors"))


def _names(items: Iterable[Any], empty: str) -> str:
    items = list(items)
    if not items:
        return f'<span class="pcnb-muted">{esc(empty)}</span>'
    return ", ".join(f"<code>{esc(x)}</code>" for x in items)


def _leaf(leaf: dict[str, Any]) -> str:
    kind = leaf.get("kind")
    if kind == "graph":
        text = f"graph output #{esc(leaf.get('index'))}"
    elif kind == "const":
        text = f"constant <code>{esc(leaf.get('value'))}</code>"
    elif kind == "size":
        text = f"size <code>{esc(leaf.get('text'))}</code>, computed at each call"
    else:
        text = esc(kind)
    # only the fields that say something: a plain tensor output has dtensor None or ""
    rest = ", ".join(f"{esc(k)}={esc(v)}" for k, v in leaf.items()
                     if k not in ("kind", "index", "value", "expr", "symbols", "text")
                     and v not in (None, "", [], {}))
    return text + (f" ({rest})" if rest else "")


def _stages(data: dict[str, Any]) -> str:
    stages = [(str(n), float(s)) for n, s in data.get("stages") or []]
    if not stages:
        return ""
    top = max(s for _, s in stages) or 1.0
    rows = [(esc(n), esc(human_seconds(s)),
             f'<span class="pcnb-bar" style="width:{max(1, round(160 * s / top))}px"></span>')
            for n, s in stages]
    total = sum(s for _, s in stages)
    return ("<h4>Stage timings</h4>" + table(["stage", "time", ""], rows, cls="pcnb-stages")
            + f'<p class="pcnb-muted">total {esc(human_seconds(total))}</p>'
            + _compiled_in(data.get("compiled_in")) + _kernel_builds(data.get("kernel_builds"))
            + _rewrites(data.get("rewrites")))


def _rewrites(rows: list[dict[str, Any]] | None) -> str:
    """What precompile rewrote in the graph before Inductor saw it, node by node."""
    if not rows:
        return ""
    body = table(["rewrite", "node", "op", "module", "shape"],
                 [(esc(r.get("rewrite")), f"<code>{esc(r.get('node'))}</code>",
                   esc(r.get("target")), esc(r.get("module")), esc(r.get("shape") or ""))
                  for r in rows], cls="pcnb-rewrites")
    return (f"<details><summary>Graph rewrites before Inductor ({len(rows)} nodes)</summary>"
            f"{body}</details>")


def _kernel_builds(b: dict[str, Any] | None) -> str:
    """Whether an earlier precompile's whole lowering was taken (Note [a lowering made once]);
    how many C++ build products (a kernel's object files and library, the ISA probes) and
    Triton kernels an earlier precompile had made for this one; how many Triton kernels
    compiled on threads of this process because Inductor's compile workers were still
    starting; how many compile workers were forked for the build."""
    if not b:
        return ""
    out = ""
    if b.get("lowering_reused"):
        out += ('<p class="pcnb-muted">Lowering: taken whole from an earlier precompile of the '
                "same graph with the same settings; Inductor did not run</p>")
    if b.get("reused") or b.get("built"):
        out += (f'<p class="pcnb-muted">C++ builds: {esc(b.get("reused", 0))} taken from '
                f'earlier precompiles, {esc(b.get("built", 0))} compiled</p>')
    if b.get("triton_reused") or b.get("triton_compiled"):
        out += (f'<p class="pcnb-muted">Triton kernels: {esc(b.get("triton_reused", 0))} taken '
                f'from earlier precompiles, {esc(b.get("triton_compiled", 0))} compiled</p>')
    if b.get("on_threads"):
        handed = int(b.get("handed_to_workers", 0))
        out += (f'<p class="pcnb-muted">Triton kernels: {esc(int(b["on_threads"]) - handed)} '
                "compiled on threads of this process while Inductor's compile workers started"
                + (f", {esc(handed)} handed to the workers once they were ready" if handed
                   else "") + "</p>")
    if b.get("forked_workers"):
        out += (f'<p class="pcnb-muted">Triton compile workers: {esc(b["forked_workers"])} '
                "forked from this process for the build, ended with it</p>")
    return out


def _compiled_in(c: dict[str, Any] | None) -> str:
    """How many pieces Inductor compiled the graph in at once, and why that many; whether
    AOTAutograd traced it first, and why (Note [one trace between capture and Inductor])."""
    if not c:
        return ""
    n = c.get("pieces")
    what = (f"Inductor compiled the graph in {esc(n)} pieces at once, in worker processes"
            if isinstance(n, int) and n > 1 else "Inductor compiled the graph in one piece")
    why = esc(c.get("why"))
    workers = "".join(
        f"<br>piece {k}: worker ready after {esc(w[0])} s, its piece compiled at {esc(w[2])} s"
        for k, w in enumerate(c.get("workers") or []) if len(w) == 3)
    aot = c.get("aot_autograd")
    route = ("" if aot is None else
             "<br>handed to Inductor directly: AOTAutograd's two traces skipped" if aot == ""
             else f"<br>through AOTAutograd first: {esc(aot)}")
    views = c.get("views_as_reshapes") or 0
    if views:
        route += (f"<br>lowered again with the graph's {esc(views)} views as reshapes: "
                  "Inductor's decompositions gave a view's input strides it cannot view, "
                  "so that one is a copy, as eager's reshape makes it")
    return (f'<p class="pcnb-pieces">{what} <span class="pcnb-muted">({why})'
            f"{workers}{route}{_conv_layout(c.get('conv_layout'))}</span></p>")


_LAYOUT_BY = {
    "training": "by Inductor's rule for training steps, as torch.compile decides a training "
                "step's layout",
    "inference": "by Inductor's rule for inference graphs",
    "forced": "forced by torch._inductor.config.force_layout_optimization",
    "off": "Inductor's layout optimization off for this graph (dynamic sizes, a CPU training "
           "step, a depthwise CUDA inference graph, or your setting)"}


def _conv_layout(layout: Any) -> str:
    """The convolutions' layout and what decided it (Note [a training step's layout, by
    torch.compile's rule]); "" for a graph without convolutions."""
    if not layout or len(layout) != 2:
        return ""
    return f"<br>convolutions in {esc(layout[0])}: {esc(_LAYOUT_BY.get(layout[1], layout[1]))}"


def _cache_load(load: dict[str, Any] | None) -> str:
    if load is None:
        return '<span class="pcnb-muted">not loaded yet</span>'
    return _cache_files(load) + _load_path(load)


def _load_path(load: dict[str, Any]) -> str:
    """Which way the load went: the warm path (kernels loaded directly, no compiler) or
    Inductor compiling on load, and why."""
    if not load.get("path"):
        return ""
    name = "warm: no compiler" if load["path"] == "warm" else "compile on load"
    seconds = load.get("seconds")
    stages = ""
    if isinstance(seconds, dict) and seconds:
        stages = ('<br><span class="pcnb-muted">load took '
                  f"{esc(f'{sum(seconds.values()):.3f}')} s: "
                  + ", ".join(f"{esc(k.replace('_', ' '))} {esc(f'{v:.3f}')} s"
                              for k, v in seconds.items()) + "</span>")
    return (f'<br><span class="pcnb-badge">{esc(name)}</span> '
            f'<span class="pcnb-muted">{esc(load.get("reason") or "")}</span>{stages}')


def _cache_files(load: dict[str, Any]) -> str:
    files = load.get("cache_files", 0)
    if load.get("used"):
        return (f'<span class="pcnb-yes">hit</span>: {esc(files)} compiled file(s) installed '
                f"({esc(load.get('written', 0))} written, {esc(load.get('present', 0))} already "
                "present): nothing compiled on load")
    if not files:
        return ('<span class="pcnb-muted">nothing to install (no compiled files, e.g. the '
                "eager backend)</span>")
    return (f'<span class="pcnb-st-caller pcnb-badge">miss</span> the cache\'s {esc(files)} '
            "file(s) were not used (another torch build): the kernels compiled on load")


def _artifact(data: dict[str, Any]) -> str:
    cache = data.get("cache") or {}
    tag = cache.get("tag")
    rows = [("python_code", f"{esc(human_bytes(data.get('python_code_bytes')))} "
                            f"({esc(len((data.get('python_code') or '').splitlines()))} lines)"),
            ("cache", esc(human_bytes(cache.get("bytes"))))]
    if tag:
        rows.append(("cache tag", esc(f"{tag.get('format')} v{tag.get('version')}, backend "
                                      f"{tag.get('backend')}, {tag.get('files')} file(s)")))
        rows.append(("built by torch", f"<code>{esc(tag.get('torch'))}</code>"))
        rows.append(("code hash", f"<code>{esc(str(tag.get('code_hash', ''))[:16])}…</code>"))
    rows.append(("cache on load", _cache_load(cache.get("load"))))
    return "<h4>Artifact</h4>" + table(None, rows, cls="pcnb-artifact")


def summary_html(data: dict[str, Any]) -> str:
    """Device, backend, the calling convention and everything else a caller must know."""
    parts = [f"<h3>precompiled <code>{esc(data.get('fn_name'))}</code></h3>",
             f'<p>backend <b>{esc(data.get("backend"))}</b> · device '
             f'<b>{esc(data.get("device"))}</b> · torch <b>{esc(data.get("torch"))}</b></p>']
    if isinstance(data.get("violation"), dict):
        v = data["violation"]
        parts.append(f'<p class="pcnb-violation"><b>Invariant {esc(v.get("invariant"))} '
                     f"violated:</b> {esc(v.get('what'))} (see the Invariants tab)</p>")
    parts.append(_calling_convention(data))
    w = data.get("weights") or {}
    parts.append("<h4>Weights</h4>"
                 f"<p>{esc(w.get('tensors', 0))} parameter/buffer tensors, "
                 f"{esc(w.get('elements', 0))} elements, {esc(human_bytes(w.get('bytes', 0)))}"
                 ' <span class="pcnb-muted">(not in the artifact: pass the model(s) at every '
                 "call)</span></p>")
    baked = data.get("baked") or []
    parts.append("<h4>Baked values</h4>" + (
        table(["where", "value (checked per call)"],
              [(f"<code>{esc(b.get('where'))}</code>", f"<code>{esc(b.get('value'))}</code>")
               for b in baked])
        if baked else '<p class="pcnb-muted">none: every input is a tensor or a model</p>'))
    outs = data.get("outputs") or []
    parts.append(f"<h4>Results</h4><p>{len(outs)} result(s): "
                 + (", ".join(_leaf(o) for o in outs) or "none") + "</p>")
    parts.append("<h4>Gradients</h4>"
                 f"<p>accumulated into <code>.grad</code> of: "
                 f"{_names(data.get('grads') or [], 'nothing (fn runs no backward)')}</p>"
                 f"<p>parameters that get no gradient: "
                 f"{_names(data.get('no_grad_params') or [], 'none')}</p>")
    aliased = [f"result {a.get('output')} views {a.get('input')}"
               for a in data.get("aliased_outputs") or []]
    parts.append("<h4>Effects</h4>"
                 f"<p>mutated in place (written back): "
                 f"{_names(data.get('mutated') or [], 'nothing')}</p>"
                 f"<p>results that alias inputs: {_names(aliased, 'none')}</p>")
    if data.get("guards") or any(row.get("dynamic") for row in data.get("inputs") or []):
        parts.append(_guards(data))
    if data.get("warnings"):
        parts.append("<h4>Compiler warnings</h4><ul>" + "".join(
            f"<li><code>{esc(w)}</code></li>" for w in data["warnings"]) + "</ul>")
    parts.append(_stages(data))
    parts.append(_artifact(data))
    return "".join(parts)


_PINNED = re.compile(r"^(?P<dim>\S+\.size\(\d+\)) == (?P<value>-?\d+)$")


def _guards(data: dict[str, Any]) -> str:
    """The conditions on dynamic sizes the graph was captured under (checked on every call),
    with the line that needed each, and the marked dims they pin to one value."""
    guards = data.get("guards") or []
    rows = [(f"<code>{esc(g.get('text'))}</code>",
             f"<code>{esc(g.get('source'))}</code>" if g.get("source")
             else '<span class="pcnb-muted">the graph (asserted while tracing)</span>')
            for g in guards]
    body = (table(["condition (checked on every call)", "needed by"], rows, cls="pcnb-guards")
            if rows else '<p class="pcnb-muted">none: every size of the dynamic dims is '
                         "served</p>")
    pinned = [m for m in (_PINNED.match(str(g.get("text"))) for g in guards) if m]
    if pinned:
        body += ("<p><b>specialised despite the mark:</b> "
                 + ", ".join(f"<code>{esc(m['dim'])}</code> to {esc(m['value'])}"
                             for m in pinned)
                 + ' <span class="pcnb-muted">(the graph needs the size itself)</span></p>')
    return "<h4>Guards on dynamic sizes</h4>" + body + _tuning(data.get("autotuning"))


def _tuning(t: dict[str, Any] | None) -> str:
    """The sizes a graph with dynamic dims was autotuned at, and the kernels that keep a
    configuration per size (Note [a configuration per size])."""
    if not t or not t.get("at") or not t["at"][0]:
        return ""

    def point(p: dict[str, Any]) -> str:
        return ", ".join(f"<code>{esc(k)}</code> {esc(tuple(v))}" for k, v in p.items())

    rows = [(point(p), esc(n)) for p, n in zip(t["at"], t.get("kernels") or [])]
    body = table(["tuned at (the example's first)", "kernels tuned"], rows, cls="pcnb-tuning")
    by_size = t.get("by_size") or []
    body += (f"<p>{len(by_size)} kernel(s) keep a configuration per size: "
             + _names(by_size, "") + "</p>" if by_size
             else '<p class="pcnb-muted">every kernel chose one configuration for all '
                  "these sizes</p>")
    body += "".join(f'<p class="pcnb-muted">not tuned at {point(s.get("at") or {})}: '
                    f"{esc(s.get('why'))}</p>" for s in t.get("skipped") or [])
    return "<h4>Autotuned sizes</h4>" + body


# ---------------------------------------------------------------------------------------------
# Source


def source_html(data: dict[str, Any], uid: str, *, links: bool = True) -> str:
    """python_code highlighted with line numbers, each line an anchor, and a jump list of its
    sections and kernels."""
    code = data.get("python_code") or ""
    sections = sorted((int(line), str(name)) for name, line in
                      (data.get("sections") or {}).items() if line)
    kernels = [k for k in data.get("kernels") or [] if k.get("line")]
    cls = ' class="pcnb-jump"' if links else ""
    jumps = ["<b>Sections:</b> " + (" ".join(
        f'<a{cls} href="#{line_anchor(uid, line)}">{esc(name)} <span class="pcnb-muted">'
        f"L{line}</span></a>" for line, name in sections) or
        '<span class="pcnb-muted">none marked</span>')]
    if kernels:
        jumps.append("<b>Kernels:</b> " + " ".join(
            f'<a{cls} href="#{line_anchor(uid, int(k["line"]))}">{esc(k.get("name"))} '
            f'<span class="pcnb-muted">L{esc(k["line"])}</span></a>' for k in kernels))
    hl = [line for line, _ in sections] + [int(k["line"]) for k in kernels]
    return (f'<div class="pcnb-jumps">{"<br>".join(jumps)}</div>'
            f'<p class="pcnb-muted">{esc(len(code.splitlines()))} lines, '
            f"{esc(human_bytes(len(code.encode('utf-8'))))}. This is the artifact itself: "
            "executing it runs code (invariant 7).</p>"
            f'<div class="pcnb-src">{highlighted_source(code, f"{uid}-L", hl_lines=hl)}</div>')


# ---------------------------------------------------------------------------------------------
# Graph, Kernels, Invariants


def graph_html(data: dict[str, Any], uid: str, *, node_budget: int = 400,
               expand: Iterable[str] = (), highlight: Iterable[str] | None = None,
               svg: bool = True, links: bool = True) -> str:
    """The captured graph (forward and backward) grouped by module, with search and the
    node <-> kernel links; offending nodes of a recorded violation are outlined in red.
    `links`: kernels link to their line in this report's Source tab."""
    nodes = (data.get("graph") or {}).get("nodes") or []
    if highlight is None:
        v = data.get("violation")
        highlight = offending_nodes(v, nodes) if isinstance(v, dict) else set()
    view = graph_view(nodes, node_budget=node_budget, expand=expand, highlight=highlight,
                      svg=svg)
    return graph_block(view, f"{uid}-g", node_budget=node_budget,
                       kernels=graph_kernels(data, uid if links else None))


def graph_kernels(data: dict[str, Any], uid: str | None) -> list[dict[str, Any]]:
    """Each kernel for the graph explorer: its graph nodes, its line in the Source tab (an
    anchor when `uid` is given) and its source text."""
    out = []
    for k in data.get("kernels") or []:
        line = int(k.get("line") or 0)
        src = _kernel_lines(data, line) if line else ""
        out.append({"name": str(k.get("name")), "kind": str(k.get("kind")), "line": line,
                    "nodes": [str(n) for n in k.get("source_nodes") or []],
                    "ops": [str(o) for o in k.get("fused_ops") or []],
                    "anchor": line_anchor(uid, line) if uid and line else None, "src": src})
    return out


_KERNEL_SRC_LINES = 400  # longer kernels are cut in the explorer (the Source tab has them)


def _kernel_lines(data: dict[str, Any], start: int) -> str:
    """python_code from a kernel's line to the next kernel or section."""
    code_lines = (data.get("python_code") or "").splitlines()
    bounds = [int(k["line"]) for k in data.get("kernels") or [] if k.get("line")]
    bounds += [int(v) for v in (data.get("sections") or {}).values() if v]
    end = min([b for b in bounds if b > start] + [len(code_lines) + 1])
    end = min(end, start + _KERNEL_SRC_LINES)
    return "\n".join(code_lines[start - 1:end - 1]).rstrip() + "\n"


def kernels_html(data: dict[str, Any], uid: str, *, links: bool = True) -> str:
    """The kernels Inductor generated, each linked to its definition in the source."""
    kernels = data.get("kernels") or []
    if not kernels:
        return ('<p class="pcnb-muted">No generated kernels: the '
                f"{esc(data.get('backend'))} backend runs the captured ATen ops directly.</p>")
    rows = []
    for index, k in enumerate(kernels):
        name = esc(k.get("name"))
        line = int(k.get("line") or 0)
        if line and links:
            cell = (f'<a class="pcnb-jump" href="#{line_anchor(uid, line)}"><code>{name}'
                    f"</code></a>")
        else:
            cell = f"<code>{name}</code>"
        nodes = _names(k.get("source_nodes") or [], "—")
        if links and k.get("source_nodes"):
            nodes += (f' <a class="pcnb-gx-show" href="#" data-pcnb-kernel="{index}">'
                      "show in graph</a>")
        rows.append((cell, esc(k.get("kind")), str(line) if line else
                     '<span class="pcnb-muted">library call</span>',
                     _names(k.get("fused_ops") or [], "—"), nodes))
    return (f"<p>{len(kernels)} kernel(s). Names link to their definition in the Source "
            "tab; <i>show in graph</i> outlines the graph nodes a kernel computes.</p>"
            + table(["kernel", "kind", "line", "fused ops", "graph nodes"], rows,
                    cls="pcnb-kernels"))


def kernel_source_html(data: dict[str, Any], name: str, uid: str) -> str:
    """The definition of one kernel: python_code from its line to the next kernel or section."""
    code_lines = (data.get("python_code") or "").splitlines()
    kernel = next((k for k in data.get("kernels") or [] if k.get("name") == name), None)
    if kernel is None or not kernel.get("line"):
        return f'<p class="pcnb-muted">{esc(name)} has no generated source (a library call).</p>'
    start = int(kernel["line"])
    bounds = [int(k["line"]) for k in data.get("kernels") or [] if k.get("line")]
    bounds += [int(v) for v in (data.get("sections") or {}).values() if v]
    end = min([b for b in bounds if b > start] + [len(code_lines) + 1])
    snippet = "\n".join(code_lines[start - 1:end - 1]) + "\n"
    return (f"<p><code>{esc(name)}</code>: lines {start}–{end - 1}</p>"
            f'<div class="pcnb-src">{highlighted_source(snippet, f"{uid}-K", linenostart=start)}'
            "</div>")


_STATUS_CLASS = {"enforced": "pcnb-st-enforced", "caller": "pcnb-st-caller",
                 "n/a": "pcnb-st-na", "violated": "pcnb-st-violated"}


def invariants_html(data: dict[str, Any], uid: str | None = None) -> str:
    """The seven invariants: enforced by the artifact, the caller's job, not applicable, or
    violated (with the violation explorer above the table)."""
    v = data.get("violation") if isinstance(data.get("violation"), dict) else None
    parts = []
    if v is not None:
        nodes = (data.get("graph") or {}).get("nodes") or None
        parts.append(violation_body(v, nodes, None, f"{uid or make_uid(v)}-v"))
    rows, row_classes = [], []
    for inv in data.get("invariants") or []:
        status = str(inv.get("status"))
        if v is not None and v.get("invariant") == inv.get("number"):
            status = "violated"
        badge = (f'<span class="pcnb-badge {_STATUS_CLASS.get(status, "pcnb-st-na")}">'
                 f"{esc(status)}</span>")
        rows.append((esc(inv.get("number")), esc(inv.get("title")), badge,
                     esc(inv.get("detail"))))
        row_classes.append("pcnb-row-violated" if status == "violated" else "")
    body = table(["#", "invariant", "status", "how"], rows, cls="pcnb-invariants",
                 row_classes=row_classes)
    parts.append('<p class="pcnb-muted">enforced: checked by capture or on every call · '
                 "caller: your responsibility · n/a: does not apply to this computation</p>")
    parts.append(body)
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# the report


def _jump_script(uid: str) -> str:
    ids = json.dumps({"root": uid, "tab": f"{uid}-tab-source", "graph": f"{uid}-tab-graph"})
    return ("<script>\n"
            "// links into the source switch to the Source tab, then scroll to the line\n"
            "(function () {\n"
            f"  var ids = {ids};\n"
            "  var root = document.getElementById(ids.root);\n"
            "  if (!root || root.getAttribute('data-pcnb-wired')) return;\n"
            "  root.setAttribute('data-pcnb-wired', '1');\n"
            "  root.addEventListener('click', function (ev) {\n"
            "    var show = ev.target.closest ? ev.target.closest('a.pcnb-gx-show') : null;\n"
            "    if (show) {  // a kernel's graph nodes: to the Graph tab, outlined there\n"
            "      ev.preventDefault();\n"
            "      var g = document.getElementById(ids.graph);\n"
            "      if (g) g.checked = true;\n"
            "      var gx = root.querySelector('.pcnb-p-graph .pcnb-gx');\n"
            "      if (window.__pcnbGX && gx) window.__pcnbGX.showKernel(gx,\n"
            "        +show.getAttribute('data-pcnb-kernel'));\n"
            "      return;\n"
            "    }\n"
            "    var a = ev.target.closest ? ev.target.closest('a.pcnb-jump') : null;\n"
            "    if (!a) return;\n"
            "    var target = document.getElementById(a.getAttribute('href').slice(1));\n"
            "    if (!target) return;\n"
            "    ev.preventDefault();\n"
            "    var tab = document.getElementById(ids.tab);\n"
            "    if (tab) tab.checked = true;\n"
            "    target.scrollIntoView({block: 'center'});\n"
            "    target.classList.add('pcnb-flash');\n"
            "    setTimeout(function () { target.classList.remove('pcnb-flash'); }, 1600);\n"
            "  });\n"
            "})();\n"
            "</script>")


def render_report_html(data: dict[str, Any], *, node_budget: int = 400, svg: bool = True,
                       uid: str | None = None) -> str:
    """The whole report as one self-contained HTML fragment (a notebook's _repr_html_).

    >>> import json
    >>> report = json.load(open("tests/viewers/data/report_eager.json"))  # doctest: +SKIP
    >>> "Invariants" in render_report_html(report)  # doctest: +SKIP
    True
    """
    uid = uid or make_uid(data)
    panels = {
        "summary": summary_html(data),
        "source": source_html(data, uid),
        "graph": graph_html(data, uid, node_budget=node_budget, svg=svg),
        "kernels": kernels_html(data, uid),
        "invariants": invariants_html(data, uid),
    }
    tabs = TABS
    if isinstance(data.get("profile"), dict):  # after result.profile(...) / --profile
        panels["profile"] = profile_html(data, uid, node_budget=node_budget, svg=svg)
        tabs = TABS + (("profile", "Profile"),)
    heads, bodies = [], []
    for k, (key, title) in enumerate(tabs):
        checked = " checked" if k == 0 else ""
        heads.append(f'<input type="radio" class="pcnb-tabin pcnb-tin-{key}" '
                     f'name="{uid}-tabs" id="{uid}-tab-{key}"{checked}>'
                     f'<label class="pcnb-tablabel" for="{uid}-tab-{key}">{esc(title)}</label>')
        bodies.append(f'<div class="pcnb-panel pcnb-p-{key}" data-tab="{key}">{panels[key]}</div>')
    return wrap("".join(heads) + "".join(bodies) + _jump_script(uid), uid)


def profile_html(data: dict[str, Any], uid: str, *, node_budget: int = 400,
                 svg: bool = True) -> str:
    """The Profile tab: time per module (forward and backward), per kernel and per node
    (viewers/profile.py), then the graph coloured by each node's time."""
    from .profile import profile_section
    prof = data["profile"]
    fills = heat_fills({str(k): float(v) for k, v in (prof.get("node_seconds") or {}).items()})
    nodes = [dict(n, fill=fills.get(str(n.get("name")), "#f3f4f6"))
             for n in (data.get("graph") or {}).get("nodes") or []]
    view = graph_view(nodes, node_budget=node_budget, svg=svg)
    return (profile_section(prof, uid)
            + "<h4>The graph coloured by time</h4>"
            '<p class="pcnb-muted">White: no measured time; deeper red: more of the step '
            "(each kernel's time split over the graph nodes it computes).</p>"
            + graph_block(view, f"{uid}-pg", node_budget=node_budget,
                          kernels=graph_kernels(data, uid)))


def summary_text(data: dict[str, Any]) -> str:
    """The report in one line, for terminals and text/plain outputs.

    >>> summary_text({"fn_name": "f", "backend": "eager", "device": "cpu", "inputs": []})
    'precompiled f (backend eager, cpu): 0 graph inputs, 0 kernels, python_code ?, cache ?'
    """
    cache = data.get("cache") or {}
    return (f"precompiled {data.get('fn_name')} (backend {data.get('backend')}, "
            f"{data.get('device')}): {len(data.get('inputs') or [])} graph inputs, "
            f"{len(data.get('kernels') or [])} kernels, python_code "
            f"{human_bytes(data.get('python_code_bytes'))}, cache {human_bytes(cache.get('bytes'))}")


def render_report_page(data: dict[str, Any], **kwargs: Any) -> str:
    """The report as a complete <!doctype html> page that works offline (save it, attach it
    to an email); keyword arguments go to render_report_html."""
    return html_page(f"precompile report: {data.get('fn_name')}",
                     render_report_html(data, **kwargs))


def html_page(title: str, body: str) -> str:
    """`body` (a rendered .pcnb view) as a complete <!doctype html> page that works offline."""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title>"
            "<style>body { margin: 16px; } body .pcnb { max-width: 1400px; } "
            "@media (prefers-color-scheme: dark) { body { background: #0d1117; } }</style>"
            "</head><body>\n" + body + "\n</body></html>\n")
