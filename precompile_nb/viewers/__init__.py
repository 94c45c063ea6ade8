"""Viewers: render what a precompile run recorded (the plain dicts of tools.report) as HTML,
Graphviz pictures and ipywidgets. They see data, never the compiler, and never import torch.

    from precompile_nb.viewers import render_report_html, render_violation_html
    html = render_report_html(report_data(artifact))
    html = render_violation_html(error_data(exc))

html.py      the report: Summary, Source, Graph, Kernels, Invariants tabs; a full offline page
graph.py     graph nodes -> DOT (module clusters, collapsing big graphs) -> SVG
explorer.py  the invariant-violation explorer
widgets.py   the same report as live ipywidgets, and stage progress for build(on_stage=...)
profile.py, diff.py  the Profile tab and the diff of two reports

May import: the standard library, pygments, ipywidgets. Nothing else of the package, and not
torch (tests/test_layout.py and tests/viewers/test_viewers_without_torch.py check it).
"""
from __future__ import annotations

from typing import Any

from .explorer import render_violation_html
from .graph import graph_to_dot, graph_view, render_svg
from .html import render_report_html, render_report_page

__all__ = ["render_report_html", "render_report_page", "render_violation_html", "graph_to_dot",
           "graph_view", "render_svg", "report_widget", "progress_widget"]


def __getattr__(name: str) -> Any:
    # widgets import ipywidgets: only when asked for, so static HTML works without it
    if name in ("report_widget", "progress_widget", "StageProgress", "has_widget_frontend"):
        from . import widgets

        return getattr(widgets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
