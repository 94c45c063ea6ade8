"""The Diff and Profile views render hand-made data (no torch): what a user reads in them."""
from __future__ import annotations

import html
import re

from precompile_nb.viewers.diff import code_diff_html, render_diff_html
from precompile_nb.viewers.profile import profile_section, profile_text, render_profile_html


def diff_data(**over):
    data = {
        "a": "narrow", "b": "wide", "fn_names": ["step", "step"],
        "backends": ["inductor", "inductor"],
        "inputs": [{"where": "m.0.weight", "change": "changed", "fields": ["shape"],
                    "before": "param [16, 8] float32 cpu", "after": "param [32, 8] float32 cpu"},
                   {"where": "m.4.bias", "change": "added", "fields": [], "before": None,
                    "after": "param [4] float32 cpu"}],
        "outputs": None, "guards": None,
        "nodes_added": [{"name": "addmm_2", "target": "aten.addmm.default", "change": "added",
                         "fields": [], "module": "m.4", "before": None,
                         "after": "[4, 4] float32 in m.4"}],
        "nodes_removed": [],
        "nodes_changed": [{"name": "addmm", "target": "aten.addmm.default",
                           "change": "changed", "fields": ["shape"], "module": "m.0",
                           "before": "[4, 16] float32 in m.0",
                           "after": "[4, 32] float32 in m.0"}],
        "op_counts": [{"name": "aten.addmm.default", "before": 2, "after": 3}],
        "kernels": [{"name": "cpp_fused_relu_0", "change": "removed",
                     "before": ["aten.relu"], "after": None}],
        "kernel_counts": [{"name": "extern_kernels.addmm", "before": 2, "after": 3}],
        "node_totals": [30, 35], "kernel_totals": [8, 9], "cache_bytes": [1000, 2000],
        "python_code_bytes": [5000, 5200],
        "stages": [["capture", 0.5, 0.25], ["lower", 10.0, None]],
        "code_diff": ["--- narrow.py", "+++ wide.py", "@@ -1,2 +1,2 @@", " keep",
                      "-buf = empty((16,))", "+buf = empty((32,)) # <x>"],
        "same": False, "summary": "narrow -> wide: 2 input(s) differ",
    }
    data.update(over)
    return data


def profile_data(**over):
    data = {
        "fn_name": "train_step", "device": "cpu", "steps": 5, "step_seconds": 0.010,
        "kernel_seconds": 0.008, "unattributed_seconds": 0.002, "eager_step_seconds": 0.020,
        "kernels": [{"index": 0, "name": "extern_kernels.addmm", "kind": "extern", "calls": 1,
                     "seconds": 0.006, "bytes": 2048, "nodes": ["addmm"],
                     "attribution": "source nodes", "backward_fraction": 0.0},
                    {"index": 1, "name": "cpp_fused_relu_0", "kind": "cpp", "calls": 1,
                     "seconds": 0.002, "bytes": 0, "nodes": ["relu", "threshold_backward"],
                     "attribution": "op names", "backward_fraction": 0.5}],
        "modules": [{"module": "m.0", "forward_seconds": 0.006, "backward_seconds": 0.001,
                     "eager_forward_seconds": 0.012, "nodes": 2, "unsplit_seconds": 0.0,
                     "seconds": 0.007},
                    {"module": "m.<1>", "forward_seconds": 0.001, "backward_seconds": 0.0,
                     "eager_forward_seconds": 0.0005, "nodes": 1, "unsplit_seconds": 0.0,
                     "seconds": 0.001},
                    {"module": "(unattributed)", "forward_seconds": 0.0,
                     "backward_seconds": 0.0, "eager_forward_seconds": None, "nodes": 0,
                     "unsplit_seconds": 0.002, "seconds": 0.002}],
        "node_seconds": {"addmm": 0.006, "relu": 0.001, "threshold_backward": 0.001},
        "outside": [{"name": "aten::add_", "seconds": 0.0004}],
        "notes": ["1 kernel(s) list no source nodes"],
    }
    data.update(over)
    return data


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", fragment,
                                                         flags=re.S)))


def test_diff_view_shows_changed_shapes_added_nodes_and_the_highlighted_code_diff():
    page = render_diff_html(diff_data())
    words = " ".join(text(page).split())
    assert "m.0.weight changed shape param [16, 8] float32 cpu param [32, 8] float32 cpu" in words
    assert "addmm_2 aten.addmm.default added m.4" in words
    assert "aten.addmm.default 2 3" in words  # op counts
    assert "cpp_fused_relu_0 removed" in words
    assert '<span class="pcnb-d-del">-buf = empty((16,))</span>' in page
    assert '<span class="pcnb-d-add">+buf = empty((32,)) # &lt;x&gt;</span>' in page  # escaped
    assert '<span class="pcnb-d-hunk">@@ -1,2 +1,2 @@</span>' in page
    # every section is collapsible; the code diff is open when short
    assert page.count("<details") == 5 and "<details open><summary><b>python_code" in page


def test_diff_view_of_the_same_result_says_so():
    page = render_diff_html(diff_data(inputs=[], nodes_added=[], nodes_changed=[],
                                      op_counts=[], kernels=[], kernel_counts=[],
                                      code_diff=[], same=True))
    assert "the same python_code" in page and "the same nodes" in page
    assert "pcnb-d-add" not in page.split("</style>", 2)[-1]
    assert code_diff_html([]) == '<p class="pcnb-muted">the same python_code</p>'


def test_profile_view_shows_modules_with_the_unattributed_row_and_the_sum():
    section = profile_section(profile_data(), "u1")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section.split("Top kernels")[0], flags=re.S)
    cells = [" ".join(text(r).split()) for r in rows]
    assert cells[1].startswith("m.0 6.000 ms 1.000 ms 7.000 ms 70.0%")
    assert "12.000 ms 2.00× faster" in cells[1]  # eager forward / compiled forward
    assert "0.50× slower" in cells[2]
    assert cells[3].startswith("(unattributed) – – 2.000 ms 20.0%")
    assert cells[4].startswith("sum 10.000 ms 100.0%")
    assert 'class="pcnb-unattributed"' in section
    assert "m.&lt;1&gt;" in section  # names are escaped


def test_profile_view_lists_top_kernels_with_their_nodes_and_the_notes():
    page = render_profile_html(profile_data())
    words = " ".join(text(page).split())
    assert "extern_kernels.addmm extern 6.000 ms 60.0% 1 2.0 KiB forward addmm" in words
    assert "cpp_fused_relu_0 cpp 2.000 ms 20.0% 1 – both relu , threshold_backward (op names)" \
        in words
    assert "aten::add_" in words and "1 kernel(s) list no source nodes" in words
    assert profile_text(profile_data()) == ("<Profile train_step on cpu: 5 step(s), 2 kernel(s), "
                                            "2 module(s)>")


def test_profile_view_without_eager_timing_has_no_eager_columns():
    data = profile_data(eager_step_seconds=None)
    for m in data["modules"]:
        m["eager_forward_seconds"] = None
    words = " ".join(text(profile_section(data, "u2")).split())
    assert "eager forward" not in words and "faster" not in words


def _module_cells(section):
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section.split("Top kernels")[0], flags=re.S)
    return [" ".join(text(r).split()) for r in rows]


def test_kernels_longer_than_the_step_show_no_negative_row_and_at_most_100_percent():
    # a busy machine: the kernels, profiled, took 11.2 ms of a 10 ms step timed apart
    data = profile_data(unattributed_seconds=-0.0012, kernel_seconds=0.0112)
    data["modules"][0].update(forward_seconds=0.009, backward_seconds=0.0012, seconds=0.0102)
    data["modules"][-1].update(unsplit_seconds=-0.0012, seconds=-0.0012)
    section = profile_section(data, "u3")
    cells = _module_cells(section)
    assert cells[3].startswith("(unattributed) – – 0.000 ms 0.0%")
    assert cells[4].startswith("sum 11.200 ms 100.0% (kernels 1.12× the step time, measured "
                               "apart)")
    words = " ".join(text(section).split())
    assert "100% of the step is attributed to graph nodes (kernels 1.12× the step time" in words
    assert cells[1].startswith("m.0 9.000 ms 1.200 ms 10.200 ms 100.0%")  # capped too
    assert "-1.200 ms" not in words and "112" not in words and "102.0%" not in words


def test_a_step_the_kernels_fill_exactly_reads_100_percent_without_a_note():
    data = profile_data(unattributed_seconds=0.0)
    data["modules"][0].update(forward_seconds=0.008, backward_seconds=0.001, seconds=0.009)
    data["modules"][-1].update(unsplit_seconds=0.0, seconds=0.0)
    words = " ".join(text(profile_section(data, "u4")).split())
    assert "100% of the step is attributed" in words and "measured apart" not in words


def test_an_inference_profile_has_no_backward_columns():
    data = profile_data()
    for m in data["modules"]:
        m["backward_seconds"] = 0.0
    data["modules"][0]["seconds"] = 0.006
    for k in data["kernels"]:
        k["backward_fraction"] = 0.0
    section = profile_section(data, "u5")
    head = section.split("Top kernels")[0]
    assert "<th>backward</th>" not in head and "<th>pass</th>" not in section
    assert "backward nodes count toward" not in section and ".grad" not in section
    cells = _module_cells(section)
    assert cells[0].split()[:4] == ["module", "forward", "total", "of"]
    assert cells[1].startswith("m.0 6.000 ms 6.000 ms 60.0%")
    # a training step keeps them
    train = profile_section(profile_data(), "u6")
    assert "<th>backward</th>" in train and "<th>pass</th>" in train


def test_a_profiled_report_gets_a_profile_tab_with_the_graph_coloured_by_time():
    from precompile_nb.viewers.html import render_report_html
    from tests.viewers.viewer_data import load_report
    report = load_report("inductor")
    plain = render_report_html(report, svg=False)
    assert ">Profile</label>" not in plain  # no profile yet: no tab
    report["profile"] = profile_data()
    page = render_report_html(report, svg=False)
    assert 'class="pcnb-tabin pcnb-tin-profile"' in page and ">Profile</label>" in page
    assert "(unattributed)" in page and "The graph coloured by time" in page
    # the slowest node is the deepest red, a node with no time stays white-grey
    assert '"name":"addmm"' in page and '"fill":"#dc2626"' in page
    assert '"fill":"#f3f4f6"' in page
