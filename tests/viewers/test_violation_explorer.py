"""The invariant-violation explorer on hand-made error_data(...) dicts (no torch)."""
from __future__ import annotations

import html
import re

from precompile_nb.viewers import render_violation_html
from precompile_nb.viewers.explorer import offending_nodes

# what error_data(e) gives for a precompiled f(model, x) called with x of the wrong shape
CALL_ERROR = {
    "what": "f: x: shape differs from the example", "invariant": 3,
    "title": "control flow and shapes are specialized to the example", "stage": "call",
    "where": "x", "expected": "shape=[2, 4] dtype=float32 device=cpu",
    "actual": "shape=[3, 5] dtype=float32 device=cpu stride=[5, 1]",
    "hint": "pass the example's shape, or mark the dimension dynamic", "extra": {},
    "message": "f: x: shape differs from the example\n  invariant 3: control flow ...",
}

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
    assert rows["shape"] == ("[2, 4]", "[3, 5]", "pcnb-mismatch")
    assert rows["dtype"] == ("float32", "float32", "")
    assert rows["device"] == ("cpu", "cpu", "")
    assert rows["stride"] == ("—", "[5, 1]", "")  # only one side names it: not a mismatch


def test_free_text_expected_and_actual_are_one_marked_row():
    page = render_violation_html(CAPTURE_ERROR)
    table = page[page.index("pcnb-expact"):].split("</table>")[0]
    assert table.count('class="pcnb-mismatch"') == 2
    assert "baked constant shape=[3] dtype=torch.float32" in table


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
