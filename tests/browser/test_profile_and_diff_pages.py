"""The Profile tab and the diff view as Chromium draws them from saved pages, offline (no
kernel, no network, no `dot` on PATH): what `%%precompile --profile` / `result.profile(...)`
and `result.diff(other)` / `%precompile_diff` show. Screenshots: static-profile.png,
static-diff.png in docs/screenshots/."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import offline_page, save_screenshot
from .report_page import drawn_nodes, wait_drawn

pytestmark = pytest.mark.browser

SETUP = """
import torch
from torch import nn
torch.manual_seed(0)
narrow = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
wide = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
x = torch.randn(8, 16)
"""
STEP = ("def step(model, x):\n    loss = model(x).pow(2).mean()\n    loss.backward()\n"
        "    return loss.detach()\n")


@pytest.fixture(scope="module")
def results(browser_context: Any) -> dict[str, Any]:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    if "precompile_nb" not in ip.extension_manager.loaded:
        ip.run_line_magic("load_ext", "precompile_nb")
    ip.run_cell(SETUP)
    out = {}
    for name in ("narrow", "wide"):
        ip.run_cell_magic("precompile", f"{name} x --backend eager --out r_{name} --quiet "
                          "--profile 3", STEP)
        out[name] = ip.user_ns[f"r_{name}"]
    yield out
    ip.reset(new_session=False)


def _no_dot_page(html: str, path: Path) -> Path:
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = str(path.parent / "empty-bin")
    try:
        assert shutil.which("dot") is None
        path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>"
                        f"{html()}</body></html>", encoding="utf-8")
    finally:
        os.environ["PATH"] = saved
    return path


def test_profile_tab_shows_modules_and_the_graph_coloured_by_time_offline(
        results, browser_context, tmp_path):
    narrow = results["narrow"]
    assert isinstance(narrow.report.get("profile"), dict)
    html = _no_dot_page(narrow.to_html, tmp_path / "profile.html")
    page = offline_page(browser_context)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if r.url != html.as_uri() else None)
    page.goto(html.as_uri())
    report = page.locator("div.pcnb").filter(has=page.locator("label.pcnb-tablabel")).first
    report.locator("label.pcnb-tablabel[for$='-tab-profile']").click()
    panel = report.locator(".pcnb-panel.pcnb-p-profile")
    assert panel.is_visible() and not report.locator(".pcnb-p-summary").is_visible()
    modules = panel.locator("table.pcnb-profile-modules").inner_text()
    assert "model.0" in modules and "(unattributed)" in modules
    gx = panel.locator(".pcnb-gx")
    gx.scroll_into_view_if_needed()  # the picture is laid out when it comes into view
    wait_drawn(gx)
    names = [n["name"] for n in narrow.report["graph"]["nodes"]]
    assert sorted(drawn_nodes(gx)) == sorted(names)
    # the slowest node is filled the deepest red in the drawn picture
    fills = gx.evaluate("(el) => [...el.querySelectorAll('g.node polygon, g.node path')]"
                        ".map((p) => p.getAttribute('fill'))")
    assert "#dc2626" in fills, fills
    assert asked == [], f"the page asked the network for {asked}"
    page.set_viewport_size({"width": 1280, "height": 1000})
    save_screenshot(panel, "static-profile")
    page.close()


def test_diff_view_shows_changed_shapes_and_the_code_diff_offline(results, browser_context,
                                                                  tmp_path):
    d = results["narrow"].diff(results["wide"], names=("narrow", "wide"))
    html = tmp_path / "diff.html"
    html.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>"
                    f"{d._repr_html_()}</body></html>", encoding="utf-8")
    page = offline_page(browser_context)
    page.goto(html.as_uri())
    view = page.locator("div.pcnb").first
    conv = view.locator("details", has_text="Calling convention")
    assert conv.get_attribute("open") is not None  # the shapes changed: opened
    assert "changed" in conv.inner_text() and "[32, 16]" in conv.inner_text()
    code = view.locator("details", has_text="python_code")
    if code.get_attribute("open") is None:
        code.locator("summary").click()
    added = code.locator("pre.pcnb-diff span.pcnb-d-add")
    removed = code.locator("pre.pcnb-diff span.pcnb-d-del")
    assert added.count() > 0 and removed.count() > 0
    assert added.first.is_visible()
    # additions and deletions are coloured differently
    colors = {added.first.evaluate("(e) => getComputedStyle(e).backgroundColor"),
              removed.first.evaluate("(e) => getComputedStyle(e).backgroundColor")}
    assert len(colors) == 2
    page.set_viewport_size({"width": 1280, "height": 1000})
    save_screenshot(page, "static-diff")
    page.close()
