"""The static report (render_report_html / render_report_page) on the recorded reports and on
hand-made dicts (no torch)."""
from __future__ import annotations

import html
import json
import re
import shutil

import pytest
from viewer_data import layered_graph, with_changes

from precompile_nb.viewers import graph as graph_mod
from precompile_nb.viewers import render_report_html, render_report_page
from precompile_nb.viewers.html import TABS


def uid_of(page: str) -> str:
    return re.search(r'<div class="pcnb" id="([^"]+)"', page).group(1)


def panel(page: str, key: str) -> str:
    """The HTML of one tab's panel."""
    start = page.index(f'<div class="pcnb-panel pcnb-p-{key}"')
    ends = [page.find(f'<div class="pcnb-panel pcnb-p-{k}"', start + 1) for k, _ in TABS]
    # the report's own script (the jump links) follows the last panel
    ends = [e for e in ends if e > start] + [page.index("<script>\n// links into the source")]
    return page[start:min(ends)]


def line_html(page: str, anchor: str) -> str:
    """The highlighted source line with id `anchor`, as text."""
    m = re.search(rf'<span id="{re.escape(anchor)}">(.*?)\n', page)
    assert m, anchor
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1)))


def test_report_has_the_five_tabs_in_order(report):
    page = render_report_html(report)
    labels = re.findall(r'<label class="pcnb-tablabel" for="[^"]+">([^<]+)</label>', page)
    assert labels == ["Summary", "Source", "Graph", "Kernels", "Invariants"]
    checked = re.findall(r'<input type="radio"[^>]*id="[^"]+-tab-(\w+)" checked>', page)
    assert checked == ["summary"]
    for key, _ in TABS:
        assert f'<div class="pcnb-panel pcnb-p-{key}"' in page


def test_source_is_highlighted_with_an_anchor_on_every_line(report):
    page = render_report_html(report)
    uid = uid_of(page)
    source = panel(page, "source")
    n_lines = len(report["python_code"].splitlines())
    anchors = re.findall(rf'<span id="{uid}-L-(\d+)">', source)
    assert [int(a) for a in anchors] == list(range(1, n_lines + 1))
    assert '<span class="k">def</span>' in source  # Pygments token classes
    assert '<span class="kn">import</span>' in source
    assert line_html(page, f"{uid}-L-1").lstrip().startswith("1# precompile_nb artifact")


def test_section_jump_list_points_at_each_section_marker(report):
    page = render_report_html(report)
    uid = uid_of(page)
    for name, line in report["sections"].items():
        assert f'<a class="pcnb-jump" href="#{uid}-L-{line}">{name} ' in page
        assert f"[precompile_nb:{name}]" in line_html(page, f"{uid}-L-{line}")


def test_calling_convention_has_a_row_for_every_input(report):
    page = render_report_html(report)
    rows = re.findall(r"<tr>(.*?)</tr>", page[page.index('class="pcnb-table pcnb-inputs"'):]
                      .split("</table>")[0])
    body = rows[1:]  # the first row is the header
    assert len(body) == len(report["inputs"])
    for row, inp in zip(body, report["inputs"]):
        cells = re.findall(r"<td>(.*?)</td>", row)
        assert cells[1] == f"<code>{inp['where']}</code>"
        assert cells[2] == inp["kind"] and cells[4] == inp["dtype"]
        assert cells[3] == str(inp["shape"]) and cells[6] == str(inp["stride"])
        assert ("yes" in cells[9]) == inp["mutated"]
        assert ("yes" in cells[8]) == inp["gets_grad"]


def test_kernel_names_link_to_the_line_that_defines_them(report_inductor):
    page = render_report_html(report_inductor)
    uid = uid_of(page)
    kernels = panel(page, "kernels")
    generated = [k for k in report_inductor["kernels"] if k["line"]]
    assert generated
    for k in generated:
        link = f'<a class="pcnb-jump" href="#{uid}-L-{k["line"]}"><code>{k["name"]}</code></a>'
        assert link in kernels
        assert line_html(page, f"{uid}-L-{k['line']}").split(str(k["line"]), 1)[1] \
            .startswith(k["name"])
    for k in report_inductor["kernels"]:
        if not k["line"]:  # library calls have no generated source to link to
            assert f"<td><code>{k['name']}</code></td>" in kernels
    assert "t_1, " not in kernels and "<code>t_1</code>, <code>t_2</code>" in kernels


def test_eager_report_says_no_kernels_were_generated(report_eager):
    kernels = panel(render_report_html(report_eager), "kernels")
    assert "No generated kernels" in kernels and "eager" in kernels


def test_dynamic_dims_are_marked_in_the_shape(report_eager):
    data = with_changes(report_eager)
    data["inputs"][-1]["dynamic"] = {"0": [2, None]}
    page = render_report_html(data)
    assert 'title="dim 0 is dynamic (unbacked), bounds 2..∞; the example had 5">dyn(5)' in page
    assert "[<span class=\"pcnb-dyn\"" in page and "dyn(5)</span>, 8]" in page
    assert "dyn(N)</span>: a dynamic dimension" in page
    assert "pcnb-dyn" not in render_report_html(report_eager).split("<style>")[1] \
        .split("</style>")[1]


def test_invariants_are_listed_with_their_status_colored(report_eager):
    data = with_changes(report_eager)
    data["invariants"][4]["status"] = "n/a"
    inv = panel(render_report_html(data), "invariants")
    assert inv.count("<tr>") == 1 + 7
    assert inv.count('<span class="pcnb-badge pcnb-st-enforced">enforced</span>') == 5
    assert inv.count('<span class="pcnb-badge pcnb-st-caller">caller</span>') == 1
    assert inv.count('<span class="pcnb-badge pcnb-st-na">n/a</span>') == 1
    assert "pcnb-row-violated" not in inv


def test_recorded_violation_marks_its_invariant_and_outlines_its_nodes(report_eager):
    violation = {"what": "f reads 1 tensor(s) that are not inputs", "invariant": 1,
                 "title": "everything live is an input", "stage": "capture",
                 "where": "global 'W'", "expected": "an input", "actual": "a constant",
                 "hint": "pass `W` to fn", "extra": {"nodes": [["addmm"]]}, "message": "m"}
    page = render_report_html(with_changes(report_eager, violation=violation))
    inv = panel(page, "invariants")
    assert '<tr class="pcnb-row-violated"><td>1</td>' in inv
    assert '<span class="pcnb-badge pcnb-st-violated">violated</span>' in inv
    assert "Invariant 1 broken: everything live is an input" in inv
    assert "Invariant 1 violated:" in panel(page, "summary")
    graph = panel(page, "graph")
    assert graph.count("penwidth=4") == 1
    assert re.search(r'&quot;n:addmm&quot; \[[^\n]*penwidth=4', graph)


def test_user_strings_are_escaped(report_eager):
    data = with_changes(report_eager, fn_name="<script>alert(1)</script>")
    data["inputs"][0]["where"] = "m.<b>w</b>"
    data["baked"] = [{"where": "cfg['<i>']", "value": "'<img src=x>'"}]
    data["graph"]["nodes"][0]["target"] = "<svg onload=x>"
    page = render_report_html(data)
    for raw in ("<script>alert(1)</script>", "m.<b>w</b>", "<i>", "<img src=x>",
                "<svg onload=x>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "m.&lt;b&gt;w&lt;/b&gt;" in page


@pytest.mark.parametrize("load, expected", [
    (None, "not loaded yet"),
    ({"cache_files": 27, "written": 27, "present": 0, "used": True},
     "hit</span>: 27 compiled file(s) installed (27 written, 0 already present)"),
    ({"cache_files": 27, "written": 0, "present": 0, "used": False},
     "miss</span> the cache's 27 file(s) were not used"),
    ({"cache_files": 0, "written": 0, "present": 0, "used": False}, "nothing to install"),
    ({"cache_files": 3, "written": 3, "present": 0, "used": True, "path": "warm",
      "reason": "cache in place: 2 Triton kernel(s) launched from their cubins, no compiler",
      "seconds": {"read": 0.01, "cache_read": 0.02, "compile": 0.03, "execute": 0.04}},
     "load took 0.100 s: read 0.010 s, cache read 0.020 s, compile 0.030 s, execute 0.040 s"),
])
def test_cache_load_is_reported_as_hit_or_miss(report_inductor, load, expected):
    data = with_changes(report_inductor)
    data["cache"]["load"] = load
    summary = panel(render_report_html(data), "summary")
    assert html.unescape(expected) in html.unescape(summary)


def test_summary_lists_the_guards_with_their_lines_and_the_dims_they_pin(report_inductor):
    data = with_changes(report_inductor, guards=[
        {"text": "(16*x.size(0)) != 0", "source": "/work/train.py:12: y = model(x)"},
        {"text": "a.size(0) == b.size(0)", "source": None},
        {"text": "x.size(1) == 8", "source": "/work/train.py:14: n = int(x.shape[1])"}])
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert "Guards on dynamic sizes" in text
    assert "(16*x.size(0)) != 0/work/train.py:12: y = model(x)" in text
    assert "a.size(0) == b.size(0)the graph (asserted while tracing)" in text
    assert "specialised despite the mark: x.size(1) to 8" in text


def test_summary_lists_the_sizes_autotuned_at_and_the_kernels_tuned_by_size(report_inductor):
    data = with_changes(report_inductor, guards=[{"text": "x.size(0) != 0", "source": None}],
                        autotuning={
        "at": [{"x": [64, 3, 32, 32]}, {"x": [1, 3, 32, 32]}], "kernels": [3, 3],
        "skipped": [{"at": {"x": [4096, 3, 32, 32]},
                     "why": "its inputs are 64x the example's (more than 8x)"}],
        "by_size": ["triton_poi_fused_relu_1"]})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert "Autotuned sizes" in text
    assert "x (64, 3, 32, 32)3" in text and "x (1, 3, 32, 32)3" in text
    assert "1 kernel(s) keep a configuration per size: triton_poi_fused_relu_1" in text
    assert ("not tuned at x (4096, 3, 32, 32): its inputs are 64x the example's (more than "
            "8x)") in text
    one = with_changes(data, autotuning={**data["autotuning"], "by_size": [], "skipped": []})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(one), "summary")))
    assert "every kernel chose one configuration for all these sizes" in text


def test_summary_of_a_static_artifact_has_no_guard_section(report_inductor):
    page = render_report_html(with_changes(report_inductor, guards=[]))
    assert "Guards on dynamic sizes" not in page


def test_summary_shows_device_weights_grads_effects_timings_and_sizes(report_inductor):
    summary = html.unescape(panel(render_report_html(report_inductor), "summary"))
    text = re.sub(r"<[^>]+>", "", summary)
    assert "backend inductor · device cpu · torch 2.13.0+cpu" in text
    assert "9 parameter/buffer tensors, 277 elements, 1.1 KiB" in text
    assert "accumulated into .grad of: m.0.weight, m.0.bias" in text
    assert ("mutated in place (written back): m.1.running_mean, m.1.running_var, "
            "m.1.num_batches_tracked") in text
    stages = dict(report_inductor["stages"])
    assert f"lower{stages['lower']:.2f} s" in text
    assert f"capture{stages['capture'] * 1000:.1f} ms" in text
    lines = len(report_inductor["python_code"].splitlines())
    assert (f"python_code{report_inductor['python_code_bytes'] / 1024:.1f} KiB ({lines} lines)"
            in text)
    assert f"cache{report_inductor['cache']['bytes'] / 1024:.1f} KiB" in text


def without_scripts(page: str) -> str:
    """The page without its <script> elements (the bundled Graphviz holds SVG strings)."""
    return re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)


def explorer_data(page: str) -> list[dict]:
    """The JSON data of every graph explorer in the page."""
    return [json.loads(m) for m in re.findall(
        r'<script type="application/json" class="pcnb-gx-data">(.*?)</script>', page, re.S)]


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs the Graphviz `dot` binary")
def test_graph_tab_embeds_a_static_svg_when_dot_is_installed(report_eager):
    page = render_report_html(report_eager)
    graph = without_scripts(panel(page, "graph"))
    assert re.search(r'<div class="pcnb-svg pcnb-gx-picture" id="[^"]+-gv"><svg', graph)
    assert "laid out by dot in" in graph
    assert '<script type="module">' not in page
    assert "<details><summary>DOT source" in graph


def test_graph_tab_without_dot_is_drawn_by_the_bundled_graphviz(report_eager, monkeypatch):
    monkeypatch.setattr(graph_mod.shutil, "which", lambda name: None)
    page = render_report_html(report_eager)
    uid = uid_of(page)
    graph = without_scripts(panel(page, "graph"))
    assert "<svg" not in graph
    assert f'<div class="pcnb-svg pcnb-gx-picture" id="{uid}-g-gv">' in graph
    assert f'<pre class="pcnb-dot" id="{uid}-g-dot">digraph G {{' in graph
    assert "apt-get install graphviz" in graph
    # Graphviz in WebAssembly is inlined, never fetched
    assert page.count("window.__pcnbViz = window.Viz") == 1
    assert "import(" not in without_scripts(page) and "cdn." not in page
    assert not re.search(r'<script[^>]+src=', page)


def test_an_output_with_two_graphs_carries_the_graphviz_renderer_once(report_eager):
    violation = {"what": "f reads 1 tensor(s) that are not inputs", "invariant": 1,
                 "title": "everything live is an input", "stage": "capture",
                 "where": "global 'W'", "expected": "an input", "actual": "a constant",
                 "hint": "pass `W` to fn", "extra": {"nodes": [["addmm"]]}, "message": "m"}
    page = render_report_html(with_changes(report_eager, violation=violation))
    assert len(explorer_data(page)) == 2  # the Graph tab, and the violation's graph
    assert page.count("Viz.js 3.31.0 (MIT") == 1
    assert page.count("window.__pcnbGX = GX") == 1
    assert page.count("window.__pcnbGX.wire(root)") == 2


def test_graph_explorer_data_links_every_kernel_to_its_nodes_and_source_line(report_inductor):
    page = render_report_html(report_inductor)
    uid = uid_of(page)
    (data,) = explorer_data(page)
    names = [n["name"] for n in data["nodes"]]
    assert names == [n["name"] for n in report_inductor["graph"]["nodes"]]
    assert [k["name"] for k in data["kernels"]] == [k["name"] for k in
                                                    report_inductor["kernels"]]
    for k, rec in zip(data["kernels"], report_inductor["kernels"]):
        # (names functionalization rewrote, the in-place add_ of num_batches_tracked and the
        # copy_ write-backs of the running stats, are the functional graph's)
        assert k["nodes"] == rec["source_nodes"] and set(k["nodes"]) & set(names)
        if rec["line"]:
            assert k["anchor"] == f"{uid}-L-{rec['line']}" and f'id="{k["anchor"]}"' in page
            first = report_inductor["python_code"].splitlines()[rec["line"] - 1]
            assert k["src"].startswith(first)
        else:
            assert k["anchor"] is None and k["src"] == ""
    node = next(n for n in data["nodes"] if n["name"] == "addmm")
    assert node["shape"] == "[5, 16]" and node["module"] == "m.0"
    kernels = panel(page, "kernels")
    assert kernels.count('class="pcnb-gx-show"') == sum(
        1 for k in report_inductor["kernels"] if k["source_nodes"])


def test_graph_explorer_data_survives_script_breaking_names(report_eager):
    data = with_changes(report_eager)
    data["graph"]["nodes"][1]["name"] = "</script><script>alert(1)</script>"
    page = render_report_html(data)
    assert "</script><script>alert(1)" not in page
    assert explorer_data(page)[0]["nodes"][1]["name"] == "</script><script>alert(1)</script>"


def test_big_graph_in_the_report_is_collapsed_by_module(report_eager):
    data = with_changes(report_eager, graph={"nodes": layered_graph(40, 124)})
    graph = panel(render_report_html(data, svg=False), "graph")
    assert "5002 nodes in the graph" in graph
    assert "module(s) collapsed to stay under the budget of 400 nodes" in graph
    assert "<summary>Collapsed modules</summary>" in graph


def test_report_page_is_a_complete_document_that_needs_no_network(report_inductor):
    page = render_report_page(report_inductor)
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<title>precompile report: step</title>" in page
    assert '<meta charset="utf-8">' in page
    if shutil.which("dot"):  # with a static SVG nothing is fetched
        assert not re.search(r'(src|href)="https?:', page)
        assert "import(" not in page and "<link" not in page


def test_two_reports_on_one_page_do_not_share_ids(report_eager, report_inductor):
    a, b = render_report_html(report_eager), render_report_html(report_inductor)
    assert uid_of(a) != uid_of(b)
    ids_a = set(re.findall(r'id="([^"]+)"', without_scripts(a)))
    ids_b = set(re.findall(r'id="([^"]+)"', without_scripts(b)))
    assert ids_a and not ids_a & ids_b  # the SVGs' own ids (node1, ...) are scoped too
    assert uid_of(render_report_html(report_eager)) == uid_of(a)  # stable for the same data


def test_styles_follow_the_jupyterlab_dark_theme_and_the_os_preference(report_eager):
    page = render_report_html(report_eager)
    css = page.split("<style>")[1].split("</style>")[0]
    assert 'body[data-jp-theme-light="false"] .pcnb' in css
    assert ".jp-Theme-dark .pcnb" in css
    assert "@media (prefers-color-scheme: dark)" in css
    assert "var(--jp-content-font-color1" in css  # follows the notebook's own colors


def test_a_plain_tensor_output_reads_graph_output_without_empty_fields(report):
    # the recorded outputs carry dtensor None (a plain tensor): nothing to say about it
    data = with_changes(report, outputs=[{"kind": "graph", "index": 0, "dtensor": None},
                                         {"kind": "graph", "index": 1, "dtensor": ""}])
    summary = panel(render_report_html(data), "summary")
    assert "graph output #0" in summary and "graph output #1" in summary
    assert "dtensor=" not in summary


def test_summary_says_how_many_pieces_the_graph_was_compiled_in(report_inductor):
    data = with_changes(report_inductor, compiled_in={
        "pieces": 3, "why": "PRECOMPILE_NB_PIECES=3", "seconds": 20.1,
        "workers": [[6.4, 6.5, 17.6], [6.5, 6.5, 16.2], [6.4, 6.4, 16.1]]})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert "Inductor compiled the graph in 3 pieces at once, in worker processes" in text
    assert "piece 0: worker ready after 6.4 s, its piece compiled at 17.6 s" in text
    one = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(report_inductor),
                                                      "summary")))
    assert "Inductor compiled the graph in one piece" in one and "worker ready" not in one
    eager = with_changes(report_inductor, compiled_in=None)
    assert "compiled the graph in" not in render_report_html(eager)


def test_summary_says_whether_aot_autograd_traced_the_graph_first_and_why(report_inductor):
    # Note [one trace between capture and Inductor]
    def summary(aot):
        data = with_changes(report_inductor, compiled_in={
            "pieces": 1, "why": "one piece", "seconds": 0.0, "workers": [],
            "aot_autograd": aot})
        return re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))

    assert "handed to Inductor directly: AOTAutograd's two traces skipped" in summary("")
    text = summary("twice_default runs twice.default, not an ATen op")
    assert "through AOTAutograd first: twice_default runs twice.default, not an ATen op" in text
    assert "AOTAutograd" not in summary(None)  # in pieces: each piece decided apart


def test_summary_says_when_views_were_lowered_as_reshapes(report_inductor):
    # Note [a view the decompositions made impossible]
    def summary(views):
        data = with_changes(report_inductor, compiled_in={
            "pieces": 1, "why": "one piece", "seconds": 0.0, "workers": [],
            "aot_autograd": "", "views_as_reshapes": views})
        return re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))

    assert "lowered again with the graph's 3 views as reshapes" in summary(3)
    assert "as reshapes" not in summary(0)


def test_summary_says_how_many_cpp_kernels_came_from_earlier_precompiles(report_inductor):
    # Note [C++ kernels built once]
    data = with_changes(report_inductor, kernel_builds={"reused": 3, "built": 1})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert "C++ builds: 3 taken from earlier precompiles, 1 compiled" in text
    assert "taken from earlier" not in render_report_html(
        with_changes(report_inductor, kernel_builds=None))


def test_summary_says_how_many_triton_kernels_came_from_earlier_precompiles(report_inductor):
    # Note [Triton kernels compiled once]
    data = with_changes(report_inductor, kernel_builds={"triton_reused": 30, "triton_compiled": 2})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert "Triton kernels: 30 taken from earlier precompiles, 2 compiled" in text
    assert "C++ builds" not in text


def test_summary_says_how_many_triton_kernels_compiled_on_threads(report_inductor):
    # Note [kernels on threads while the workers start]
    data = with_changes(report_inductor, kernel_builds={"on_threads": 39})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert ("Triton kernels: 39 compiled on threads of this process while Inductor's compile "
            "workers started") in text
    assert "C++ builds" not in text  # no C++ build in a graph of Triton kernels only
    assert "handed to the workers" not in text


def test_summary_says_the_compile_workers_were_forked_for_the_build(report_inductor):
    # Note [compile workers forked for a build]
    data = with_changes(report_inductor, kernel_builds={"triton_compiled": 39,
                                                        "forked_workers": 16})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert ("Triton compile workers: 16 forked from this process for the build, ended with it"
            in text)
    assert "compiled on threads" not in text


def test_summary_says_how_many_kernels_sent_to_threads_went_to_the_workers(report_inductor):
    data = with_changes(report_inductor, kernel_builds={"on_threads": 39,
                                                        "handed_to_workers": 12})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert ("Triton kernels: 27 compiled on threads of this process while Inductor's compile "
            "workers started, 12 handed to the workers once they were ready") in text


def test_summary_says_when_the_whole_lowering_came_from_an_earlier_precompile(report_inductor):
    # Note [a lowering made once]
    data = with_changes(report_inductor, kernel_builds={"lowering_reused": 1})
    text = re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))
    assert ("Lowering: taken whole from an earlier precompile of the same graph with the same "
            "settings; Inductor did not run") in text
    assert "C++ builds" not in text and "Triton kernels:" not in text


def test_summary_says_the_convolutions_layout_and_what_decided_it(report_inductor):
    # Note [a training step's layout, by torch.compile's rule]
    def summary(layout):
        data = with_changes(report_inductor, compiled_in={
            "pieces": 1, "why": "one piece", "seconds": 0.0, "workers": [],
            "aot_autograd": "", "views_as_reshapes": 0, "conv_layout": layout})
        return re.sub(r"<[^>]+>", "", html.unescape(panel(render_report_html(data), "summary")))

    assert ("convolutions in NCHW: by Inductor's rule for training steps, as torch.compile "
            "decides a training step's layout") in summary(["NCHW", "training"])
    assert "convolutions in channels_last: by Inductor's rule for inference graphs" in \
        summary(["channels_last", "inference"])
    assert "convolutions in" not in summary(None)
