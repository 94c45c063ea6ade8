"""The invariant-violation explorer on hand-made error_data(...) dicts (no torch)."""
from __future__ import annotations

import html
import re

from precompile_nb.viewers import render_violation_html
from precompile_nb.viewers.explorer import offending_nodes, render_check_html

# what error_data(e) gives for a precompiled f(model, x) called with x of the wrong shape:
# a tensor check's expected/actual are dicts of fields (eager: strides are not checked, so
# only the actual names one), and extra["inputs"] lists every graph input at the call
CALL_ERROR = {
    "what": "f: x: shape differs from the example", "invariant": 3,
    "title": "control flow and shapes are specialized to the example", "stage": "call",
    "where": "x", "expected": {"shape": [2, 4], "dtype": "float32", "device": "cpu"},
    "actual": {"shape": [3, 5], "dtype": "float32", "device": "cpu", "stride": [5, 1]},
    "hint": "pass the example's shape, or mark the dimension dynamic", "extra": {
        "inputs": [
            {"where": "model.weight",
             "expected": {"shape": [4, 4], "dtype": "float32", "device": "cpu"},
             "actual": {"shape": [4, 4], "dtype": "float32", "device": "cpu",
                        "stride": [4, 1]},
             "mismatch": []},
            {"where": "x",
             "expected": {"shape": [2, 4], "dtype": "float32", "device": "cpu"},
             "actual": {"shape": [3, 5], "dtype": "float32", "device": "cpu",
                        "stride": [5, 1]},
             "mismatch": ["shape"]},
            {"where": "y",
             "expected": {"shape": ["<dynamic 1..4096>", 4], "dtype": "float32",
                          "device": "cpu"},
             "actual": "int", "mismatch": ["shape", "dtype", "device"]},
        ]},
    "message": "f: x: shape differs from the example\n  invariant 3: control flow ...",
}

# a tensor of the right shape but the wrong dtype, where the first dim is dynamic
DTYPE_ERROR = {
    **CALL_ERROR, "what": "f: x: dtype or device differs from the example", "invariant": 6,
    "title": "dtype, device and (inductor) layout are specialized",
    "expected": {"shape": ["<dynamic 1..4096>", 4], "dtype": "float32", "device": "cpu",
                 "stride": [4, 1]},
    "actual": {"shape": [7, 4], "dtype": "float64", "device": "cpu", "stride": [4, 1]},
    "extra": {}}

# ... and for a capture of g(x) reading the global tensor W
CAPTURE_ERROR = {
    "what": "g reads 1 tensor(s) that are not inputs; they would be baked into the artifact "
            "as constants", "invariant": 1, "title": "everything live is an input",
    "stage": "capture", "where": "global 'W'",
    "expected": "every tensor fn reads arrives as an argument",
    "actual": "baked constant shape=[3] dtype=torch.float32",
    "hint": "pass `W` to fn as an argument", "extra": {
        "offenders": ["global 'W'"], "nodes": [["mul"]],
        "source": 'File "/home/me/cell7.py", line 3, in g'},
    "message": "g reads 1 tensor(s) ...\n  invariant 1: everything live is an input",
}

USER_CELL = "def g(x):\n    y = x + 1\n    return y * W\n"

GRAPH = [
    {"name": "arg0_1", "op": "placeholder", "target": "x", "args": [], "shape": [3],
     "dtype": "float32", "role": "input", "module": "", "stack": None},
    {"name": "add", "op": "call_function", "target": "aten.add.Tensor", "args": ["arg0_1"],
     "shape": [3], "dtype": "float32", "role": "compute", "module": "", "stack": None},
    {"name": "mul", "op": "call_function", "target": "aten.mul.Tensor", "args": ["add"],
     "shape": [3], "dtype": "float32", "role": "compute", "module": "", "stack": None},
    {"name": "output", "op": "output", "target": "output", "args": ["mul"], "shape": None,
     "dtype": None, "role": "output", "module": "", "stack": None},
]


def text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def expected_actual_rows(page: str) -> dict[str, tuple[str, str, str]]:
    """field -> (expected, actual, class of the cells)."""
    table = page[page.index("pcnb-expact"):].split("</table>")[0]
    rows = {}
    for k, cls, e, _, a in re.findall(r'<tr><td>(\w+)</td><td class="([^"]*)">([^<]*)</td>'
                                      r'<td class="([^"]*)">([^<]*)</td></tr>', table):
        rows[k] = (e, a, cls)
    return rows


def test_explorer_names_the_invariant_in_plain_words_and_the_fix():
    page = render_violation_html(CALL_ERROR)
    t = text(page)
    assert "Invariant 3 broken: control flow and shapes are specialized to the example" in t
    assert "only dimensions marked dynamic may change" in t
    assert "What happened: f: x: shape differs from the example" in t
    assert "Stage: call" in t and "Where: x" in t
    assert "Fix: pass the example's shape, or mark the dimension dynamic" in t


def test_expected_and_actual_are_compared_field_by_field_with_mismatches_marked():
    rows = expected_actual_rows(render_violation_html(CALL_ERROR))
    assert list(rows) == ["shape", "dtype", "device", "stride"]
    assert rows["shape"] == ("[2, 4]", "[3, 5]", "pcnb-mismatch")
    assert rows["dtype"] == ("float32", "float32", "")
    assert rows["device"] == ("cpu", "cpu", "")
    assert rows["stride"] == ("—", "[5, 1]", "")  # only one side names it: not a mismatch


def test_only_the_differing_field_is_marked_and_a_dynamic_dim_matches_any_size():
    rows = expected_actual_rows(render_violation_html(DTYPE_ERROR))
    assert rows["dtype"] == ("float32", "float64", "pcnb-mismatch")
    assert rows["shape"] == ("[&lt;dynamic 1..4096&gt;, 4]", "[7, 4]", "")
    assert rows["device"] == ("cpu", "cpu", "")
    assert rows["stride"] == ("[4, 1]", "[4, 1]", "")
    # a static dim that differs next to a dynamic one is still a mismatch
    err = {**DTYPE_ERROR, "actual": {**DTYPE_ERROR["actual"], "shape": [7, 5]}}
    assert expected_actual_rows(render_violation_html(err))["shape"][2] == "pcnb-mismatch"


def two_cells(page: str) -> list[tuple[str, str]]:
    """The (class, text) of the cells of a two-column expected/actual table."""
    table = page[page.index("pcnb-expact"):].split("</table>")[0]
    assert "<th>field</th>" not in table
    return re.findall(r'<td class="([^"]*)">([^<]*)</td>', table)


def test_free_text_expected_and_actual_are_one_marked_row():
    cells = two_cells(render_violation_html(CAPTURE_ERROR))
    assert cells == [("pcnb-mismatch", "every tensor fn reads arrives as an argument"),
                     ("pcnb-mismatch", "baked constant shape=[3] dtype=torch.float32")]


def test_scalar_and_type_name_expected_and_actual_render_as_two_cells():
    err = {**CALL_ERROR, "where": "arguments", "expected": 3, "actual": 5, "extra": {}}
    assert two_cells(render_violation_html(err)) == [("pcnb-mismatch", "3"),
                                                      ("pcnb-mismatch", "5")]
    err = {**CALL_ERROR, "where": "m", "expected": "torch.nn.Module", "actual": "int",
           "extra": {}}
    assert two_cells(render_violation_html(err)) == [("pcnb-mismatch", "torch.nn.Module"),
                                                      ("pcnb-mismatch", "int")]
    # equal values are shown, not marked
    err = {**CALL_ERROR, "expected": True, "actual": True, "extra": {}}
    assert two_cells(render_violation_html(err)) == [("", "True"), ("", "True")]


def test_a_tensor_expected_against_a_non_tensor_actual_differs_as_a_whole():
    err = {**CALL_ERROR, "actual": "int", "extra": {}}
    assert two_cells(render_violation_html(err)) == [
        ("pcnb-mismatch", "shape=[2, 4] dtype=float32 device=cpu"), ("pcnb-mismatch", "int")]


def inputs_rows(page: str) -> dict[str, tuple[str, str, str, str]]:
    """input -> (row class, expected cell, actual cell, actual cell's class) of the table of
    every input of the call."""
    table = page[page.index("Every input of the call"):].split("</table>")[0]
    rows = {}
    for tr in re.findall(r"<tr(?: class=\"([^\"]*)\")?>(.*?)</tr>", table)[1:]:
        cls, body = tr
        cells = re.findall(r'<td(?: class="([^"]*)")?>(.*?)</td>', body)
        where = text(cells[0][1])
        rows[where] = (cls, cells[1][1], cells[2][1], cells[2][0])
    return rows


def marked(cell: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(r'<span class="pcnb-mismatch">(.*?)</span>',
                                                 cell)]


def test_every_input_of_the_call_is_listed_with_its_mismatching_fields_marked():
    rows = inputs_rows(render_violation_html(CALL_ERROR))
    assert list(rows) == ["model.weight", "x", "y"]
    cls, exp, act, act_cls = rows["model.weight"]  # a fine row: nothing marked
    assert cls == "" and act_cls == "" and marked(exp) == marked(act) == []
    assert text(exp) == "shape=[4, 4] dtype=float32 device=cpu"
    assert text(act) == "shape=[4, 4] dtype=float32 device=cpu stride=[4, 1]"
    cls, exp, act, act_cls = rows["x"]  # only the shape differs
    assert cls == "pcnb-mismatch"
    assert marked(exp) == ["shape=[2, 4]"] and marked(act) == ["shape=[3, 5]"]
    assert text(act) == "shape=[3, 5] dtype=float32 device=cpu stride=[5, 1]"
    cls, exp, act, act_cls = rows["y"]  # an int where a tensor was expected
    assert cls == "pcnb-mismatch" and act_cls == "pcnb-mismatch" and text(act) == "int"
    assert marked(exp) == ["shape=[<dynamic 1..4096>, 4]", "dtype=float32", "device=cpu"]


def test_the_inputs_table_is_only_shown_when_the_error_has_one():
    assert "Every input of the call" not in render_violation_html(CAPTURE_ERROR)
    assert "Every input of the call" not in render_violation_html(DTYPE_ERROR)


def test_the_offending_user_line_is_highlighted_in_its_context():
    page = render_violation_html(CAPTURE_ERROR, source=USER_CELL)
    assert 'File &quot;/home/me/cell7.py&quot;, line 3, in g' in page
    hll = re.findall(r'<span class="hll">(.*?)\n', page)
    assert len(hll) == 1 and "return y * W" in text(hll[0])
    assert "y = x + 1" in text(page)  # context lines around it


def test_the_user_line_is_found_through_linecache_without_source(tmp_path):
    cell = tmp_path / "cell7.py"
    cell.write_text(USER_CELL)
    err = {**CAPTURE_ERROR, "extra": {**CAPTURE_ERROR["extra"],
                                      "source": f'File "{cell}", line 3, in g'}}
    hll = re.findall(r'<span class="hll">(.*?)\n', render_violation_html(err))
    assert len(hll) == 1 and "return y * W" in text(hll[0])


def test_offending_graph_nodes_are_outlined_in_red():
    page = render_violation_html(CAPTURE_ERROR, graph_nodes=GRAPH)
    assert "highlighted: mul" in text(page)
    dot = html.unescape(page[page.index('<pre class="pcnb-dot"'):].split("</pre>")[0])
    line = next(ln for ln in dot.splitlines() if ln.strip().startswith('"n:mul" ['))
    assert 'color="#dc2626", penwidth=4' in line
    assert dot.count("penwidth=4") == 1


def test_a_call_error_outlines_the_input_it_names():
    assert offending_nodes(CALL_ERROR, [{**GRAPH[0], "target": "x"}] + GRAPH[1:]) == {"arg0_1"}
    page = render_violation_html(CALL_ERROR, graph_nodes=GRAPH)
    assert "highlighted: arg0_1" in text(page)


def test_the_full_message_is_kept_in_a_collapsible_block():
    page = render_violation_html(CAPTURE_ERROR)
    m = re.search(r"<details><summary>Full message</summary><pre[^>]*>(.*?)</pre></details>",
                  page, re.S)
    assert m and html.unescape(m.group(1)) == CAPTURE_ERROR["message"]


def test_details_list_the_other_offenders():
    t = text(render_violation_html(CAPTURE_ERROR))
    assert "offenders" in t and "global 'W'" in t


def test_violation_strings_are_escaped():
    err = {**CALL_ERROR, "what": "<script>x()</script>", "where": "<b>x</b>",
           "hint": "<img src=y>", "message": "</pre><script>"}
    page = render_violation_html(err)
    for raw in ("<script>x()</script>", "<b>x</b>", "<img src=y>", "</pre><script>"):
        assert raw not in page


def test_fields_and_values_of_expected_and_actual_are_escaped():
    evil, bold, it = "<img src=z>", "<x-bold>", "<x-it>"
    row = {"where": evil, "expected": {evil: evil, "shape": [evil]},
           "actual": {evil: bold, "shape": [1]}, "mismatch": [evil, "shape"]}
    err = {**CALL_ERROR, "expected": {evil: evil, "dtype": it},
           "actual": {evil: "</td>", "dtype": it}, "extra": {"inputs": [row]}}
    page = render_violation_html(err)
    for raw in (evil, bold, it, "</td></td>"):
        assert raw not in page
    assert "&lt;img src=z&gt;" in page
    for string_form in ({**err, "expected": evil, "actual": bold},
                        {**err, "extra": {"inputs": [{**row, "actual": evil}]}}):
        page = render_violation_html(string_form)
        assert evil not in page and bold not in page


def test_check_findings_show_dict_expected_and_actual_as_fields():
    page = render_check_html("f", [{
        "severity": "error", "invariant": 6, "what": "x is float64", "where": "x",
        "expected": {"shape": [2, 4], "dtype": "float32"},
        "actual": {"shape": [2, 4], "dtype": "float64"}, "hint": "convert it", "source": None,
        "nodes": []}])
    assert "expected: shape=[2, 4] dtype=float32 · actual: shape=[2, 4] dtype=float64" in text(
        page)
