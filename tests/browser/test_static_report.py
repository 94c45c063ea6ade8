"""PrecompileResult.to_html() opened in headless Chromium from a file, with no kernel and no
network: the page people save or attach. The eager result is built here by the real magic in
an IPython InteractiveShell (as tests/test_magics.py does); the Inductor one is the quickstart's,
written by the JupyterLab kernel that ran it (test_jupyterlab.py), or built here when
JupyterLab is not installed (one more Inductor compile, 20-60 s)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import (NO_DOT_REASON, has_dot, jupyterlab_unavailable, offline_page,
                       save_screenshot)
from .report_page import (QUICKSTART_INPUTS, calling_convention, check_dot_fallback,
                          check_source_highlighted, check_tabs, click_static_tab,
                          graph_counts, text_luminance)

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
    if not has_dot():
        check_dot_fallback(report, [n["name"] for n in nodes])
        page.close()
        pytest.skip(NO_DOT_REASON + " (checked the DOT text fallback instead)")
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
