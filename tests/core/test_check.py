"""The dry-run checker reports every problem in one go, without lowering."""
from __future__ import annotations

import torch
from torch import nn

import precompile_nb
from tests.core.models import mlp

SCALE = torch.randn(4)


class Leaky(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)
        self.bn = nn.BatchNorm1d(4)
        self.offset = torch.randn(4)  # plain attribute: not registered

    def forward(self, x):
        return self.bn(self.frozen(self.lin(x))) + self.offset


def test_check_reports_all_problems_at_once():
    def step(m, x, k):
        torch.ops.aten._print("step")
        loss = (m(x) * SCALE * k).sum()
        loss.backward()
        return loss

    report = precompile_nb.check(step, Leaky(), torch.randn(3, 4), 2.0)
    assert not report.ok
    errors = {(f.invariant, f.where) for f in report.errors}
    assert (1, "global 'SCALE'") in errors
    assert any(inv == 1 and "m.offset" in w for inv, w in errors)
    assert any(inv == 4 and "_print" in w for inv, w in errors)
    notes = [(f.severity, f.invariant, f.where) for f in report.findings if f.severity != "error"]
    assert ("warning", 3, "k") in notes  # the baked float
    assert ("warning", 5, "m.frozen.weight") in notes
    assert any(n[1] == 4 and n[2] == "m.bn.running_mean" for n in notes)
    text = str(report)
    assert "SCALE" in text and "register_buffer" in text


def test_check_of_a_clean_computation_is_ok_and_compiles_nothing():
    report = precompile_nb.check(lambda m, x: m(x), mlp(), torch.randn(2, 8))
    assert report.ok and report.errors == ()
    assert report.captured is not None and report.captured.graph is not None


def test_check_points_at_the_line_that_reads_data():
    def fn(x):
        n = int(x.sum().item())  # the offending line
        return x * n

    report = precompile_nb.check(fn, torch.randn(3))
    (err,) = report.errors
    assert err.invariant == 3
    assert "the offending line" in (err.source or "") or "test_check.py" in (err.where or "")
