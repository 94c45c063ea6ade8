"""Note [kernel names Inductor's launcher check can find]: while precompile lowers for a GPU, a
Triton kernel's name stays under the 150 characters Triton files its binary by, so Inductor
finds every binary and launches every kernel with torch's static launcher, no gcc run."""
from __future__ import annotations

import threading

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core._compat.kernel_names import kernel_names_found_by_inductor, shortened

LONG = "_".join(f"{op}_backward" for op in (
    "elu", "gelu", "hardsigmoid", "hardswish", "leaky_relu", "mish", "silu", "softplus",
    "native_layer_norm", "_scaled_dot_product_efficient_attention"))


def test_a_long_fused_name_is_cut_at_an_op_boundary_and_a_short_one_kept():
    assert shortened("add_mul_relu") == "add_mul_relu"
    cut = shortened(LONG)
    assert LONG.startswith(cut) and len(cut) <= 120 and not cut.endswith("_")
    assert LONG[len(cut)] == "_"  # the next op starts where it was cut
    whole = f"triton_per_fused_{cut}_1234"  # Inductor's triton_<kind>_<fused>_<number>
    assert len(whole) < 150


@pytest.fixture
def long_names(monkeypatch):
    import torch._inductor.codegen.triton as codegen

    monkeypatch.setattr(codegen, "get_fused_kernel_name", lambda *a, **k: LONG)
    return codegen


def test_only_the_lowering_thread_gets_the_cut_name_and_the_original_comes_back(long_names):
    seen = {}
    with kernel_names_found_by_inductor(gpu=True):
        seen["here"] = long_names.get_fused_kernel_name([], "original_aten")
        other = threading.Thread(  # a torch.compile beside the precompile: Inductor's name
            target=lambda: seen.update(other=long_names.get_fused_kernel_name([], True)))
        other.start()
        other.join()
    assert seen == {"here": shortened(LONG), "other": LONG}
    assert long_names.get_fused_kernel_name([], True) == LONG


@pytest.mark.parametrize("gpu,switch", [(False, None), (True, "0"), (True, "off")])
def test_cpu_lowerings_and_the_switch_keep_inductors_names(long_names, monkeypatch, gpu,
                                                           switch):
    if switch is not None:
        monkeypatch.setenv("PRECOMPILE_NB_SHORT_KERNEL_NAMES", switch)
    with kernel_names_found_by_inductor(gpu=gpu):
        assert long_names.get_fused_kernel_name([], True) == LONG


def _activations(x):
    for f in (torch.nn.functional.elu, torch.nn.functional.gelu, torch.nn.functional.silu,
              torch.nn.functional.hardswish, torch.nn.functional.hardsigmoid,
              torch.nn.functional.mish, torch.nn.functional.softplus,
              torch.nn.functional.leaky_relu, torch.nn.functional.selu,
              torch.nn.functional.celu):
        x = f(x)
    return x


def _step(w, x):
    out = _activations(x * w).sum()
    out.backward()
    return out.detach(), w.grad


@pytest.mark.cuda
def test_cuda_every_kernel_of_a_long_named_fusion_gets_the_static_launcher(monkeypatch):
    """A training step whose backward fuses ten activations' backward ops into one kernel,
    whose descriptive name would be over Triton's 150: no Triton launcher is built (no gcc),
    and the loaded step's loss and gradient are eager's."""
    monkeypatch.setenv("PRECOMPILE_NB_LOWERING_REUSE", "0")
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_REUSE", "0")
    import torch._inductor.codegen.triton as codegen
    from triton.backends.nvidia import driver as nv

    names, launchers = [], []
    original = codegen.get_fused_kernel_name
    monkeypatch.setattr(codegen, "get_fused_kernel_name",
                        lambda *a, **k: names.append(original(*a, **k)) or names[-1])
    init = nv.CudaLauncher.__init__
    monkeypatch.setattr(nv.CudaLauncher, "__init__",
                        lambda self, *a, **k: launchers.append(1) or init(self, *a, **k))
    w = torch.randn(256, 256, device="cuda", requires_grad=True)
    x = torch.randn(256, 256, device="cuda")
    f = precompile.load(*precompile(_step, w, x))
    assert max(len(n) for n in names) + len("triton_poi__0") > 150, names  # fused_...
    assert launchers == [], f"{len(launchers)} Triton launchers built by gcc"
    w2 = w.detach().clone().requires_grad_()
    out, grad = f(w2, x)
    ref_out, ref_grad = _step(w.detach().clone().requires_grad_(), x)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(grad, ref_grad)
