"""diff_reports: what changed between two precompile results, from their reports."""
from __future__ import annotations

import torch
from torch import nn

from precompile_nb.core import build
from precompile_nb.tools.diff import diff_reports
from precompile_nb.tools.report import report_data


def step(m, x):
    loss = m(x).pow(2).mean()
    loss.backward()
    return loss.detach()


def report(model, x, backend="eager"):
    return report_data(build(step, model, x, backend=backend))


def mlp(width: int, layers: int = 2) -> nn.Module:
    torch.manual_seed(0)
    mods: list[nn.Module] = [nn.Linear(8, width)]
    for _ in range(layers - 2):
        mods += [nn.ReLU(), nn.Linear(width, width)]
    mods += [nn.ReLU(), nn.Linear(width, 4)]
    return nn.Sequential(*mods)


def test_diff_of_the_same_precompile_twice_is_empty():
    x = torch.randn(4, 8)
    a, b = report(mlp(16), x), report(mlp(16), x)
    d = diff_reports(a, b)
    assert d.same
    assert d.code_diff == ()
    assert not (d.nodes_added or d.nodes_removed or d.nodes_changed or d.inputs)
    assert d.summary() == "before and after: the same python_code and graph"


def test_diff_of_two_widths_shows_changed_shapes_and_a_python_code_diff():
    x = torch.randn(4, 8)
    d = diff_reports(report(mlp(16), x), report(mlp(32), x), names=("narrow", "wide"))
    assert not d.same
    changed = {c.where: c for c in d.inputs}
    assert changed["m.0.weight"].fields == ("shape",)
    assert changed["m.0.weight"].before.startswith("param [16, 8] float32")
    assert changed["m.0.weight"].after.startswith("param [32, 8] float32")
    assert "x" not in changed  # the input did not change
    nodes = {n.name: n for n in d.nodes_changed}
    assert nodes["addmm"].fields == ("shape",)
    assert (nodes["addmm"].before, nodes["addmm"].after) == ("[4, 16] float32 in m.0",
                                                            "[4, 32] float32 in m.0")
    assert not d.nodes_added and not d.nodes_removed  # the same ops, other sizes
    assert d.code_diff[:2] == ("--- narrow.py", "+++ wide.py")
    assert any(ln.startswith("+") and "32" in ln for ln in d.code_diff[2:])


def test_diff_finds_the_nodes_of_an_added_linear_and_the_op_counts():
    x = torch.randn(4, 8)
    d = diff_reports(report(mlp(16, layers=2), x), report(mlp(16, layers=3), x))
    added = {(n.name, n.target) for n in d.nodes_added}
    assert ("addmm_2", "aten.addmm.default") in added
    assert ("m_4_weight", "m.4.weight") in added and ("m_4_bias", "m.4.bias") in added
    assert {n.module for n in d.nodes_added if n.name == "addmm_2"} == {"m.4"}
    added_inputs = {c.where: c.change for c in d.inputs}
    assert added_inputs["m.4.weight"] == "added" and added_inputs["m.4.bias"] == "added"
    counts = {c.name: (c.before, c.after) for c in d.op_counts}
    assert counts["aten.addmm.default"] == (2, 3)
    assert d.node_totals[1] > d.node_totals[0]


def test_diff_lists_kernels_and_fusions_that_differ():
    a = {"fn_name": "f", "inputs": [], "graph": {"nodes": []}, "python_code": "",
         "kernels": [{"name": "cpp_fused_relu_0", "fused_ops": ["aten.relu"]},
                     {"name": "extern_kernels.mm", "fused_ops": ["aten.mm"]}]}
    b = dict(a, kernels=[{"name": "cpp_fused_gelu_0", "fused_ops": ["aten.gelu"]},
                         {"name": "extern_kernels.mm", "fused_ops": ["aten.mm", "aten.t"]},
                         {"name": "extern_kernels.mm", "fused_ops": ["aten.mm"]}])
    d = diff_reports(a, b)
    changes = {k.name: k.change for k in d.kernels}
    assert changes == {"cpp_fused_relu_0": "removed", "cpp_fused_gelu_0": "added",
                       "extern_kernels.mm": "changed"}
    assert [(c.name, c.before, c.after) for c in d.kernel_counts] == [
        ("cpp_fused_gelu_0", 0, 1), ("cpp_fused_relu_0", 1, 0), ("extern_kernels.mm", 1, 2)]
    assert d.to_data()["kernels"][0]["name"] == "cpp_fused_relu_0"  # JSON-able data
