"""The ipywidgets report and the stage progress view (no torch, no frontend needed)."""
from __future__ import annotations

import copy
import io
import re

import ipywidgets as W
from viewer_data import layered_graph, with_changes

from precompile_nb.viewers.widgets import StageProgress, progress_widget, report_widget


def test_report_widget_has_the_five_tabs(report):
    tab = report_widget(report)
    assert isinstance(tab, W.Tab)
    assert tab.titles == ("Summary", "Source", "Graph", "Kernels", "Invariants")
    summary, source = tab.children[0], tab.children[1]
    assert all(f"<code>{i['where']}</code>" in summary.value for i in report["inputs"])
    assert '<span class="k">def</span>' in source.value
    assert '<span class="pcnb-badge pcnb-st-caller">caller</span>' in tab.children[4].value


def test_graph_explorer_redraws_with_the_chosen_module_open(report_eager):
    data = with_changes(report_eager, graph={"nodes": layered_graph(40, 124)})
    tab = report_widget(data)
    help_text, controls, picture = tab.children[2].children
    select, budget = controls.children
    assert isinstance(select, W.SelectMultiple)
    assert select.options == ("layers",) + tuple(f"layers.{k}" for k in range(40))
    before = picture.value
    assert "layers.12 — 124 ops" in before  # collapsed while the graph is over budget
    select.value = ("layers.12",)
    after = picture.value
    assert "layers.12 — 124 ops" not in after and "op12_123" in after
    budget.value = 100000  # everything fits: nothing is collapsed
    assert " ops</text>" not in picture.value and "— 124 ops" not in picture.value


def test_graph_tab_says_when_the_graph_has_no_modules(report_eager):
    flat = copy.deepcopy(report_eager)
    for n in flat["graph"]["nodes"]:
        n["module"] = ""
    help_text = report_widget(flat).children[2].children[0]
    assert "No module clusters" in help_text.value


def test_kernels_tab_shows_the_source_of_the_chosen_kernel(report_inductor):
    table, pick, source = report_widget(report_inductor).children[3].children
    generated = [k for k in report_inductor["kernels"] if k["line"]]
    assert list(pick.options) == [k["name"] for k in generated]
    assert f"lines {generated[0]['line']}–{generated[1]['line'] - 1}" in source.value
    pick.value = generated[2]["name"]
    assert f"<code>{generated[2]['name']}</code>: lines {generated[2]['line']}–" in source.value
    assert '<span class="hll">' not in source.value


def test_progress_prints_one_line_per_stage_without_a_frontend(capsys):
    p = progress_widget()  # a plain pytest process has no widget frontend
    assert p.widget is None
    for stage, seconds in (("capture", 0.25), ("lower", 12.5)):
        p.on_stage(stage, "start", 0.0)
        p.on_stage(stage, "done", seconds)
    p.finish()
    assert capsys.readouterr().out == ("[precompile] capture … 250.0 ms\n"
                                       "[precompile] lower … 12.50 s\n")


def test_progress_marks_the_running_stage_failed_when_the_build_fails():
    out = io.StringIO()
    p = StageProgress(live=False, stream=out)
    p.on_stage("capture", "start", 0.0)
    p.finish(ok=False)
    assert out.getvalue() == "[precompile] capture … failed\n"
    assert p.stages == [["capture", "failed", 0.0]]


def test_live_progress_shows_a_spinner_then_each_stage_time():
    p = StageProgress(live=True)
    assert isinstance(p.widget, W.HBox)
    view = p.widget.children[0]
    p.on_stage("capture", "start", 0.0)
    assert 'class="pcnb-spin"' in view.value and "capture</b> running…" in view.value
    p.on_stage("capture", "done", 1.5)
    p.on_stage("lower", "start", 0.0)
    assert re.search(r"✓</span> capture 1.50 s", view.value)
    assert "lower</b> running…" in view.value
    p.finish(ok=False)
    assert "✗ lower failed" in view.value and "pcnb-spin" not in view.value.split("</style>")[1]
