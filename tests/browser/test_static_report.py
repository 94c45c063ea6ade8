"""PrecompileResult.to_html() opened in headless Chromium from a file, with no kernel and no
network: the page people save or attach. The eager result is built here by the real magic in
an IPython InteractiveShell (as tests/test_magics.py does); the Inductor one is the quickstart's,
written by the JupyterLab kernel that ran it (test_jupyterlab.py), or built here when
JupyterLab is not installed (one more Inductor compile, 20-60 s)."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from precompile_nb.viewers import render_report_page

from .conftest import jupyterlab_unavailable, offline_page, save_screenshot
from .report_page import (QUICKSTART_INPUTS, calling_convention,
                          check_source_highlighted, check_tabs, click_static_tab, drawn_nodes,
                          graph_counts, outlined, search, side_kernels, text_luminance,
                          wait_drawn)

pytestmark = pytest.mark.browser

# the quickstart's model and computation (notebooks/01_quickstart.ipynb)
SETUP = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
x = torch.randn(8, 16)
"""
PREDICT = "def predict(model, x):\n    return model(x).softmax(-1)\n"


@dataclass(frozen=True)
class StaticReport:
    html: Path  # result.to_html() written to a file
    report: dict[str, Any]  # result.report


@pytest.fixture(scope="module")
def shell(browser_context: Any) -> Any:
    # browser_context first: without a browser the test skips before compiling anything
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    if "precompile_nb" not in ip.extension_manager.loaded:
        ip.run_line_magic("load_ext", "precompile_nb")
    ip.run_cell(SETUP)
    yield ip
    ip.reset(new_session=False)


def _build(ip: Any, backend: str, out: Path) -> StaticReport:
    ip.run_cell_magic("precompile", f"--backend {backend} --out r --quiet", PREDICT)
    result = ip.user_ns["r"]
    out.write_text(result.to_html(), encoding="utf-8")
    return StaticReport(out, result.report)


@pytest.fixture(scope="module")
def eager_report(shell: Any, tmp_path_factory: pytest.TempPathFactory) -> StaticReport:
    return _build(shell, "eager", tmp_path_factory.mktemp("static") / "eager.html")


@pytest.fixture(scope="module")
def inductor_report(request: pytest.FixtureRequest, browser_context: Any,
                    tmp_path_factory: pytest.TempPathFactory) -> StaticReport:
    if jupyterlab_unavailable() is None:
        request.getfixturevalue("quickstart")  # ran to the end in JupyterLab
        root = request.getfixturevalue("lab").root
        return StaticReport(root / "quickstart_report.html",
                            json.loads((root / "quickstart_report.json").read_text("utf-8")))
    return _build(request.getfixturevalue("shell"), "inductor",
                  tmp_path_factory.mktemp("static") / "inductor.html")


def _open(context: Any, static: StaticReport) -> tuple[Any, Any]:
    page = offline_page(context)
    page.goto(static.html.as_uri())
    report = page.locator("div.pcnb").filter(has=page.locator("label.pcnb-tablabel"))
    assert report.count() == 1
    return page, report


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_static_page_tabs_switch_without_a_kernel(backend, request, browser_context):
    static = request.getfixturevalue(f"{backend}_report")
    page, report = _open(browser_context, static)
    check_tabs(report)
    page.close()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_static_page_highlights_the_source_and_lists_the_inputs(backend, request,
                                                               browser_context):
    static = request.getfixturevalue(f"{backend}_report")
    page, report = _open(browser_context, static)
    check_source_highlighted(report)
    assert calling_convention(report) == QUICKSTART_INPUTS
    page.close()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_static_page_draws_every_graph_node(backend, request, browser_context):
    static = request.getfixturevalue(f"{backend}_report")
    nodes = static.report["graph"]["nodes"]
    page, report = _open(browser_context, static)
    # dot's SVG when dot was on PATH, else laid out by the Graphviz bundled in the page
    total, drawn, in_svg = graph_counts(report)
    assert total == drawn == in_svg == len(nodes)
    page.close()


def test_static_page_kernel_links_jump_to_their_source_line(inductor_report, browser_context):
    kernels = [k for k in inductor_report.report["kernels"] if k.get("line")]
    assert kernels, "the Inductor quickstart generated no kernel with source"
    page, report = _open(browser_context, inductor_report)
    panel = click_static_tab(report, "kernels")
    last = kernels[-1]
    panel.locator("a.pcnb-jump", has_text=last["name"]).click()
    # the inline script switched to the Source tab and scrolled the kernel's line into view
    source = report.locator(".pcnb-p-source")
    assert source.is_visible()
    line = source.locator(f"span[id$='-L-{last['line']}']")
    assert last["name"] in line.inner_text()
    assert line.evaluate("""(el) => { const r = el.getBoundingClientRect();
                            return r.top >= 0 && r.bottom <= window.innerHeight; }""")
    page.close()


def test_static_page_follows_the_color_scheme_light_and_dark(inductor_report, browser_context):
    """docs/screenshots/static-*-{light,dark}.png; text is dark on light, light on dark."""
    page, report = _open(browser_context, inductor_report)
    page.set_viewport_size({"width": 1280, "height": 1000})
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert (text_luminance(report) < 0.5) == (scheme == "light")
        for key in ("summary", "source", "graph", "kernels"):
            click_static_tab(report, key)
            page.evaluate("window.scrollTo(0, 0)")
            save_screenshot(page, f"static-{key}-{scheme}")
    page.close()


# ---------------------------------------------------------------------------------------------
# the graph explorer: drawn offline by the bundled Graphviz, search, node <-> kernel links


def _page_without_dot(data: dict[str, Any], path: Path) -> Path:
    """The report as a page rendered where no `dot` is on PATH (no static SVG in it)."""
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = str(path.parent / "empty-bin")  # nothing to find there
    try:
        assert shutil.which("dot") is None
        path.write_text(render_report_page(data), encoding="utf-8")
    finally:
        os.environ["PATH"] = saved
    return path


def _open_graph(context: Any, html: Path) -> tuple[Any, Any, Any, list[str]]:
    """The page (offline), its report, its Graph tab's explorer, and every URL it asked for
    besides the page itself."""
    page = offline_page(context)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if r.url != html.as_uri() else None)
    page.goto(html.as_uri())
    report = page.locator("div.pcnb").filter(has=page.locator("label.pcnb-tablabel"))
    click_static_tab(report, "graph")
    return page, report, report.locator(".pcnb-p-graph .pcnb-gx"), asked


@pytest.fixture(scope="module")
def inductor_page_no_dot(inductor_report: StaticReport,
                         tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _page_without_dot(inductor_report.report,
                             tmp_path_factory.mktemp("nodot") / "inductor.html")


def test_static_page_draws_the_graph_with_no_dot_and_no_network(inductor_report,
                                                                inductor_page_no_dot,
                                                                browser_context):
    page, report, gx, asked = _open_graph(browser_context, inductor_page_no_dot)
    assert "<svg" not in inductor_page_no_dot.read_text("utf-8").split("pcnb-gx-picture")[1][:300]
    wait_drawn(gx)
    names = [n["name"] for n in inductor_report.report["graph"]["nodes"]]
    assert sorted(drawn_nodes(gx)) == sorted(names)
    assert asked == [], f"the page asked the network for {asked}"
    save_screenshot(page, "static-graph-offline")
    page.close()


def test_static_page_search_finds_nodes_by_op_module_shape_and_kernel(inductor_report,
                                                                      inductor_page_no_dot,
                                                                      browser_context):
    page, report, gx, _ = _open_graph(browser_context, inductor_page_no_dot)
    wait_drawn(gx)
    nodes = inductor_report.report["graph"]["nodes"]
    assert search(gx, "aten.addmm") == ["addmm", "addmm_1"]
    assert sorted(outlined(gx, "pcnb-gx-match")) == ["addmm", "addmm_1"]
    hits = search(gx, "model.2")
    assert {n["name"] for n in nodes if n["module"] == "model.2"} <= set(hits)
    assert all("model.2" in n["module"] + str(n["target"]) for n in nodes if n["name"] in hits)
    assert search(gx, "[8, 4] softmax") == ["_softmax"]
    assert search(gx, "cpp_fused_gelu_0") == ["gelu"]  # by the kernel that computes it
    save_screenshot(gx, "static-graph-search")
    page.close()


def test_static_page_links_kernels_to_graph_nodes_both_ways(inductor_report,
                                                           inductor_page_no_dot,
                                                           browser_context):
    kernels = inductor_report.report["kernels"]
    page, report, gx, _ = _open_graph(browser_context, inductor_page_no_dot)
    wait_drawn(gx)
    # kernel -> nodes, from the Kernels tab: the Graph tab opens with the nodes outlined
    panel = click_static_tab(report, "kernels")
    gelu = next(k for k, kern in enumerate(kernels) if kern["name"] == "cpp_fused_gelu_0")
    panel.locator(f"a.pcnb-gx-show[data-pcnb-kernel='{gelu}']").click()
    assert report.locator(".pcnb-p-graph").is_visible()
    gx.locator(".pcnb-gx-side h4", has_text="cpp_fused_gelu_0").wait_for()
    assert outlined(gx) == ["gelu"]
    # and from the explorer's own kernel list
    gx.locator("a[data-pcnb-act='kernels']").click()
    gx.locator("a.pcnb-gx-klink", has_text="cpp_fused__softmax_1").click()
    page.wait_for_function("(el) => el.getAttribute('data-pcnb-kernel') === "
                           "'cpp_fused__softmax_1'", arg=gx.element_handle())
    assert outlined(gx) == ["_softmax"]
    stroke = gx.locator("svg g.pcnb-gx-mark path").first.evaluate(
        "(el) => getComputedStyle(el).stroke")
    assert stroke == "rgb(220, 38, 38)", f"the kernel's node is not outlined in red: {stroke}"
    save_screenshot(gx, "static-graph-kernel")
    # node -> kernels and source lines
    gx.locator("svg g[data-pcnb-node='gelu']").click()
    assert side_kernels(gx) == ["cpp_fused_gelu_0"]
    gx.locator("svg g[data-pcnb-node='addmm_1']").click()
    assert side_kernels(gx) == ["extern_kernels.addmm"]
    gx.locator("svg g[data-pcnb-node='_softmax']").click()
    assert side_kernels(gx) == ["cpp_fused__softmax_1"]
    line = next(k["line"] for k in kernels if k["name"] == "cpp_fused__softmax_1")
    gx.locator("ul.pcnb-gx-node-kernels a.pcnb-jump").click()
    source = report.locator(".pcnb-p-source")
    assert source.is_visible()
    assert "cpp_fused__softmax_1" in source.locator(f"span[id$='-L-{line}']").inner_text()
    page.close()


@pytest.fixture(scope="module")
def transformer_page(browser_context: Any, tmp_path_factory: pytest.TempPathFactory
                     ) -> tuple[Path, list[dict[str, Any]]]:
    """The 8-layer transformer's training step (1,541 nodes), drawn without dot."""
    from tests.test_report_scale import _transformer_step_nodes
    from tests.viewers.viewer_data import load_report, with_changes

    nodes = _transformer_step_nodes()
    data = with_changes(load_report("eager"), graph={"nodes": nodes}, fn_name="step")
    return _page_without_dot(data, tmp_path_factory.mktemp("big") / "big.html"), nodes


def _layouts(gx: Any) -> int:
    """How many layouts the explorer has made (0 for dot's static picture)."""
    return int(gx.get_attribute("data-pcnb-layouts") or 0)


def test_big_graph_searches_without_a_layout_and_opens_a_module_with_one(transformer_page,
                                                                         browser_context):
    # the work done, not the time it took (timings: benchmarks/static_report_interaction.py)
    html, nodes = transformer_page
    assert len(nodes) > 1500
    page, report, gx, asked = _open_graph(browser_context, html)
    wait_drawn(gx)
    first = _layouts(gx)
    assert first == 1 and int(gx.get_attribute("data-pcnb-drawn")) <= 400 + 50
    hits = search(gx, "layers.7 softmax")
    expected = [n["name"] for n in nodes if "model.layers.7" in n["module"]
                and "softmax" in (n["name"] + n["target"]).lower()]
    assert hits and all(
        n["module"].startswith("model.layers.7") for n in nodes if n["name"] in hits)
    assert set(expected) <= set(hits)
    assert _layouts(gx) == first, "a search laid the graph out again"
    # the hits inside collapsed modules mark their module's box
    assert gx.locator("svg g.pcnb-gx-match-in, svg g.pcnb-gx-match").count() > 0
    box = gx.locator("svg g[data-pcnb-module]").first
    module = box.get_attribute("data-pcnb-module")
    box.click()
    page.wait_for_function(
        "([el, m]) => el.getAttribute('data-pcnb-state') === 'ready' && "
        "el.querySelector(`g.cluster[data-pcnb-cluster=\"${m}\"]`)",
        arg=[gx.element_handle(), module])
    assert _layouts(gx) == first + 1, "opening one module took more than one layout"
    drawn = int(gx.get_attribute("data-pcnb-drawn"))
    assert drawn <= 400 + 50, drawn  # other modules closed to stay near the budget
    # clicking the cluster closes it again
    gx.locator(f"svg g.cluster[data-pcnb-cluster='{module}']").locator("text").first.click()
    page.wait_for_function(
        "([el, m]) => el.getAttribute('data-pcnb-state') === 'ready' && "
        "el.querySelector(`g[data-pcnb-module=\"${m}\"]`)", arg=[gx.element_handle(), module])
    # a hit leads to its node: its module opens and the node is selected, in view
    gx.locator("ul.pcnb-gx-results a").first.click()
    page.wait_for_function("([el, n]) => el.getAttribute('data-pcnb-selected') === n",
                           arg=[gx.element_handle(), hits[0]])
    node = gx.locator(f"svg g[data-pcnb-node='{hits[0]}']")
    assert node.count() == 1 and "pcnb-gx-match" in node.get_attribute("class")
    assert asked == []
    node.evaluate("(el) => el.scrollIntoView({block: 'center', inline: 'center'})")
    save_screenshot(gx, "static-graph-big")
    page.close()
