"""The invariant-violation explorer: a PrecompileError (as `error_data(e)` plain data) rendered
for a person: which invariant, in plain words, what happened, where, expected against actual
with the differing cells marked, the fix, the user's source line and the offending graph nodes.

    html = render_violation_html(error_data(e), graph_nodes=report["graph"]["nodes"])
"""
from __future__ import annotations

import linecache
import re
from collections.abc import Sequence
from typing import Any

from ._common import esc, graph_block, highlighted_source, make_uid, table, wrap
from .graph import graph_view

__all__ = ["render_violation_html", "render_check_html", "PLAIN_WORDS", "offending_nodes"]

# The seven invariants in a sentence a notebook user can act on.
PLAIN_WORDS: dict[int, str] = {
    1: "Every tensor the computation reads must arrive as an argument, or as a registered "
       "parameter or buffer of a model argument: nothing live is baked into the artifact.",
    2: "The model passed at call time must have the same parameters and buffers (names, "
       "order, tying, shapes, dtypes, devices) as the model that was traced.",
    3: "Shapes and Python control flow are fixed by the example inputs; only dimensions "
       "marked dynamic may change, and Python may not branch on tensor values.",
    4: "In-place updates of inputs and buffers are captured and replayed; side effects that "
       "are not tensor writes (printing, I/O, effectful ops) cannot be.",
    5: "A .backward() inside the function is compiled with it: gradients accumulate into "
       ".grad exactly as in eager mode.",
    6: "The artifact is specialized to the dtype and device of the examples (and, with "
       "Inductor, to their memory layout).",
    7: "python_code is executable code and the cache holds compiled binaries: load only pairs "
       "you trust; the cache is tagged with its python_code, backend and torch build.",
}

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_COLON = re.compile(r"^(?P<file>.+?):(?P<line>\d+):\s?(?P<text>.*)$")


def _text(v: Any) -> str:
    """A value as compact plain text (not yet escaped): lists as [2, 4], strings bare (so a
    dynamic dim reads [<dynamic 1..4096>, 4]), a dict of fields as 'k=v k=v'."""
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return " ".join(f"{k}={_text(x)}" for k, x in v.items())
    return "" if v is None else str(v)


def _field_differs(name: str, e: Any, a: Any) -> bool:
    """Whether one field of a tensor check differs. A string dim in an expected shape is a
    dynamic dim ('<dynamic 1..4096>'): any size matches it here (its bounds are checked by
    the driver, which reports a size out of bounds as its own error)."""
    if (name == "shape" and isinstance(e, list) and isinstance(a, list) and len(e) == len(a)
            and any(isinstance(d, str) for d in e)):
        return any(d != x for d, x in zip(e, a) if not isinstance(d, str))
    return e != a


def _expected_actual(err: dict[str, Any]) -> str:
    """Expected against actual. Two dicts of fields (a tensor check): one row per field, the
    fields both sides have and that differ marked; a field only one side has (the actual
    stride when strides are not checked) is context, not a mismatch. Anything else (a
    number, a type name, a sentence): one row of two cells, marked when they differ."""
    exp, act = err.get("expected"), err.get("actual")
    if exp is None and act is None:
        return ""
    if isinstance(exp, dict) and isinstance(act, dict):
        rows = []
        for k in list(exp) + [k for k in act if k not in exp]:
            bad = k in exp and k in act and _field_differs(k, exp[k], act[k])
            mark = "pcnb-mismatch" if bad else ""
            rows.append((esc(k), (esc(_text(exp[k])) if k in exp else "—", mark),
                         (esc(_text(act[k])) if k in act else "—", mark)))
        return table(["field", "expected", "actual"], rows, cls="pcnb-expact")
    # a dict against a non-dict (a tensor expected, an int passed) differs as a whole
    mark = "pcnb-mismatch" if exp != act else ""
    return table(["expected", "actual"], [((esc(_text(exp)), mark), (esc(_text(act)), mark))],
                 cls="pcnb-expact")


def _fields_html(v: Any, mismatch: Sequence[str]) -> str:
    """One side of an inputs-table row as compact 'k=v' text, the fields named in
    `mismatch` wrapped in span.pcnb-mismatch; a non-dict (a type name) as its text."""
    if not isinstance(v, dict):
        return f"<code>{esc(_text(v))}</code>"
    parts = []
    for k, x in v.items():
        item = esc(f"{k}={_text(x)}")
        parts.append(f'<span class="pcnb-mismatch">{item}</span>' if k in mismatch else item)
    return "<code>" + " ".join(parts) + "</code>"


def _inputs_table(inputs: list[Any]) -> str:
    """extra["inputs"]: every graph input at the failing call, one row each
    ({"where", "expected", "actual", "mismatch": [field, ...]}); rows with a mismatch are
    marked, and so are their differing fields."""
    rows, classes = [], []
    for r in inputs:
        if not isinstance(r, dict):
            continue
        mm = r.get("mismatch")
        fields = [str(f) for f in mm] if isinstance(mm, (list, tuple)) else []
        bad = bool(mm)
        act = r.get("actual")
        act_html = _fields_html(act, fields)
        # a non-tensor actual (its type name) is wrong as a whole
        rows.append([f"<code>{esc(r.get('where'))}</code>",
                     _fields_html(r.get("expected"), fields),
                     (act_html, "pcnb-mismatch") if bad and not isinstance(act, dict)
                     else act_html,
                     "✗" if bad else "✓"])
        classes.append("pcnb-mismatch" if bad else "")
    return ("<h4>Every input of the call</h4>"
            + table(["input", "expected", "actual", ""], rows, cls="pcnb-inputs-call",
                    row_classes=classes))


def _flat_names(v: Any) -> list[str]:
    # extra["nodes"] may be a list of names or, for several offenders, a list of lists
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)):
        return [n for x in v for n in _flat_names(x)]
    return []


def offending_nodes(err: dict[str, Any], graph_nodes: Sequence[dict[str, Any]] | None) -> set[str]:
    """Graph nodes to highlight: those the error names, and the input node of the argument
    it names (a call-time error says where='x')."""
    names = set(_flat_names((err.get("extra") or {}).get("nodes")))
    where = err.get("where")
    for n in graph_nodes or ():
        if n.get("op") == "placeholder" and where and n.get("target") == where:
            names.add(str(n["name"]))
    return names


def _source_block(err: dict[str, Any], source: str | None, uid: str) -> str:
    """The user's line that broke the invariant, highlighted in its context."""
    ref = (err.get("extra") or {}).get("source")
    if not ref and err.get("where") and _COLON.match(str(err["where"])):
        ref = err["where"]  # data-dependent errors say where as 'file:line: text'
    if not ref:
        return ""
    ref = str(ref)
    m = _FRAME.search(ref) or _COLON.match(ref)
    lines: list[str] = []
    lineno = None
    if m:
        lineno = int(m.group("line"))
        if source is not None:
            lines = source.splitlines()
        else:
            lines = [ln.rstrip("\n") for ln in linecache.getlines(m.group("file"))]
    if lineno is None or not (1 <= lineno <= len(lines)):
        return ("<h4>Your code</h4>"
                f'<pre class="pcnb-message">{esc(ref)}</pre>')
    lo, hi = max(1, lineno - 3), min(len(lines), lineno + 3)
    snippet = "\n".join(lines[lo - 1:hi]) + "\n"
    return ("<h4>Your code</h4>"
            f'<p class="pcnb-muted">{esc(ref)}</p>'
            '<div class="pcnb-src pcnb-user-src">'
            + highlighted_source(snippet, f"{uid}-U", hl_lines=[lineno - lo + 1],
                                 linenostart=lo)
            + "</div>")


def violation_body(err: dict[str, Any], graph_nodes: Sequence[dict[str, Any]] | None,
                   source: str | None, uid: str, *, node_budget: int = 400) -> str:
    """The explorer without its wrapper (the report embeds it in its own)."""
    n = err.get("invariant")
    title = err.get("title") or ""
    head = (f"Invariant {esc(n)} broken: {esc(title)}" if n is not None
            else "precompile could not proceed")
    parts = ['<div class="pcnb-violation">', f"<h3>{head}</h3>"]
    if n in PLAIN_WORDS:
        parts.append(f'<p class="pcnb-muted">{esc(PLAIN_WORDS[n])}</p>')
    parts.append(f"<p><b>What happened:</b> {esc(err.get('what'))}</p>")
    facts = []
    if err.get("stage"):
        facts.append(f"<b>Stage:</b> {esc(err['stage'])}")
    if err.get("where"):
        facts.append(f"<b>Where:</b> <code>{esc(err['where'])}</code>")
    if facts:
        parts.append("<p>" + " &nbsp; ".join(facts) + "</p>")
    parts.append(_expected_actual(err))
    if err.get("hint"):
        parts.append(f'<p class="pcnb-fix"><b>Fix:</b> {esc(err["hint"])}</p>')
    parts.append(_source_block(err, source, uid))
    inputs = (err.get("extra") or {}).get("inputs")
    if isinstance(inputs, list) and inputs:
        parts.append(_inputs_table(inputs))
    extra = {k: v for k, v in (err.get("extra") or {}).items()
             if k not in ("source", "inputs")}
    if extra:
        rows = [(esc(k), f"<code>{esc(v)}</code>") for k, v in extra.items()]
        parts.append("<h4>Details</h4>" + table(None, rows))
    if graph_nodes:
        hl = offending_nodes(err, graph_nodes)
        view = graph_view(graph_nodes, node_budget=node_budget, highlight=hl)
        named = ", ".join(sorted(hl)) or "none"
        parts.append(f"<h4>Graph</h4><p class='pcnb-muted'>highlighted: {esc(named)}</p>"
                     + graph_block(view, f"{uid}-g", node_budget=node_budget))
    parts.append("<details><summary>Full message</summary>"
                 f'<pre class="pcnb-message">{esc(err.get("message"))}</pre></details>')
    parts.append("</div>")
    return "".join(parts)


def render_violation_html(err: dict[str, Any], graph_nodes: Sequence[dict[str, Any]] | None = None,
                          source: str | None = None, *, node_budget: int = 400) -> str:
    """The violation explorer for `error_data(e)` of a PrecompileError, as one self-contained
    HTML fragment. `graph_nodes` (report["graph"]["nodes"]) adds the graph with the offending
    nodes outlined in red; `source` is the user's code that extra["source"]'s line number
    refers to (without it the line is looked up in linecache, which knows notebook cells).

    >>> html = render_violation_html({"what": "x: shape differs", "invariant": 3,
    ...     "title": "shapes are specialized", "where": "x",
    ...     "expected": {"shape": [2], "dtype": "float32"},
    ...     "actual": {"shape": [3], "dtype": "float32"}, "hint": "pass shape [2]",
    ...     "extra": {}, "message": "..."})
    >>> '<td class="pcnb-mismatch">[2]</td><td class="pcnb-mismatch">[3]</td>' in html
    True
    """
    uid = make_uid(err, "pcnb-err")
    return wrap(violation_body(err, graph_nodes, source, uid, node_budget=node_budget), uid)


_SEVERITY_CLASS = {"error": "pcnb-mismatch", "warning": "", "note": ""}


def render_check_html(fn_name: str, findings: Sequence[dict[str, Any]]) -> str:
    """The dry-run checker's report (`precompile_nb.check`, `%%precompile --check`): every
    finding in one table, errors first and marked, each with its invariant in plain words,
    where, expected vs actual, the user's source line and the fix.

    >>> html = render_check_html("f", [{"severity": "error", "invariant": 1, "what": "reads W",
    ...     "where": "global 'W'", "expected": None, "actual": None, "hint": "pass W",
    ...     "source": None, "nodes": []}])
    >>> "global &#x27;W&#x27;" in html and "1 error" in html
    True
    """
    order = {"error": 0, "warning": 1, "note": 2}
    items = sorted(findings, key=lambda f: order.get(f.get("severity", "note"), 3))
    n_err = sum(1 for f in items if f.get("severity") == "error")
    rows, classes = [], []
    for f in items:
        inv = f.get("invariant")
        detail = esc(f.get("what"))
        if f.get("expected") is not None or f.get("actual") is not None:
            detail += (f"<br><small>expected: <code>{esc(_text(f.get('expected')))}</code> · "
                       f"actual: <code>{esc(_text(f.get('actual')))}</code></small>")
        if f.get("source"):
            detail += f"<br><small>your code: <code>{esc(f.get('source'))}</code></small>"
        rows.append([esc(f.get("severity")),
                     (f'<span title="{esc(PLAIN_WORDS.get(inv, ""))}">{esc(inv)}</span>'
                      if inv else "–"),
                     f"<code>{esc(f.get('where'))}</code>" if f.get("where") else "–",
                     detail, esc(f.get("hint")) if f.get("hint") else "–"])
        classes.append(_SEVERITY_CLASS.get(f.get("severity", ""), ""))
    verdict = ("ready to precompile" if n_err == 0
               else "precompile would fail: fix the errors first")
    head = (f"<h3>check <code>{esc(fn_name)}</code>: {n_err} error(s), "
            f"{len(items) - n_err} warning(s)/note(s) · {verdict}</h3>")
    body = head + (table(["severity", "invariant", "where", "what", "fix"], rows,
                         row_classes=classes) if rows else "<p>nothing to report</p>")
    return wrap(body, make_uid({"fn": fn_name, "findings": list(items)}, "pcnb-check"))
