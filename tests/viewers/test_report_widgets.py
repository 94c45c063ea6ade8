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


def test_graph_tab_is_drawn_in_the_browser_with_no_kernel_round_trip(report_eager):
    data = with_changes(report_eager, graph={"nodes": layered_graph(40, 124)})
    tab = report_widget(data)
    help_text, picture = tab.children[2].children
    assert isinstance(picture, W.Output)  # JupyterLab runs the scripts of its HTML outputs
    (out,) = picture.outputs
    html = out["data"]["text/html"]
    assert "layers.12 — 124 ops" in html  # collapsed while the graph is over budget
    assert "window.__pcnbViz" in html and "window.__pcnbGX.wire(root)" in html
    # the explorer opens and closes clusters itself, from what first fits the budget
    assert '"opened":["layers","layers.0","layers.1"]' in html


def test_a_recorded_violation_graph_is_drawn_in_the_browser_too(report_eager):
    violation = {"what": "f reads 1 tensor(s) that are not inputs", "invariant": 1,
                 "title": "everything live is an input", "stage": "capture",
                 "where": "global 'W'", "expected": "an input", "actual": "a constant",
                 "hint": "pass `W` to fn", "extra": {"nodes": [["addmm"]]}, "message": "m"}
    invariants = report_widget(with_changes(report_eager, violation=violation)).children[4]
    assert isinstance(invariants, W.Output)  # W.HTML would not run the graph's scripts
    html = invariants.outputs[0]["data"]["text/html"]
    assert "Invariant 1 broken" in html and "window.__pcnbGX.wire(root)" in html


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


def test_a_profiled_report_has_a_profile_tab_whose_graph_draws_in_the_browser(report_inductor):
    from test_diff_profile import profile_data
    data = copy.deepcopy(report_inductor)
    data["profile"] = profile_data()
    tab = report_widget(data)
    assert tab.titles[-1] == "Profile" and len(tab.children) == 6
    panel = tab.children[-1]
    assert isinstance(panel, W.Output)  # an Output widget runs the explorer's script
    html = panel.outputs[0]["data"]["text/html"]
    assert "(unattributed)" in html and 'class="pcnb-gx"' in html
