"""The report and the violation explorer as people see them: JupyterLab in headless Chromium.

A JupyterLab server (127.0.0.1, random port, token) serves a temporary dir holding a copy of
notebooks/01_quickstart.ipynb (outputs stripped) and a small notebook that breaks invariant 1.
Both are run with JupyterLab's own "Run All Cells" command in a live kernel, concurrently, and
everything is checked in the page: the ipywidgets report (which JupyterLab draws instead of
the static HTML, see magics.show_report), its tabs, the highlighted source, the drawn graph,
the calling convention, the explorer. Screenshots in light and dark go to
conftest.screenshots_dir() (docs/screenshots/ only when PRECOMPILE_NB_SCREENSHOTS asks).
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import NODES_MARK, save_screenshot
from .lab import RunningNotebook, outputs_text, set_theme
from .report_page import (QUICKSTART_INPUTS, TAB_TITLES, check_pygments_styled, drawn_nodes,
                          luminance, outlined, search, side_kernels, wait_drawn)

pytestmark = pytest.mark.browser


def _report(nb: RunningNotebook) -> Any:
    """The report JupyterLab shows: the ipywidgets Tab (live kernel, widget manager)."""
    report = nb.page.locator(".jupyter-widget-tab").filter(
        has=nb.page.locator(".lm-TabBar-tabLabel", has_text="Invariants"))
    assert report.count() == 1, (
        "expected one report widget (Tab with Summary…Invariants) below the %%precompile "
        f"cell; outputs:\n{outputs_text(nb.page)[:2000]}")
    return report


def _click_tab(report: Any, title: str) -> Any:
    """Click a tab of the report widget; returns the panel now shown."""
    tab = report.locator(".lm-TabBar-tab").filter(
        has=report.page.locator(".lm-TabBar-tabLabel", has_text=re.compile(f"^{title}$")))
    tab.click()
    report.page.wait_for_function(
        "(el) => el.classList.contains('lm-mod-current')", arg=tab.element_handle())
    shown = report.locator(".widget-tab-contents > .lm-Widget:not(.lm-mod-hidden)")
    assert shown.count() == 1, f"after clicking {title!r}, {shown.count()} panels are shown"
    return shown


def _node_count(nb: RunningNotebook) -> int:
    m = re.search(rf"{NODES_MARK} (\d+)", outputs_text(nb.page))
    assert m, "the appended cell did not print the report's node count"
    return int(m.group(1))


def test_quickstart_report_has_five_tabs_and_clicking_one_shows_its_panel(quickstart):
    report = _report(quickstart)
    assert report.locator(".lm-TabBar-tabLabel").all_inner_texts() == TAB_TITLES
    marks = {"Summary": "table.pcnb-inputs", "Source": ".pcnb-jumps",
             "Graph": ".pcnb-graph-stats", "Kernels": "table.pcnb-kernels",
             "Invariants": "table.pcnb-invariants"}
    for title in ["Source", "Graph", "Kernels", "Invariants", "Summary"]:
        panel = _click_tab(report, title)
        assert panel.is_visible()
        for other, css in marks.items():
            n = panel.locator(css).count()
            assert (n > 0) == (other == title), f"{title} tab: {n} of {other}'s {css}"
        assert panel.locator(marks[title]).first.is_visible()


def test_quickstart_summary_lists_the_calling_convention(quickstart):
    panel = _click_tab(_report(quickstart), "Summary")
    where = panel.locator("table.pcnb-inputs tbody tr td:nth-child(2)").all_inner_texts()
    assert [w.strip() for w in where] == QUICKSTART_INPUTS
    assert "backend inductor" in panel.inner_text()


def test_quickstart_source_tab_is_highlighted_by_pygments(quickstart):
    panel = _click_tab(_report(quickstart), "Source")
    code = check_pygments_styled(panel, min_keywords=11)
    assert code.locator("span.nf").count() > 0, "no function names highlighted"
    assert panel.locator(".pcnb-hl .linenos").count() > 100, "no line numbers"


def test_quickstart_graph_tab_draws_every_node_with_no_dot_and_no_network(quickstart):
    # the kernel runs with no `dot` on PATH (start_lab) and the page reaches nothing but the
    # server (offline_page): the bundled Graphviz lays the graph out in the output
    expected = _node_count(quickstart)
    panel = _click_tab(_report(quickstart), "Graph")
    gx = panel.locator(".pcnb-gx")
    wait_drawn(gx)
    svg = panel.locator(".pcnb-gx-picture svg")
    assert svg.count() == 1 and svg.is_visible(), "the Graph tab shows no picture"
    box = svg.bounding_box()
    assert box["width"] > 100 and box["height"] > 100, f"the picture is tiny: {box}"
    assert len(drawn_nodes(gx)) == expected
    assert f"{expected} nodes in the graph, {expected} drawn" in panel.inner_text()
    assert "no `dot` binary" in panel.inner_text()  # it says where the picture came from


def test_quickstart_graph_search_and_kernel_links_in_jupyterlab(quickstart):
    panel = _click_tab(_report(quickstart), "Graph")
    gx = panel.locator(".pcnb-gx")
    wait_drawn(gx)
    assert search(gx, "aten.addmm") == ["addmm", "addmm_1"]
    assert search(gx, "cpp_fused__softmax_1") == ["_softmax"]
    gx.locator("input.pcnb-gx-q").fill("")
    gx.locator("input.pcnb-gx-q").press("Enter")
    # kernel -> its nodes outlined; node -> its kernels
    gx.locator("a.pcnb-gx-klink", has_text="cpp_fused_gelu_0").first.click()
    quickstart.page.wait_for_function("(el) => el.getAttribute('data-pcnb-kernel') === "
                                      "'cpp_fused_gelu_0'", arg=gx.element_handle())
    assert outlined(gx) == ["gelu"]
    gx.locator("svg g[data-pcnb-node='addmm_1']").click()
    assert side_kernels(gx) == ["extern_kernels.addmm"]
    gx.locator("svg g[data-pcnb-node='_softmax']").click()
    assert side_kernels(gx) == ["cpp_fused__softmax_1"]
    # the kernel's source, right there (the widget's Source tab is another widget)
    gx.locator("ul.pcnb-gx-node-kernels a.pcnb-gx-klink").click()
    gx.locator("details summary", has_text="its source").click()
    assert "cpp_fused__softmax_1 = async_compile" in gx.locator("pre.pcnb-gx-src").inner_text()
    quickstart.page.set_viewport_size({"width": 1280, "height": 1100})
    _shot(quickstart.page, gx, "lab-graph-explorer")


def test_violation_explorer_names_the_global_shows_expected_actual_and_the_fix(violation):
    page = violation.page
    explorer = page.locator(".jp-OutputArea-output .pcnb-violation")
    assert explorer.count() == 1, f"no violation explorer; outputs:\n{outputs_text(page)[:2000]}"
    assert explorer.is_visible()
    text = explorer.inner_text()
    assert "Invariant 1 broken: everything live is an input" in text
    assert "global 'scale'" in explorer.locator("code").all_inner_texts()
    cells = explorer.locator("table.pcnb-expact tbody td")
    expected, actual = cells.nth(0).inner_text(), cells.nth(1).inner_text()
    assert "argument" in expected and "baked constant shape=[2]" in actual
    assert "pcnb-mismatch" in (cells.nth(1).get_attribute("class") or "")
    assert "Fix: pass `scale` to fn as an argument" in explorer.locator(".pcnb-fix").inner_text()
    # the offending line of the user's cell, highlighted
    assert "* scale" in explorer.locator(".pcnb-user-src .hll").inner_text()
    # above it the stage progress marks the failed stage; below it the traceback
    outputs = outputs_text(page)
    assert "capture failed" in outputs
    assert "PrecompileError" in outputs


def _shot(page: Any, target: Any, name: str) -> None:
    target.evaluate("(el) => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    save_screenshot(page, name)


def test_screenshots_in_light_and_dark_theme_follow_the_theme(quickstart, violation):
    """docs/screenshots/lab-*-{light,dark}.png; the report's colors follow JupyterLab's."""
    report = _report(quickstart)
    explorer = violation.page.locator(".jp-OutputArea-output .pcnb-violation")
    cell = violation.page.locator(".jp-CodeCell").filter(has=explorer)
    for page in (quickstart.page, violation.page):
        page.set_viewport_size({"width": 1280, "height": 1100})
    for theme, suffix in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
        for page in (quickstart.page, violation.page):
            set_theme(page, theme)
        for title in ("Summary", "Source", "Graph"):
            panel = _click_tab(report, title)
            color = panel.locator(".pcnb").first.evaluate("(el) => getComputedStyle(el).color")
            # text: dark on light, light on dark
            assert (luminance(color) < 0.5) == (suffix == "light"), (title, suffix, color)
            _shot(quickstart.page, report, f"lab-{title.lower()}-{suffix}")
        color = explorer.evaluate("(el) => getComputedStyle(el).color")
        assert (luminance(color) < 0.5) == (suffix == "light"), ("explorer", suffix, color)
        _shot(violation.page, cell, f"lab-violation-{suffix}")
    for page in (quickstart.page, violation.page):
        set_theme(page, "JupyterLab Light")


def test_profile_tab_and_diff_output_in_jupyterlab(profile_diff):
    """`%%precompile --profile` shows the report with a Profile tab (time per module, the
    graph coloured by time, drawn in the page) and `%precompile_diff a b` the diff, in a live
    kernel (no network)."""
    page = profile_diff.page
    errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.'
                          'stderr"]').all_inner_texts()
    assert not [t for t in errors if "Traceback" in t], errors
    panel = _click_tab(_report(profile_diff), "Profile")
    modules = panel.locator("table.pcnb-profile-modules")
    assert modules.count() == 1, outputs_text(page)[:2000]
    text = modules.inner_text()
    assert "model.0" in text and "(unattributed)" in text and "sum" in text
    gx = panel.locator(".pcnb-gx")
    gx.scroll_into_view_if_needed()
    assert wait_drawn(gx) >= 0 and len(drawn_nodes(gx)) > 0
    # the diff: the shapes that changed, opened, and the highlighted python_code diff
    conv = page.locator(".jp-OutputArea-output details", has_text="Calling convention")
    assert conv.count() == 1 and conv.get_attribute("open") is not None
    assert "[32, 16]" in conv.inner_text() and "[64, 16]" in conv.inner_text()
    code = page.locator(".jp-OutputArea-output details", has_text="python_code")
    if code.get_attribute("open") is None:
        code.locator("summary").click()
    added = code.locator("pre.pcnb-diff span.pcnb-d-add")
    assert added.count() > 0 and added.first.is_visible()
    modules.scroll_into_view_if_needed()
    save_screenshot(page, "lab-profile")
