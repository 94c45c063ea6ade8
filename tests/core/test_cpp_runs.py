"""Note [C++ kernels in fewer runs]: a CPU training step, compiled as one graph, is scheduled
so that its C++ nodes make fewer kernels, with eager's values; PRECOMPILE_NB_FEWER_RUNS=0
leaves Inductor's order."""
from __future__ import annotations

import copy
import re

import torch
from torch import nn

from precompile_nb import precompile


def _step(m, x):
    loss = m(x).square().mean()
    loss.backward()
    return loss.detach(), [p.grad for p in m.parameters()]


def _kernels_and_check(monkeypatch, fewer: bool) -> int:
    monkeypatch.setenv("PRECOMPILE_NB_FEWER_RUNS", "1" if fewer else "0")
    torch.manual_seed(0)
    m = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True,
                                   dropout=0.0)
    x = torch.randn(4, 8, 32)
    code, cache = precompile(_step, copy.deepcopy(m), x)
    loss, grads = precompile.load(code, cache)(copy.deepcopy(m), x)
    ref_loss, ref_grads = _step(m, x)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)
    return len(re.findall(r"^cpp_fused\w* = ", code, re.M))


def test_a_cpu_training_step_compiles_to_fewer_cpp_kernels_with_eagers_values(monkeypatch):
    fewer, as_inductor_had_it = (_kernels_and_check(monkeypatch, f) for f in (True, False))
    assert 0 < fewer < as_inductor_had_it, (fewer, as_inductor_had_it)


def test_the_order_is_left_alone_off_the_cpu_and_for_threads_not_compiling():
    """fewer_runs acts on CPU graphs only, and the replaced pass does Inductor's own thing on
    a thread outside precompile (a user's torch.compile beside it)."""
    import torch._inductor.memory as memory

    from precompile_nb.core._compat import cpp_runs

    class Cuda:
        mpi_node = None

        def get_device(self):
            return torch.device("cuda", 0)

    assert cpp_runs.fewer_runs([Cuda(), Cuda()]) is None
    original = memory.reorder_for_peak_memory
    with cpp_runs.cpp_nodes_in_fewer_runs():
        replaced = memory.reorder_for_peak_memory
        assert replaced is not original
        seen = []
        import threading
        t = threading.Thread(target=lambda: seen.append(cpp_runs._PATCH.on()))
        t.start()
        t.join()
        assert seen == [False] and cpp_runs._PATCH.on()
    assert memory.reorder_for_peak_memory is original
