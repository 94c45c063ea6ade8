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
