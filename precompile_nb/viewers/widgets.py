"""The report as live ipywidgets: the same five tabs as the static HTML, with the graph explorer
of the static page (search, clusters, kernel links, drawn in the browser), and a live
stage-progress view to pass as build(on_stage=...). Nothing here imports torch.

    progress = progress_widget()                       # shows itself in a notebook
    art = build(fn, *inputs, on_stage=progress.on_stage)
    display(report_widget(report_data(art)))
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

import ipywidgets as W

from ._common import esc, human_seconds, make_uid, wrap
from .graph import module_paths
from .html import (TABS, graph_html, invariants_html, kernel_source_html, kernels_html,
                   profile_html, source_html, summary_html)

__all__ = ["report_widget", "progress_widget", "StageProgress", "has_widget_frontend"]


def has_widget_frontend() -> bool:
    """True inside a Jupyter kernel driven by an interactive frontend (JupyterLab, Notebook,
    VS Code), which draws widgets; False in a terminal IPython, a bare InteractiveShell or a
    script (there a widget would print as its repr), and False when the cell runs under
    nbclient (`jupyter nbconvert --execute`, papermill).

    nbclient draws no widgets but saves their state in the notebook, and nbconvert's HTML
    exporter then prefers the widget view over the text/html beside it: a view that needs
    @jupyter-widgets/html-manager from a CDN, so the exported page shows a blank output
    offline. nbclient is told apart by what it asks of the kernel: it runs every cell with
    allow_stdin=False (it can answer no input()), while interactive frontends allow stdin."""
    try:
        from IPython import get_ipython
    except ImportError:  # IPython is a dependency; a script without it has no frontend
        return False
    ip = get_ipython()
    kernel = getattr(ip, "kernel", None) if ip is not None else None
    if kernel is None:
        return False
    # ipykernel records the running execute_request's allow_stdin; absent: assume a frontend
    return bool(getattr(kernel, "_allow_stdin", True))


class GraphExplorer:
    """The Graph tab: the same explorer as the static page (search, open and close module
    clusters, node <-> kernel links), drawn by the Graphviz bundled in the output. It runs in
    the browser: nothing is sent back to the kernel and no `dot` runs per click (an Output
    widget, whose HTML outputs JupyterLab runs scripts in)."""

    def __init__(self, data: dict[str, Any], uid: str, *, node_budget: int = 400) -> None:
        from IPython.display import HTML

        self.data = data
        self.uid = uid
        nodes = (data.get("graph") or {}).get("nodes") or []
        self.modules: Sequence[str] = module_paths(nodes)
        self.html = wrap(graph_html(data, uid, node_budget=node_budget, links=False),
                         uid + "-gw")
        help_text = ("Search by op, node, module, shape or kernel; click a grey module box to "
                     "open it." if self.modules else
                     "No module clusters: every node of this graph is at the top level.")
        self.picture = W.Output()
        self.picture.append_display_data(HTML(self.html))
        self.box = W.VBox([W.HTML(f"<i>{esc(help_text)}</i>"), self.picture])


def _html_tab(html: str) -> W.Widget:
    """A tab of HTML; one that holds a graph (a recorded violation's) goes into an Output
    widget, whose HTML outputs run their scripts (W.HTML runs none)."""
    if 'class="pcnb-gx"' not in html:
        return W.HTML(html)
    from IPython.display import HTML

    out = W.Output()
    out.append_display_data(HTML(html))
    return out


def _kernels_tab(data: dict[str, Any], uid: str) -> W.Widget:
    table = W.HTML(wrap(kernels_html(data, uid, links=False), uid + "-kw"))
    named = [k["name"] for k in data.get("kernels") or [] if k.get("line")]
    if not named:
        return table
    pick = W.Dropdown(options=named, value=named[0], description="source of",
                      layout=W.Layout(width="80%"))
    source = W.HTML()

    def show(_change: Any = None) -> None:
        source.value = wrap(kernel_source_html(data, pick.value, uid), uid + "-ks")

    show()
    pick.observe(show, names="value")
    return W.VBox([table, pick, source])


def report_widget(data: dict[str, Any], *, node_budget: int = 400) -> W.Tab:
    """The report (report_data(...)) as an ipywidgets.Tab: Summary, Source, Graph (a live
    explorer), Kernels (with each kernel's source), Invariants.

    >>> import json
    >>> tab = report_widget(json.load(open("tests/viewers/data/report_eager.json")))  # doctest: +SKIP
    >>> tab.titles  # doctest: +SKIP
    ('Summary', 'Source', 'Graph', 'Kernels', 'Invariants')
    """
    uid = make_uid(data)
    explorer = GraphExplorer(data, uid, node_budget=node_budget)
    children = [
        W.HTML(wrap(summary_html(data), uid + "-sw")),
        W.HTML(wrap(source_html(data, uid), uid + "-cw")),
        explorer.box,
        _kernels_tab(data, uid),
        _html_tab(wrap(invariants_html(data, uid), uid + "-iw")),
    ]
    titles = [title for _, title in TABS]
    if isinstance(data.get("profile"), dict):  # profiled: time per module, the graph by time
        children.append(_html_tab(wrap(profile_html(data, uid, node_budget=node_budget),
                                       uid + "-pw")))
        titles.append("Profile")
    tab = W.Tab(children=children)
    tab.titles = tuple(titles)
    return tab


class StageProgress:
    """Live progress of a build: pass `.on_stage` as build(on_stage=...). In a notebook it is
    a widget row of stages with their times and a spinner on the running one; without a
    frontend it prints one line per stage."""

    def __init__(self, *, live: bool | None = None, title: str = "precompile",
                 stream: TextIO | None = None) -> None:
        self.live = has_widget_frontend() if live is None else live
        self.title = title
        self.stages: list[list[Any]] = []  # [stage, "running" | "done" | "failed", seconds]
        self._stream = stream
        self._line_open = False
        self.widget: W.HBox | None = None
        if self.live:
            self._html = W.HTML(self._render())
            self.widget = W.HBox([self._html])

    def on_stage(self, stage: str, status: str, seconds: float) -> None:
        """build's on_stage(stage, "start" | "done", seconds) callback."""
        if status == "start":
            self.stages.append([stage, "running", 0.0])
        else:
            for s in reversed(self.stages):
                if s[0] == stage and s[1] == "running":
                    s[1], s[2] = "done", seconds
                    break
            else:
                self.stages.append([stage, "done", seconds])
        if self.live:
            self._html.value = self._render()
        else:
            self._print(stage, status, seconds)

    def finish(self, ok: bool = True) -> None:
        """Mark the end: a stage still running when the build failed is marked failed."""
        for s in self.stages:
            if s[1] == "running":
                s[1] = "done" if ok else "failed"
        if self.live:
            self._html.value = self._render()
        elif self._line_open:
            self._write(" failed\n" if not ok else "\n")
            self._line_open = False

    def _write(self, text: str) -> None:
        out = self._stream or sys.stdout  # looked up per call: pytest/IPython swap stdout
        out.write(text)
        out.flush()

    def _print(self, stage: str, status: str, seconds: float) -> None:
        if status == "start":
            if self._line_open:
                self._write("\n")
            self._write(f"[{self.title}] {stage} …")
            self._line_open = True
        else:
            if not self._line_open:
                self._write(f"[{self.title}] {stage} …")
            self._write(f" {human_seconds(seconds)}\n")
            self._line_open = False

    def _render(self) -> str:
        chips = []
        for stage, status, seconds in self.stages:
            if status == "running":
                chips.append(f'<span class="pcnb-stage"><span class="pcnb-spin"></span> '
                             f"<b>{esc(stage)}</b> running…</span>")
            elif status == "failed":
                chips.append(f'<span class="pcnb-stage pcnb-st-violated pcnb-badge">✗ '
                             f"{esc(stage)} failed</span>")
            else:
                chips.append(f'<span class="pcnb-stage"><span class="pcnb-yes">✓</span> '
                             f"{esc(stage)} {esc(human_seconds(seconds))}</span>")
        body = "".join(chips) or '<span class="pcnb-muted">starting…</span>'
        return wrap(f'<div class="pcnb-progress"><b>{esc(self.title)}</b>: {body}</div>',
                    "pcnb-progress")

    def _ipython_display_(self) -> None:
        from IPython.display import display

        if self.widget is not None:
            display(self.widget)


def progress_widget(*, live: bool | None = None, show: bool = True,
                    title: str = "precompile") -> StageProgress:
    """A StageProgress, displayed at once in a notebook (show=False to place it yourself).

    >>> p = progress_widget(live=False)
    >>> p.on_stage("capture", "start", 0.0); p.on_stage("capture", "done", 0.5)
    [precompile] capture … 500.0 ms
    """
    p = StageProgress(live=live, title=title)
    if p.live and show:
        from IPython.display import display

        display(p.widget)
    return p
