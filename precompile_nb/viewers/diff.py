"""The diff of two precompile results as static HTML: ReportDiff.to_data() (tools/diff.py) in,
one self-contained fragment out. Plain data only; nothing here imports torch.

    html = render_diff_html(diff_reports(a.report, b.report).to_data())
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._common import esc, human_bytes, human_seconds, make_uid, table, wrap

__all__ = ["render_diff_html", "render_diff_page", "code_diff_html"]

# a diff line's first character -> its class (the colors are the report's ok/bad palette)
_LINE_CLASS = {"+": "pcnb-d-add", "-": "pcnb-d-del", "@": "pcnb-d-hunk"}
_CSS = """
.pcnb .pcnb-diff { max-height: 70vh; overflow: auto; border: 1px solid var(--pcnb-border);
  background: var(--pcnb-bg2); margin: 0; padding: 4px 0; }
.pcnb .pcnb-diff span { display: block; padding: 0 8px; white-space: pre; }
.pcnb .pcnb-diff .pcnb-d-add { color: var(--pcnb-ok); background: var(--pcnb-ok-bg); }
.pcnb .pcnb-diff .pcnb-d-del { color: var(--pcnb-bad); background: var(--pcnb-bad-bg); }
.pcnb .pcnb-diff .pcnb-d-hunk { color: var(--pcnb-accent); font-weight: 600; }
.pcnb .pcnb-diff .pcnb-d-file { color: var(--pcnb-fg2); }
.pcnb .pcnb-ch-added { color: var(--pcnb-ok); font-weight: 600; }
.pcnb .pcnb-ch-removed { color: var(--pcnb-bad); font-weight: 600; }
.pcnb .pcnb-ch-changed { color: var(--pcnb-warn); font-weight: 600; }
"""
_OPEN_DIFF_LINES = 400  # a longer python_code diff starts collapsed


def render_diff_html(data: Mapping[str, Any], *, uid: str | None = None) -> str:
    """The whole diff: a summary, then one section per part (each collapsible)."""
    uid = uid or make_uid(data, "pcnb-diff")
    a, b = str(data.get("a")), str(data.get("b"))
    parts = [f"<style>{_CSS}</style>",
             f"<h3>diff <code>{esc(a)}</code> → <code>{esc(b)}</code></h3>",
             f"<p>{esc(data.get('summary'))}</p>",
             _overview(data, a, b),
             _section("Calling convention", _convention(data, a, b), bool(
                 data.get("inputs") or data.get("outputs") or data.get("guards"))),
             _section("Graph nodes", _nodes(data), bool(
                 data.get("nodes_added") or data.get("nodes_removed")
                 or data.get("nodes_changed"))),
             _section("Kernels and fusions", _kernels(data, a, b), bool(
                 data.get("kernels") or data.get("kernel_counts"))),
             _section("Stage times", _stages(data, a, b), False),
             _section("python_code", code_diff_html(data.get("code_diff") or []),
                      0 < len(data.get("code_diff") or []) <= _OPEN_DIFF_LINES)]
    return wrap("".join(parts), uid)


def _section(title: str, body: str, open_: bool) -> str:
    return (f"<details{' open' if open_ else ''}><summary><b>{esc(title)}</b></summary>"
            f"{body}</details>")


def _pair(x: Any, y: Any, fmt: Any = esc) -> tuple[str, str, str]:
    cls = "" if x == y else "pcnb-mismatch"
    return (fmt(x), fmt(y), f'<span class="{cls}">changed</span>' if cls else "")


def _overview(data: Mapping[str, Any], a: str, b: str) -> str:
    def pair(key: str) -> tuple[Any, Any]:
        v = data.get(key) or (None, None)
        return v[0], v[1]

    rows = [("function", *_pair(*pair("fn_names"), fmt=lambda v: f"<code>{esc(v)}</code>")),
            ("backend", *_pair(*pair("backends"))),
            ("graph nodes", *_pair(*pair("node_totals"))),
            ("kernels", *_pair(*pair("kernel_totals"))),
            ("python_code", *_pair(*pair("python_code_bytes"), fmt=lambda v: esc(human_bytes(v)))),
            ("cache", *_pair(*pair("cache_bytes"), fmt=lambda v: esc(human_bytes(v))))]
    return table(["", a, b, ""], [(esc(r[0]), *r[1:]) for r in rows], cls="pcnb-diff-overview")


def _change(kind: str) -> str:
    return f'<span class="pcnb-ch-{esc(kind)}">{esc(kind)}</span>'


def _convention(data: Mapping[str, Any], a: str, b: str) -> str:
    parts = []
    rows = [(f"<code>{esc(c.get('where'))}</code>", _change(str(c.get("change"))),
             esc(", ".join(c.get("fields") or [])), esc(c.get("before") or "–"),
             esc(c.get("after") or "–"))
            for c in data.get("inputs") or []]
    parts.append(table(["input", "change", "fields", a, b], rows, cls="pcnb-diff-inputs")
                 if rows else '<p class="pcnb-muted">the same inputs (names, kinds, shapes, '
                              "dtypes, devices)</p>")
    for key, title in (("outputs", "results"), ("guards", "guards")):
        v = data.get(key)
        if v:
            parts.append(f"<h4>{esc(title)} differ</h4>" + table(
                [a, b], [("<br>".join(f"<code>{esc(x)}</code>" for x in v[0]) or "–",
                          "<br>".join(f"<code>{esc(x)}</code>" for x in v[1]) or "–")]))
    return "".join(parts)


def _nodes(data: Mapping[str, Any]) -> str:
    rows = []
    for key in ("nodes_added", "nodes_removed", "nodes_changed"):
        for n in data.get(key) or []:
            rows.append((f"<code>{esc(n.get('name'))}</code>", f"<code>{esc(n.get('target'))}"
                         "</code>", _change(str(n.get("change"))),
                         f"<code>{esc(n.get('module'))}</code>",
                         esc(n.get("before") or "–"), esc(n.get("after") or "–")))
    body = (table(["node", "target", "change", "module", "before", "after"], rows,
                  cls="pcnb-diff-nodes")
            if rows else '<p class="pcnb-muted">the same nodes (by name and target), with the '
                         "same shapes and dtypes</p>")
    counts = [(f"<code>{esc(c.get('name'))}</code>", esc(c.get("before")), esc(c.get("after")))
              for c in data.get("op_counts") or []]
    if counts:
        body += "<h4>Op counts that differ</h4>" + table(["op", "before", "after"], counts,
                                                          cls="pcnb-diff-ops")
    return body


def _ops(ops: Sequence[str] | None) -> str:
    return "–" if ops is None else ", ".join(f"<code>{esc(o)}</code>" for o in ops) or "–"


def _kernels(data: Mapping[str, Any], a: str, b: str) -> str:
    rows = [(f"<code>{esc(k.get('name'))}</code>", _change(str(k.get("change"))),
             _ops(k.get("before")), _ops(k.get("after")))
            for k in data.get("kernels") or []]
    body = (table(["kernel", "change", f"fused ops ({a})", f"fused ops ({b})"], rows,
                  cls="pcnb-diff-kernels")
            if rows else '<p class="pcnb-muted">the same kernels, fusing the same ops</p>')
    counts = [(f"<code>{esc(c.get('name'))}</code>", esc(c.get("before")), esc(c.get("after")))
              for c in data.get("kernel_counts") or []]
    if counts:
        body += "<h4>Kernel counts that differ</h4>" + table(["kernel", a, b], counts)
    return body


def _stages(data: Mapping[str, Any], a: str, b: str) -> str:
    rows = []
    for name, sa, sb in data.get("stages") or []:
        ratio = f"{sb / sa:.2f}×" if sa and sb is not None else ""
        rows.append((esc(name), esc(human_seconds(sa)), esc(human_seconds(sb)), esc(ratio)))
    return (table(["stage", a, b, f"{b} / {a}"], rows, cls="pcnb-diff-stages")
            + '<p class="pcnb-muted">build times vary from run to run (the compiler\'s caches '
              "are warm for the second build of similar code)</p>")


def code_diff_html(lines: Sequence[str]) -> str:
    """A unified diff (difflib lines) highlighted line by line: additions, deletions, hunk
    headers."""
    if not lines:
        return '<p class="pcnb-muted">the same python_code</p>'
    out = []
    for ln in lines:
        cls = ("pcnb-d-file" if ln.startswith(("+++", "---"))
               else _LINE_CLASS.get(ln[:1], ""))
        out.append(f'<span class="{cls}">{esc(ln) or " "}</span>' if cls
                   else f"<span>{esc(ln) or ' '}</span>")
    changed = sum(1 for ln in lines if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
    return (f'<p class="pcnb-muted">{changed} line(s) added or removed (unified diff, '
            f"{sum(1 for ln in lines if ln.startswith('@@'))} hunk(s))</p>"
            f'<pre class="pcnb-diff">{"".join(out)}</pre>')


def render_diff_page(data: Mapping[str, Any]) -> str:
    """The diff (ReportDiff.to_data()) as a complete offline HTML page, like
    render_report_page for a report: save it, attach it to a review."""
    from .html import html_page

    return html_page(f"precompile diff: {data.get('a')} -> {data.get('b')}",
                     render_diff_html(data))
