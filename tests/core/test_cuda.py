"""The inductor backend on CUDA (Triton kernels). Marked `cuda`: skipped with a reason on
machines without a GPU; run on the H200 (results in benchmarks/results/)."""
from __future__ import annotations

import copy

import pytest
import torch

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import build
from precompile_nb.core.cache import read_tag
from precompile_nb.tools.report import report_data
from tests.core.models import assert_sgd_matches_eager, bn_mlp, mlp, train_step
from tests.core.test_inductor import compile_pool_at_capture, fresh_load, upsampling_checked

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def cuda_art():
    m, x = mlp().cuda(), torch.randn(64, 8, device="cuda")
    art = build(lambda m, x: m(x).relu().softmax(-1), m, x)
    return m, x, art


def test_cuda_inference_matches_eager_with_triton_kernels_in_the_report(cuda_art):
    m, x, art = cuda_art
    f = precompile.load(art.python_code, art.cache)
    torch.testing.assert_close(f(m, x), m(x).relu().softmax(-1))
    data = report_data(art)
    kinds = {k["kind"] for k in data["kernels"]}
    assert "triton" in kinds, data["kernels"]
    assert data["device"].startswith("cuda")
    assert "async_compile.triton(" in art.python_code
    print("kernels:", [k["name"] for k in data["kernels"]])


def test_cuda_fresh_process_warm_load_compiles_nothing(cuda_art, tmp_path):
    m, x, art = cuda_art
    ref = m(x).relu().softmax(-1).detach()
    warm = fresh_load(tmp_path, art.python_code, art.cache, m, (x,), ref, "cache")
    assert warm["match"] and warm["load"]["used"]
    # nothing compiled: no C++ build, no new Triton file, no Triton cache write (a kernel
    # compiled again into the same path, e.g. through a stale group file, is one)
    assert warm["cpp_builds"] == 0 and warm["new_triton_files"] == 0, warm
    assert warm["triton_writes"] == 0, warm
    # autotuning ran at precompile: the cache ships each multi-config kernel's choice, and
    # neither the load nor the first call benchmarks a kernel
    _, header = read_tag(art.cache)
    assert any(rel.endswith(".best_config") for _, rel, _, _ in header["files"]), header
    assert warm["autotune_runs"] == [], warm
    cold = fresh_load(tmp_path, art.python_code, art.cache, m, (x,), ref, "nocache")
    assert cold["match"] and cold["new_triton_files"] > 0, cold
    print(f"cuda fresh-process load+first call: warm {warm['seconds']:.2f}s, "
          f"cold {cold['seconds']:.2f}s")


@pytest.mark.parametrize("fork", ["1", "0"])
def test_cuda_precompile_starts_the_compile_workers_before_the_capture(tmp_path, fork):
    """Note [compile workers start with the capture]: Inductor's Triton compile pool (its
    sidecar) is starting while fn is traced, so kernels do not compile one by one in this
    process while it starts (torch.compile starts it too; the cold time is in
    benchmarks/cold_split.py), and its workers are handed jobs that import Triton's compiler
    (two workers: 12 jobs). Where the lowering may fork the workers instead (Note [compile
    workers forked for a build]), a small graph starts the sidecar there."""
    seen = compile_pool_at_capture("cuda", tmp_path, {"PRECOMPILE_NB_FORK_WORKERS": fork})
    assert seen == {"pool": fork == "0", "jobs": 12, "forked": False, "match": True}, seen


def test_cuda_a_large_graph_forks_its_compile_workers(tmp_path):
    """Note [compile workers forked for a build]: ready at once, ended with the build, and the
    result is eager's."""
    seen = compile_pool_at_capture("cuda", tmp_path, {"PRECOMPILE_NB_FORK_WORKERS": "1"},
                                   ops=80)
    assert seen == {"pool": False, "jobs": 0, "forked": True, "match": True}, seen


def test_cuda_layout_mismatch_is_a_precompile_error(cuda_art):
    m, x, art = cuda_art
    f = precompile.load(art.python_code, art.cache)
    with pytest.raises(PrecompileError) as ei:
        f(m, torch.randn(8, 64, device="cuda").t())
    assert ei.value.invariant == 6 and ei.value.where == "x"
    with pytest.raises(PrecompileError) as ei:
        f(m, x.cpu())
    assert ei.value.invariant == 6 and ei.value.expected["device"].startswith("cuda")


def test_cuda_training_step_matches_eager():
    m_ref, x = bn_mlp().cuda(), torch.randn(32, 8, device="cuda")
    f = precompile.load(*precompile(train_step, copy.deepcopy(m_ref), x))
    assert_sgd_matches_eager(f, m_ref, x, steps=3, tol=1e-4)


def test_cuda_unbacked_batch_dim_serves_every_size():
    m = mlp().cuda()
    x = torch.randn(5, 8, device="cuda")
    torch._dynamo.decorators.mark_unbacked(x, 0)
    f = precompile.load(*precompile(lambda m, x: m(x).softmax(-1), m, x))
    for n in (1, 7, 33, 1000):
        xi = torch.randn(n, 8, device="cuda")
        torch.testing.assert_close(f(m, xi), m(xi).softmax(-1))


def test_cuda_contract_cases_run_with_triton_kernels():
    # the contract cases of test_contract.py whose code path differs on the GPU: a dynamic
    # batch in channels_last, one tensor passed twice and mutated, a namedtuple result, a
    # result that views an input, an input read only through its shape
    from tests.core.test_contract import P, ShapeOnly

    x = torch.randn(2, 3, 4, 4, device="cuda").to(memory_format=torch.channels_last)
    torch._dynamo.decorators.mark_unbacked(x, 0)
    f = precompile.load(*precompile(lambda t: torch.relu(t) * 2, x))
    z = torch.randn(5, 3, 4, 4, device="cuda").to(memory_format=torch.channels_last)
    torch.testing.assert_close(f(z), torch.relu(z) * 2)

    def twice(a, b):
        a.mul_(2.0)
        return P(a + b, b.t())

    t = torch.randn(4, 4, device="cuda")
    g = precompile.load(*precompile(twice, t, t))
    u = torch.randn(4, 4, device="cuda")
    u_eager = u.clone()
    want, got = twice(u_eager, u_eager), g(u, u)
    assert type(got) is P and got.y.data_ptr() == u.data_ptr()
    torch.testing.assert_close(got.x, want.x)
    torch.testing.assert_close(u, u_eager)

    h = precompile.load(*precompile(lambda m, a, b: m(a, b), ShapeOnly(),
                                    torch.randn(4, 3, device="cuda"),
                                    torch.randn(2, device="cuda")))
    y = torch.randn(2, device="cuda")
    torch.testing.assert_close(h(ShapeOnly(), torch.randn(3, 4, device="cuda").t(), y), y * 4)


def test_cuda_mark_dynamic_batch_with_batchnorm_serves_every_size_under_its_guards():
    m = bn_mlp().cuda().eval()
    x = torch.randn(8, 8, device="cuda")
    torch._dynamo.mark_dynamic(x, 0)
    art = build(lambda m, x: m(x), m, x)
    assert art.captured.convention.guards  # BatchNorm's condition on the batch, as a guard
    f = precompile.load(art.python_code, art.cache)
    for n in (1, 7, 64, 300):
        xi = torch.randn(n, 8, device="cuda")
        torch.testing.assert_close(f(m, xi), m(xi))
    with pytest.raises(PrecompileError, match="breaks a condition"):
        f(m, torch.randn(0, 8, device="cuda"))


def test_cuda_resnet_style_cnn_with_a_dynamic_batch_matches_eager():
    from tests.core.models import SmallResNet

    torch.manual_seed(0)
    m = SmallResNet().cuda().eval()
    x = torch.randn(8, 3, 16, 16, device="cuda")
    torch._dynamo.mark_dynamic(x, 0)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x))
    for n in (1, 7, 64, 300):
        xi = torch.randn(n, 3, 16, 16, device="cuda")
        torch.testing.assert_close(f(m, xi), m(xi), atol=1e-4, rtol=1e-4)


def test_cuda_cnn_training_step_keeps_one_channels_last_copy_of_each_tensor():
    """Note [backward convolutions see channels_last]: a CNN training step (autocast bf16,
    BatchNorm, SGD inside fn) that Inductor lays out channels_last allocates no NCHW
    activation, gradient or weight copy for its backward convolutions (before: one per
    convolution), and its steps match eager's."""
    from tests.core.test_conv_layout import assert_one_layout_and_eagers_steps, sgd_step

    torch.manual_seed(0)
    c = 96  # over 64 channels: Inductor's rule for training says channels_last
    m_ref = torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.BatchNorm2d(c), torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(c, 10)).cuda()
    assert_one_layout_and_eagers_steps(m_ref, torch.randn(16, 3, 32, 32, device="cuda"),
                                       sgd_step(0.01, autocast="cuda"), 2e-2)


def test_cuda_depthwise_convolutions_of_a_training_step_run_in_nchw_and_match_eager():
    """Note [depthwise convolutions of a CUDA training step run in NCHW]: in a training step
    Inductor lays out channels_last, the depthwise convolution (forward and backward) reads
    NCHW, so ATen runs its own kernels rather than cuDNN's, whose first call in a process is
    slow; the 1x1 convolutions keep channels_last; the gradients are eager's."""
    from tests.core.test_conv_layout import (
        assert_depthwise_nchw_and_the_rest_channels_last,
        depthwise_layouts_and_eagers_grads,
    )

    assert_depthwise_nchw_and_the_rest_channels_last(depthwise_layouts_and_eagers_grads("cuda"))


@pytest.mark.parametrize("train", [False, True])
def test_cuda_bilinear_upsampling_of_a_permuted_table_matches_eager(train):
    # Note [the upsampling torch.compile decomposes]: BEiT failed at the lowering on CUDA, the
    # ATen fallback's strides against its fake kernel's
    assert "aten.upsample_bilinear2d.default" not in upsampling_checked("cuda", train)


@pytest.mark.parametrize("rule", ["on", "0"])
def test_cuda_small_channel_cnn_training_step_keeps_nchw_as_torch_compile_does(monkeypatch,
                                                                            rule):
    # Note [a training step's layout, by torch.compile's rule]: every convolution of 64
    # channels or fewer, so Inductor's rule for training keeps eager's NCHW; the rule for
    # inference (PRECOMPILE_NB_TRAINING_LAYOUT=0) gives channels_last
    from tests.core.test_conv_layout import small_cnn_step_layouts

    monkeypatch.setenv("PRECOMPILE_NB_TRAINING_LAYOUT", rule)
    forward = {nchw for backward, _, nchw in small_cnn_step_layouts("cuda") if not backward}
    assert forward == ({True} if rule == "on" else {False})
