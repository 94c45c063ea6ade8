"""How long the static report's graph explorer takes, in headless Chromium, on a big graph:
the first layout, a search, and opening one module (a new layout). The tests check the work
done (tests/browser/test_static_report.py::test_big_graph_searches_without_a_layout_and_opens_a_
module_with_one); the times live here, because they depend on the machine and its load.

usage: python benchmarks/static_report_interaction.py [--rounds 3]

Needs what the browser tests need (scripts/setup_browser.sh): Debian's chromium and playwright.
Prints one line per round: layout ms, search ms (as the page measures them) and open ms
(click to the new picture, measured by the page's clock).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_ARGS, chromium_path
    from tests.browser.report_page import click_static_tab, search, wait_drawn
    from tests.browser.test_static_report import _page_without_dot
    from tests.test_report_scale import _transformer_step_nodes
    from tests.viewers.viewer_data import load_report, with_changes

    if chromium_path() is None:
        print("no chromium: run scripts/setup_browser.sh", file=sys.stderr)
        return 1
    nodes = _transformer_step_nodes()
    data = with_changes(load_report("eager"), graph={"nodes": nodes}, fn_name="step")
    work = Path(tempfile.mkdtemp(prefix="pcnb_bench_page_"))
    html = _page_without_dot(data, work / "big.html")
    rows = []
    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="pcnb_bench_profile_"), executable_path=chromium_path(),
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        for _ in range(args.rounds):
            page = ctx.new_page()
            page.goto(html.as_uri())
            report = page.locator("div.pcnb").filter(has=page.locator("label.pcnb-tablabel"))
            click_static_tab(report, "graph")
            gx = report.locator(".pcnb-p-graph .pcnb-gx")
            layout_ms = wait_drawn(gx)
            search(gx, "layers.7 softmax")
            search_ms = float(gx.get_attribute("data-pcnb-search-ms"))
            box = gx.locator("svg g[data-pcnb-module]").first
            module = box.get_attribute("data-pcnb-module")
            t0 = page.evaluate("performance.now()")
            box.click()
            page.wait_for_function(
                "([el, m]) => el.getAttribute('data-pcnb-state') === 'ready' && "
                "el.querySelector(`g.cluster[data-pcnb-cluster=\"${m}\"]`)",
                arg=[gx.element_handle(), module])
            open_ms = page.evaluate("performance.now()") - t0
            rows.append((layout_ms, search_ms, open_ms))
            print(f"{len(nodes)} nodes: first layout {layout_ms} ms, search {search_ms:.1f} ms, "
                  f"open {module} {open_ms:.0f} ms", flush=True)
            page.close()
        ctx.close()
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"median of {len(rows)}: layout {med[0]:.0f} ms, search {med[1]:.1f} ms, "
          f"open {med[2]:.0f} ms (cpu count {os.cpu_count()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
