"""The quickstart exported with `jupyter nbconvert --to html`, opened in headless Chromium with
no kernel and no network: is the report readable there? Twice: the committed notebook (its
outputs carry the static HTML beside the widget view, and no widget state), and the page
scripts/quickstart.sh writes (`nbconvert --execute`, whose nbclient saves widget state: the
magic then publishes the static report without a widget, see
viewers.widgets.has_widget_frontend)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .conftest import REPO, offline_page, save_screenshot
from .report_page import (QUICKSTART_INPUTS, calling_convention, check_source_highlighted,
                          check_tabs, click_static_tab, graph_counts)

pytestmark = pytest.mark.browser

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# text/html ahead of the widget view (nbconvert's HTMLExporter puts the widget view first)
HTML_FIRST = ('["text/html", "image/svg+xml", "image/png", "text/markdown", "text/latex", '
              '"text/plain"]')


def _report_output(nb: Any) -> dict[str, Any] | None:
    """The display_data output of the %%precompile cell that holds the static report."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "pcnb-tablabel" in out.get("data", {}).get("text/html", ""):
                return out
    return None


def _run(cmd: list[str], cwd: Path, timeout: float) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def executed(browser_context: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of notebooks/01_quickstart.ipynb with its outputs: the committed outputs when
    it has them, else executed here (an Inductor compile)."""
    work = tmp_path_factory.mktemp("nbconvert")
    dst = work / "01_quickstart.ipynb"
    for attempt in range(5):  # build.py may be rewriting it right now
        try:
            nb = nbformat.read(REPO / "notebooks" / "01_quickstart.ipynb", as_version=4)
            break
        except (json.JSONDecodeError, nbformat.reader.NotJSONError):
            if attempt == 4:
                raise
            time.sleep(1)
    nbformat.write(nb, dst)
    if _report_output(nb) is None:
        _run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
              "--inplace", "--ExecutePreprocessor.timeout=600", dst.name], work, 900)
        assert _report_output(nbformat.read(dst, as_version=4)) is not None, \
            "executing the quickstart displayed no report"
    return dst


def _export(executed: Path, name: str, *extra: str) -> Path:
    _run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--output", name,
          *extra, executed.name], executed.parent, 300)
    return executed.parent / f"{name}.html"


def _open(context: Any, html: Path) -> tuple[Any, Any]:
    page = offline_page(context)
    page.goto(html.as_uri())
    page.wait_for_load_state("load")
    report = page.locator("div.pcnb").filter(has=page.locator("label.pcnb-tablabel"))
    return page, report


def _check_readable(page: Any, report: Any) -> None:
    assert report.count() == 1
    report.scroll_into_view_if_needed()
    check_tabs(report)
    check_source_highlighted(report)
    assert calling_convention(report) == QUICKSTART_INPUTS
    # drawn by dot's SVG when the kernel had dot, else by the Graphviz bundled in the page
    total, drawn, in_svg = graph_counts(report)
    assert total == drawn == in_svg
    return None


def _check_summary_and_graph(page: Any, report: Any) -> None:
    assert report.count() == 1, "the exported page shows no report"
    report.scroll_into_view_if_needed()
    summary = click_static_tab(report, "summary")
    assert "predict" in summary.inner_text()
    assert calling_convention(report) == QUICKSTART_INPUTS
    total, drawn, in_svg = graph_counts(report)
    assert total > 0 and total == drawn == in_svg


def test_nbconvert_export_shows_the_report_without_network(executed, browser_context):
    page, report = _open(browser_context, _export(executed, "default"))
    try:
        _check_readable(page, report)
    finally:
        page.close()


@pytest.fixture(scope="module")
def quickstart_page(browser_context: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page scripts/quickstart.sh writes: the quickstart, outputs stripped, executed and
    exported by one `jupyter nbconvert --to html --execute` with nbclient's defaults (widget
    state saved). One Inductor compile."""
    work = tmp_path_factory.mktemp("quickstart_page")
    nb = nbformat.read(REPO / "notebooks" / "01_quickstart.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, work / "01_quickstart.ipynb")
    _run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute",
          "--ExecutePreprocessor.timeout=1200", "--output-dir", str(work / "out"),
          "01_quickstart.ipynb"], work, 1500)
    return work / "out" / "01_quickstart.html"


def test_the_page_the_quickstart_writes_shows_the_summary_and_the_graph_offline(
        quickstart_page, browser_context):
    page, report = _open(browser_context, quickstart_page)
    try:
        _check_summary_and_graph(page, report)
        # the report is the static page, not a widget view waiting for a CDN script
        assert page.locator(f'script[type="{WIDGET_VIEW}"]').count() == 0
        report.locator("label.pcnb-tablabel").first.click()
        report.scroll_into_view_if_needed()
        save_screenshot(page, "nbconvert-quickstart-offline")
    finally:
        page.close()


def test_nbconvert_export_preferring_html_shows_the_static_report(executed, browser_context):
    html = _export(executed, "html_first", f"--NbConvertBase.display_data_priority={HTML_FIRST}")
    page, report = _open(browser_context, html)
    try:
        _check_readable(page, report)
        report.locator("label.pcnb-tablabel").first.click()
        report.scroll_into_view_if_needed()
        page.evaluate("(y) => window.scrollBy(0, y)",
                      report.bounding_box()["y"] - 80)
        save_screenshot(page, "nbconvert-html-first")
    finally:
        page.close()
