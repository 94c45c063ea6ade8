"""profile_artifact: run a loaded artifact under torch.profiler and attribute its time to the
graph nodes and modules of its report, forward and backward apart."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from precompile_nb import PrecompileError
from precompile_nb.core import build
from precompile_nb.core.load import load
from precompile_nb.tools.profile import TOP_LEVEL, UNATTRIBUTED, profile_artifact
from precompile_nb.tools.report import report_data
from tests.core.models import mlp, train_step


def loaded(fn, *inputs, backend):
    art = build(fn, *inputs, backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="precompile.load executes")
        return load(art.python_code, art.cache), report_data(art)


@pytest.fixture(scope="module")
def inductor_step():
    m, x = mlp(), torch.randn(16, 8)
    f, report = loaded(train_step, m, x, backend="inductor")
    return f, report, m, x


def _rows(prof):
    return {row.module: row for row in prof.modules}


def kernel_work(kernels, graph_nodes) -> set[tuple[str, str]]:
    """(module, "forward" | "backward") for every graph node a kernel that ran (calls per
    step >= 1) was attributed to: the work the profile accounted, with no clock in it.
    `kernels` are KernelTime rows or their data, `graph_nodes` the report's graph nodes."""
    nodes = {n["name"]: n for n in graph_nodes}
    work = set()
    for k in kernels:
        calls, names = (k["calls"], k["nodes"]) if isinstance(k, dict) else (k.calls, k.nodes)
        if calls >= 1:
            work |= {(nodes[n].get("module") or TOP_LEVEL,
                      "backward" if nodes[n].get("role") == "gradient" else "forward")
                     for n in names}
    return work


def _assert_rows_account_for_the_step(prof):
    """The rows sum to the step, or to the kernels' time where that exceeded the step (a
    busy machine); the unattributed row is what is left of the step, or nothing."""
    rows = prof.modules
    assert rows[-1].module == UNATTRIBUTED  # shown, last, never hidden
    attributed = sum(r.seconds for r in rows[:-1])
    assert rows[-1].seconds == pytest.approx(max(0.0, prof.step_seconds - attributed))
    assert sum(r.seconds for r in rows) == pytest.approx(max(prof.step_seconds, attributed),
                                                         rel=1e-9)


def test_kernels_longer_than_the_step_leave_a_zero_unattributed_row_and_say_by_how_much():
    from precompile_nb.tools.profile import _attribute, _Measured

    report = {"fn_name": "step", "graph": {"nodes": [
        {"name": "addmm", "op": "call_function", "target": "aten.addmm.default",
         "module": "m.0", "role": "compute"}]}}
    kernels = [{"name": "extern_kernels.addmm", "kind": "extern", "source_nodes": ["addmm"],
                "fused_ops": ["aten.addmm"]}]
    prof = _attribute(report, kernels, {0: _Measured(1, 0.0112, 0)}, 0.010, [], {}, None,
                      steps=3, device="cpu")
    assert [(r.module, r.seconds) for r in prof.modules] == [("m.0", 0.0112),
                                                             (UNATTRIBUTED, 0.0)]
    assert any(n.startswith("kernels 1.12× the step time, measured apart") for n in prof.notes)
    fits = _attribute(report, kernels, {0: _Measured(1, 0.008, 0)}, 0.010, [], {}, None,
                      steps=3, device="cpu")
    assert fits.unattributed_seconds == pytest.approx(0.002)
    assert not any("measured apart" in n for n in fits.notes)


def test_profile_of_a_training_step_times_every_linear_forward_and_backward(inductor_step):
    f, report, m, x = inductor_step
    prof = profile_artifact(f, report, (m, x), steps=3, warmup=1, eager=train_step)
    rows = _rows(prof)
    work = kernel_work(prof.kernels, report["graph"]["nodes"])
    assert {("m.0", "forward"), ("m.2", "forward")} <= work, work
    assert {m for m, part in work if part == "backward"}, work  # the backward is in the step
    assert rows["m.0"].nodes and rows["m.2"].nodes
    _assert_rows_account_for_the_step(prof)
    # every kernel of the report ran once per step and goes to graph nodes
    assert {k.index for k in prof.kernels} == set(range(len(report["kernels"])))
    assert all(k.calls == 1 for k in prof.kernels)
    assert all(k.nodes for k in prof.kernels)
    nodes = {n["name"] for n in report["graph"]["nodes"]}
    timed_nodes = set(prof.node_seconds)  # the graph nodes the profile attributed time to
    assert timed_nodes and timed_nodes.issubset(nodes)
    # the eager forward of each Linear was timed by hooks
    assert rows["m.0"].eager_forward_seconds is not None
    assert prof.eager_step_seconds is not None


def test_profile_leaves_gradients_and_buffers_as_they_were(inductor_step):
    f, report, m, x = inductor_step
    m.zero_grad(set_to_none=True)
    profile_artifact(f, report, (m, x), steps=2, warmup=1)
    assert all(p.grad is None for p in m.parameters())
    train_step(m, x)
    before = [p.grad.clone() for p in m.parameters()]
    profile_artifact(f, report, (m, x), steps=2, warmup=1)
    assert all(torch.equal(p.grad, g) for p, g in zip(m.parameters(), before))


def test_profile_data_is_plain_json_for_the_viewers(inductor_step):
    import json

    f, report, m, x = inductor_step
    data = profile_artifact(f, report, (m, x), steps=1, warmup=0).to_data()
    json.dumps(data)
    assert data["modules"][-1]["module"] == UNATTRIBUTED
    attributed = sum(r["seconds"] for r in data["modules"][:-1])
    assert data["modules"][-1]["seconds"] == pytest.approx(max(0.0, data["step_seconds"]
                                                               - attributed))
    assert sum(r["seconds"] for r in data["modules"]) == pytest.approx(max(
        data["step_seconds"], attributed))
    assert isinstance(data["node_seconds"], dict)


def test_eager_backend_profile_times_each_node():
    m, x = mlp(), torch.randn(16, 8)
    f, report = loaded(train_step, m, x, backend="eager")
    prof = profile_artifact(f, report, (m, x), steps=2, warmup=1)
    work = kernel_work(prof.kernels, report["graph"]["nodes"])
    assert {("m.0", "forward"), ("m.2", "forward")} <= work, work
    assert {m for m, part in work if part == "backward"}, work
    addmm = [k for k in prof.kernels if k.nodes == ("addmm",)]
    assert addmm and addmm[0].calls == 1  # one ATen op per node, once per step
    _assert_rows_account_for_the_step(prof)


def test_profile_of_a_plain_function_is_a_clear_error():
    m, x = mlp(), torch.randn(2, 8)
    with pytest.raises(PrecompileError, match="not a loaded precompile artifact"):
        profile_artifact(train_step, {"kernels": [], "graph": {"nodes": []}}, (m, x))
    with pytest.raises(PrecompileError, match="steps must be a positive int"):
        profile_artifact(train_step, {}, (m, x), steps=0)


@pytest.mark.cuda
def test_on_cuda_triton_and_extern_kernels_get_gpu_time_per_module():
    m, x = mlp().cuda(), torch.randn(64, 8, device="cuda")
    f, report = loaded(train_step, m, x, backend="inductor")
    prof = profile_artifact(f, report, (m, x), steps=5, warmup=2, eager=train_step)
    assert prof.device == "cuda" and prof.peak_bytes > 0
    kinds = {k.kind for k in prof.kernels if k.calls >= 1}
    assert "triton" in kinds and "extern" in kinds  # both kinds of range were measured
    work = kernel_work(prof.kernels, report["graph"]["nodes"])
    assert {("m.0", "forward"), ("m.2", "forward")} <= work, work
    assert {m for m, part in work if part == "backward"}, work
    assert _rows(prof)["m.0"].eager_forward_seconds is not None
    _assert_rows_account_for_the_step(prof)


def test_backward_ops_belong_to_the_module_whose_forward_they_differentiate():
    """The profile's backward time per module rests on this: the weight-gradient matmul of
    the first Linear is that Linear's, though it reads only the gradient and the input."""
    from precompile_nb.core.capture import capture
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def step(model, x):
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss.detach()

    c = capture(step, [m, torch.randn(4, 8)])
    module = {n.name: n.module for n in c.nodes}
    grads = {n.name for n in c.nodes if n.role == "gradient"}
    assert module["threshold_backward"] == "model.1"
    # model.0's weight gradient (x^T @ grad) and bias gradient (a sum) are model.0's
    mm_w0 = [n for n in grads if n.startswith("mm") and module[n] == "model.0"]
    sums = [n for n in grads if n.startswith("sum") and module[n] == "model.0"]
    assert mm_w0 and sums, module
    assert {module[n] for n in grads if n.startswith("mm")} == {"model.0", "model.2"}
