"""DTensor models and inputs in one process (world size 1, gloo through an in-memory store):
both backends give eager's DTensors and gradients; a DTensor that differs from the example
(placements, global shape, plain tensor for DTensor and back) is a PrecompileError naming the
argument; a pair received for another world size or mesh is refused before it loads.
Two ranks: tests/core/test_distributed.py."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from precompile_nb import PrecompileError, precompile
from tests.conftest import cuda
from precompile_nb.core import build
from precompile_nb.tools.report import report_data


@pytest.fixture(scope="module")
def mesh():
    from torch.distributed.tensor import init_device_mesh
    started = not dist.is_initialized()
    if started:
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    if started:
        dist.destroy_process_group()


def _model_and_input(mesh, placements=None):
    from torch.distributed.tensor import Replicate, distribute_module, distribute_tensor
    torch.manual_seed(0)
    m = distribute_module(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)), mesh)
    x = distribute_tensor(torch.randn(6, 8), mesh, placements or [Replicate()])
    return m, x


def step(m, x):
    loss = m(x).pow(2).mean()
    loss.backward()
    return loss.detach()


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_dtensor_model_and_input_give_eagers_dtensor_result(mesh, backend):
    from torch.distributed.tensor import DTensor
    m, x = _model_and_input(mesh)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x, backend=backend))
    got, want = f(m, x), m(x)
    assert type(got) is DTensor and got.placements == want.placements
    torch.testing.assert_close(got.full_tensor(), want.full_tensor())


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_gradients_land_on_the_dtensor_parameters_as_in_eager(mesh, backend):
    from torch.distributed.tensor import DTensor
    m, x = _model_and_input(mesh)
    f = precompile.load(*precompile(step, m, x, backend=backend))
    loss = f(m, x)
    got = [p.grad for p in m.parameters()]
    m.zero_grad(set_to_none=True)
    want_loss = step(m, x)
    assert all(type(g) is DTensor for g in got)
    torch.testing.assert_close(loss.full_tensor(), want_loss.full_tensor())
    for g, p in zip(got, m.parameters()):
        assert g.placements == p.grad.placements
        torch.testing.assert_close(g.full_tensor(), p.grad.full_tensor())
    f(m, x)  # a second call accumulates, as eager .backward() does
    for g, p in zip(got, m.parameters()):
        torch.testing.assert_close(p.grad.full_tensor(), 2 * g.full_tensor())


def test_a_dtensor_input_with_other_placements_is_refused_by_name(mesh):
    from torch.distributed.tensor import Shard
    m, x = _model_and_input(mesh)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x))
    with pytest.raises(PrecompileError) as e:
        f(m, x.redistribute(mesh, [Shard(0)]))
    err = e.value
    assert err.invariant == 6 and err.stage == "call" and err.where == "x"
    assert err.expected["placements"] == ["Replicate()"]
    assert err.actual["placements"] == ["Shard(0)"]
    assert "redistribute" in err.hint


def test_a_dtensor_of_another_global_shape_is_refused(mesh):
    from torch.distributed.tensor import Replicate, distribute_tensor
    m, x = _model_and_input(mesh)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x, backend="eager"))
    with pytest.raises(PrecompileError) as e:
        f(m, distribute_tensor(torch.randn(5, 8), mesh, [Replicate()]))
    assert e.value.invariant == 6 and e.value.actual["shape"] == [5, 8]
    assert "shape" in e.value.extra["mismatch"]


def test_a_plain_tensor_for_a_dtensor_and_a_dtensor_for_a_plain_tensor_are_refused(mesh):
    m, x = _model_and_input(mesh)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x))
    with pytest.raises(PrecompileError, match="must be a DTensor") as e:
        f(m, x.to_local())
    assert e.value.where == "x" and "distribute" in e.value.hint
    plain = nn.Linear(8, 4)
    g = precompile.load(*precompile(lambda m, x: m(x), plain, torch.randn(6, 8)))
    with pytest.raises(PrecompileError, match="DTensor where the example was a plain") as e:
        g(plain, x)
    assert e.value.where == "x" and "to_local" in e.value.hint


def test_the_report_shows_each_dtensors_placements_and_mesh(mesh):
    m, x = _model_and_input(mesh)
    data = report_data(build(lambda m, x: m(x), m, x, backend="eager"))
    rows = {i["where"]: i for i in data["inputs"]}
    assert rows["x"]["dtensor"]["placements"] == ["Replicate()"]
    assert rows["x"]["dtensor"]["mesh"] == "cpu [1]"
    assert rows["m.0.weight"]["dtensor"]["shape"] == [16, 8]


def test_a_pair_for_another_world_size_or_mesh_is_refused_before_it_loads(mesh):
    from torch.distributed.tensor import (Replicate, distribute_module, distribute_tensor,
                                          init_device_mesh)

    from precompile_nb.distributed import check_pair_for_this_rank
    m, x = _model_and_input(mesh)
    code, _ = precompile(lambda m, x: m(x), m, x, backend="eager")
    check_pair_for_this_rank(code, (m, x), world_size=1, src_world_size=1)  # fits
    with pytest.raises(PrecompileError, match="another world size") as e:
        check_pair_for_this_rank(code, (m, x), world_size=1, src_world_size=2)
    assert e.value.expected == 2 and e.value.actual == 1
    mesh2d = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
    other = distribute_module(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)),
                              mesh2d)
    x2d = distribute_tensor(x.to_local(), mesh2d, [Replicate(), Replicate()])
    with pytest.raises(PrecompileError, match="another device mesh") as e:
        check_pair_for_this_rank(code, (other, x2d), world_size=1)
    assert e.value.invariant == 6 and "['dp', 'tp']" in e.value.actual


def test_ddp_step_gives_eagers_gradients_and_no_sync_is_refused_with_the_fix(mesh):
    torch.manual_seed(0)
    ddp, ref = (nn.parallel.DistributedDataParallel(nn.Linear(8, 4)) for _ in range(2))
    ref.load_state_dict(ddp.state_dict())
    x = torch.randn(6, 8)
    f = precompile.load(*precompile(step, ddp, x, backend="eager"))
    torch.testing.assert_close(f(ddp, x), step(ref, x))
    for got, want in zip(ddp.parameters(), ref.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
    with ddp.no_sync(), pytest.raises(PrecompileError, match="no_sync") as e:
        precompile(step, ddp, x)
    assert e.value.invariant == 4 and "model.module" in e.value.hint


def test_fsdp1_hsdp_and_an_unsharded_fsdp2_model_are_refused_with_the_fix(mesh):
    from torch.distributed.fsdp import fully_shard
    m = fully_shard(nn.Sequential(nn.Linear(8, 4)), mesh=mesh)
    m.unshard()
    with pytest.raises(PrecompileError, match="not in its sharded state") as e:
        precompile(step, m, torch.randn(6, 8))
    assert e.value.invariant == 4 and "reshard()" in e.value.hint
    m.reshard()
    from torch.distributed.tensor import init_device_mesh
    mesh2d = init_device_mesh("cpu", (1, 1), mesh_dim_names=("replicate", "shard"))
    hsdp = fully_shard(nn.Linear(8, 4), mesh=mesh2d)  # a 2-D mesh: HSDP
    with pytest.raises(PrecompileError, match="more than one data-parallel dimension") as e:
        precompile(step, hsdp, torch.randn(6, 8))
    assert e.value.invariant == 4 and "1-D mesh" in e.value.hint
    from torch.distributed.fsdp import FullyShardedDataParallel
    fsdp1 = FullyShardedDataParallel(nn.Linear(8, 4), device_id=torch.device("cpu"))
    with pytest.raises(PrecompileError, match="FSDP1") as e:
        precompile(step, fsdp1, torch.randn(6, 8))
    assert e.value.invariant == 4 and "fully_shard" in e.value.hint


@cuda
def test_cuda_dtensor_training_step_runs_triton_kernels_and_matches_eager(mesh):
    from torch.distributed.tensor import init_device_mesh
    gpu_mesh = init_device_mesh("cuda", (1,))
    m, x = _model_and_input(gpu_mesh)
    code, cache = precompile(step, m, x)
    assert "triton" in code
    f = precompile.load(code, cache)
    loss = f(m, x)
    got = [p.grad.full_tensor() for p in m.parameters()]
    m.zero_grad(set_to_none=True)
    torch.testing.assert_close(loss.full_tensor(), step(m, x).full_tensor())
    for g, p in zip(got, m.parameters()):
        torch.testing.assert_close(g, p.grad.full_tensor())


@cuda
def test_cuda_a_graph_with_collectives_is_autotuned_at_precompile_and_loads_warm(mesh):
    """Note [every rank tunes a graph with collectives together]: a job of one rank is every
    rank, so the graph runs once at precompile and its load launches one binary per kernel."""
    import torch.distributed._functional_collectives as funcol
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).cuda()
    x = torch.randn(6, 8, device="cuda")

    def reduced(m, x):  # (a DTensor on a mesh of one rank moves nothing: no collective)
        return funcol.all_reduce(m(x), "sum", dist.group.WORLD).softmax(-1)

    art = build(reduced, m, x)
    assert [n.role for n in art.captured.nodes].count("collective") >= 1
    assert art.lowered.tuning is not None
    f = precompile.load(art.python_code, art.cache)
    torch.testing.assert_close(f(m, x), reduced(m, x))
    assert f.__precompile_load__["path"] == "warm", f.__precompile_load__["reason"]


def test_another_tensor_subclass_is_refused_at_capture_with_the_fix():
    from torch.testing._internal.two_tensor import TwoTensor
    x = TwoTensor(torch.randn(3), torch.randn(3))
    with pytest.raises(PrecompileError, match="TwoTensor, a tensor subclass") as e:
        precompile(lambda x: x.sin(), x, backend="eager")
    assert e.value.stage == "capture" and e.value.where == "x"
    assert "__tensor_flatten__" in e.value.hint


def test_the_report_page_lists_dtensor_layouts_and_marks_collectives(mesh):
    from precompile_nb.viewers.graph import ROLE_COLORS
    from precompile_nb.viewers.html import render_report_html
    m, x = _model_and_input(mesh)
    data = report_data(build(lambda m, x: m(x), m, x, backend="eager"))
    page = render_report_html(data)
    assert "DTensor inputs" in page and "Replicate()" in page and "cpu [1]" in page
    assert "collective" in ROLE_COLORS


def test_an_optimizer_inside_fn_keeps_fsdp2_state_as_dtensors_like_eager(mesh):
    from torch.distributed.fsdp import fully_shard

    def opt_step(m, opt, x):
        loss = m(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append(fully_shard(nn.Sequential(nn.Linear(8, 16), nn.GELU(),
                                                nn.Linear(16, 4)), mesh=mesh))
    m, ref = models
    opt, opt_ref = (torch.optim.AdamW(a.parameters(), lr=1e-2) for a in models)
    x = torch.randn(6, 8)
    f = precompile.load(*precompile(opt_step, m, opt, x, backend="eager"))
    for _ in range(3):  # the first call creates the state, the next ones check it
        torch.testing.assert_close(f(m, opt, x), opt_step(ref, opt_ref, x))
    for a, b in zip(m.parameters(), ref.parameters()):
        assert type(opt.state[a]["exp_avg"]) is type(opt_ref.state[b]["exp_avg"])
        torch.testing.assert_close(a.full_tensor(), b.full_tensor())
