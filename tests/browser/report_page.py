"""Checks of the static report (viewers/html.py: CSS radio-button tabs, no kernel) as
Chromium draws it, shared by the to_html() page and the nbconvert export."""
from __future__ import annotations

import re
from typing import Any

TAB_KEYS = ["summary", "source", "graph", "kernels", "invariants"]
TAB_TITLES = ["Summary", "Source", "Graph", "Kernels", "Invariants"]
QUICKSTART_INPUTS = ["model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias", "x"]


def click_static_tab(report: Any, key: str) -> Any:
    """Click the label of tab `key` of one static report (a `.pcnb` locator); returns the
    panel, after checking it is the only one shown."""
    report.locator(f"label.pcnb-tablabel[for$='-tab-{key}']").click()
    panel = report.locator(f".pcnb-panel.pcnb-p-{key}")
    assert panel.is_visible(), f"clicking the {key} tab did not show its panel"
    shown = [k for k in TAB_KEYS if report.locator(f".pcnb-panel.pcnb-p-{k}").is_visible()]
    assert shown == [key], f"after clicking {key}, the panels shown are {shown}"
    return panel


def check_tabs(report: Any) -> None:
    labels = [t.strip() for t in report.locator("label.pcnb-tablabel").all_inner_texts()]
    assert labels == TAB_TITLES
    # the first tab is open before any click, the others are hidden
    assert report.locator(".pcnb-p-summary").is_visible()
    for key in TAB_KEYS[1:] + ["summary"]:
        click_static_tab(report, key)


def check_pygments_styled(panel: Any, min_keywords: int = 1) -> Any:
    """The Source panel's code carries Pygments spans (keywords, names) and its stylesheet
    applies: keywords are drawn in another color than plain names. Returns the code."""
    hl = panel.locator(".pcnb-hl")
    assert hl.is_visible()
    assert hl.locator("span.k").count() >= min_keywords, \
        "no Pygments keyword spans in the Source tab"
    assert hl.locator("span.nf, span.n").count() > 0, "no Pygments name spans"
    colors = panel.evaluate("""(el) => {
      const k = el.querySelector('.pcnb-hl span.k'), n = el.querySelector('.pcnb-hl span.n');
      return [getComputedStyle(k).color, getComputedStyle(n).color];
    }""")
    assert colors[0] != colors[1], f"keywords and names are drawn alike {colors}: no styles"
    return hl


def check_source_highlighted(report: Any) -> None:
    check_pygments_styled(click_static_tab(report, "source"))


def graph_counts(report: Any) -> tuple[int, int, int]:
    """(nodes in the graph, drawn, <g class="node"> in the visible SVG) of the Graph tab."""
    panel = click_static_tab(report, "graph")
    gx = panel.locator(".pcnb-gx")
    # no static SVG: drawn in the page (outputs saved before the explorer have no .pcnb-gx)
    if gx.count() and not gx.locator(".pcnb-gx-picture svg").count():
        wait_drawn(gx)
    stats = panel.locator(".pcnb-graph-stats").inner_text()
    m = re.search(r"(\d+) nodes in the graph, (\d+) drawn", stats)
    assert m, f"no node statistics in the Graph tab: {stats!r}"
    svg = panel.locator(".pcnb-svg svg")
    assert svg.count() == 1 and svg.is_visible(), "the Graph tab shows no SVG picture"
    box = svg.bounding_box()
    assert box["width"] > 100 and box["height"] > 100, f"the picture is tiny: {box}"
    return int(m.group(1)), int(m.group(2)), svg.locator("g.node").count()


def check_dot_fallback(report: Any, node_names: list[str]) -> None:
    """Without `dot`: the panel says so and the DOT text names every node."""
    panel = click_static_tab(report, "graph")
    assert "no `dot` binary" in panel.inner_text()
    dot = panel.locator("pre.pcnb-dot").text_content()
    assert dot.startswith("digraph")
    for name in node_names:
        assert f'"n:{name}"' in dot, f"node {name} missing from the DOT text"


def calling_convention(report: Any) -> list[str]:
    panel = click_static_tab(report, "summary")
    cells = panel.locator("table.pcnb-inputs tbody tr td:nth-child(2)").all_inner_texts()
    return [c.strip() for c in cells]


def luminance(css_color: str) -> float:
    r, g, b = (int(v) for v in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def text_luminance(report: Any) -> float:
    return luminance(report.evaluate("(el) => getComputedStyle(el).color"))


# ---------------------------------------------------------------------------------------------
# the graph explorer (viewers/static/graph_explorer.js), the same in both places


def wait_drawn(gx: Any, timeout: float = 60_000) -> int:
    """Wait until the explorer `gx` (a div.pcnb-gx locator) has laid out its picture in the
    browser; returns the layout time in ms (the bundled Graphviz, no `dot`, no network)."""
    gx.page.wait_for_function(
        "(el) => ['ready', 'failed'].includes(el.getAttribute('data-pcnb-state'))",
        arg=gx.element_handle(), timeout=timeout)
    assert gx.get_attribute("data-pcnb-state") == "ready", gx.inner_text()[:500]
    return int(gx.get_attribute("data-pcnb-layout-ms"))


def drawn_nodes(gx: Any) -> list[str]:
    return gx.locator("svg g[data-pcnb-node]").evaluate_all(
        "(els) => els.map((e) => e.getAttribute('data-pcnb-node'))")


def search(gx: Any, text: str) -> list[str]:
    """Type `text` in the search box; returns the names the result list shows."""
    box = gx.locator("input.pcnb-gx-q")
    box.fill(text)
    box.press("Enter")
    gx.locator(".pcnb-gx-side h4", has_text="match").wait_for()
    return [t.strip() for t in gx.locator("ul.pcnb-gx-results li a code").all_inner_texts()]


def outlined(gx: Any, cls: str = "pcnb-gx-mark") -> list[str]:
    """The nodes drawn with class `cls` (pcnb-gx-mark: a kernel's or the selected node's;
    pcnb-gx-match: search hits)."""
    return gx.locator(f"svg g.{cls}[data-pcnb-node]").evaluate_all(
        "(els) => els.map((e) => e.getAttribute('data-pcnb-node'))")


def side_kernels(gx: Any) -> list[str]:
    """The kernels the side panel lists for the selected node."""
    return [t.strip() for t in
            gx.locator("ul.pcnb-gx-node-kernels a.pcnb-gx-klink code").all_inner_texts()]
