"""Which graph nodes each kernel computes (Note [kernel provenance] in core/kernels.py): the
Kernels tab and the graph's kernel links show exactly these, so they must be exact on CPU,
where Inductor writes no comment above its C++ kernels."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from precompile_nb.core import build
from precompile_nb.tools.report import report_data


def predict(model, x):
    return model(x).softmax(-1)


def step(m, x):
    loss = m(x).sum()
    loss.backward()
    return loss


@pytest.fixture(scope="module")
def mlp_softmax():
    """The quickstart's model and computation on CPU (notebooks/01_quickstart.ipynb)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
    return report_data(build(predict, model, torch.randn(8, 16)))


def kernel_nodes(report: dict) -> list[tuple[str, str, list[str]]]:
    return [(k["kind"], k["name"], k["source_nodes"]) for k in report["kernels"]]


def test_each_kernel_of_the_mlp_lists_exactly_the_graph_nodes_it_computes(mlp_softmax):
    # the C++ kernels carry no comment in Inductor's module: their nodes come from the
    # wrapper's data flow; the second addmm reads gelu's result but does not compute it
    assert kernel_nodes(mlp_softmax) == [
        ("cpp", "cpp_fused_gelu_0", ["gelu"]),
        ("cpp", "cpp_fused__softmax_1", ["_softmax"]),
        ("extern", "extern_kernels.addmm", ["t", "addmm"]),
        ("extern", "extern_kernels.addmm", ["t_1", "addmm_1"]),
    ]
    assert [k["fused_ops"] for k in mlp_softmax["kernels"]] == [
        ["aten.gelu"], ["aten._softmax"], ["aten.t", "aten.addmm"], ["aten.t", "aten.addmm"]]


def test_every_computing_node_of_the_mlp_has_a_kernel_and_its_names_are_graph_nodes(
        mlp_softmax):
    names = {n["name"] for n in mlp_softmax["graph"]["nodes"]}
    claimed = [n for k in mlp_softmax["kernels"] for n in k["source_nodes"]]
    assert set(claimed) <= names
    computing = {n["name"] for n in mlp_softmax["graph"]["nodes"] if n["op"] == "call_function"}
    assert computing == set(claimed) and len(claimed) == len(set(claimed))


def test_training_step_kernels_split_forward_and_backward_nodes():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    report = report_data(build(step, m, torch.randn(5, 8)))
    names = {n["name"] for n in report["graph"]["nodes"]}
    by_node: dict[str, list[str]] = {}
    for k in report["kernels"]:
        assert k["source_nodes"], f"{k['name']} lists no graph node"
        assert set(k["source_nodes"]) <= names, (k["name"], k["source_nodes"])
        for n in k["source_nodes"]:
            by_node.setdefault(n, []).append(k["name"])
    # the forward relu and its backward (threshold_backward) are in C++ kernels, the matmuls
    # in extern calls, and no extern call claims a node a C++ kernel computes
    assert by_node["relu"] and all(k.startswith("cpp_") for k in by_node["relu"])
    assert all(k.startswith("cpp_") for k in by_node["threshold_backward"])
    assert by_node["addmm"] == ["extern_kernels.addmm"]
    assert by_node["addmm_1"] == ["extern_kernels.addmm"]
