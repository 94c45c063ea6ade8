"""Note [stack lines read when kept]: capture's node stack traces are torch's own, read lazily."""
from __future__ import annotations

import torch
import torch.fx.proxy as fx_proxy

from precompile_nb.core.capture import capture


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2  # the block's line


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Block(), Block()

    def forward(self, x):
        return self.b(self.a(x)).sum()


def step(m, x):
    loss = m(x)
    loss.backward()
    return loss


def _traces(monkeypatch, lazy: str) -> list:
    monkeypatch.setenv("PRECOMPILE_NB_LAZY_STACK_LINES", lazy)
    torch.manual_seed(0)
    c = capture(step, [Net(), torch.randn(3, 4)])
    return [(n.name, n.meta.get("stack_trace")) for n in c.graph.graph.nodes]


def test_lazy_stack_lines_record_the_same_traces_as_torch(monkeypatch):
    original = fx_proxy.CapturedTraceback
    lazy, torchs = _traces(monkeypatch, "1"), _traces(monkeypatch, "0")
    assert lazy == torchs
    texts = [t for _, t in lazy if t]
    # a forward node names the block's line, with its source text read
    assert any("the block's line" in t and "in forward" in t for t in texts)
    # where torch keeps anchored frames (2.13 on; 2.11 has no anchors), the user's step
    # function is one (the backward call is on its line)
    anchored = any("loss.backward()" in t for t in texts)
    assert anchored == hasattr(fx_proxy, "_STACK_TRACE_ANCHORS")
    assert fx_proxy.CapturedTraceback is original  # put back after the trace
