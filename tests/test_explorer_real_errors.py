"""The violation explorer rendered for a real error of every invariant (not hand-made data):
the invariant, the offending name, expected vs actual and the fix are on the page."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import precompile_nb
from precompile_nb import PrecompileError, precompile
from precompile_nb.tools.report import error_data
from precompile_nb.viewers.explorer import render_check_html, render_violation_html

SCALE = torch.randn(4)


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _raise(n: int) -> PrecompileError:
    m, x = _mlp(), torch.randn(3, 4)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x, backend="eager"))
    cases = {
        1: lambda: precompile(lambda x: x * SCALE, torch.randn(4), backend="eager"),
        2: lambda: f(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)), x),
        3: lambda: precompile(lambda x: x * x.sum().item(), x, backend="eager"),
        4: lambda: precompile(lambda x: (torch.ops.aten._print("x"), x + 1)[1], x,
                              backend="eager"),
        6: lambda: f(m, x.double()),
        7: lambda: precompile.load(
            precompile(lambda m, x: m(x), m, x, backend="eager")[0],
            precompile(lambda m, x: m(x) + 1, m, x, backend="eager")[1]),
    }
    with pytest.raises(PrecompileError) as ei:
        cases[n]()
    return ei.value


@pytest.mark.parametrize("n, name", [(1, "SCALE"), (2, "m.0.weight"), (3, "item"),
                                     (4, "_print"), (6, "x"), (7, "cache")])
def test_explorer_for_a_real_violation_names_the_invariant_the_offender_and_the_fix(n, name):
    e = _raise(n)
    assert e.invariant == n
    data = error_data(e)
    page = render_violation_html(data)
    assert f"Invariant {n} broken" in page
    assert name in page or name in (data["where"] or "") + (data["what"] or "")
    assert "Fix:" in page and (e.hint or "")[:20].replace("'", "&#x27;") in page
    if e.expected is not None:
        assert "pcnb-mismatch" in page  # expected vs actual, the differing cells marked


def test_invariant_5_findings_render_for_a_frozen_parameter():
    m, x = _mlp(), torch.randn(3, 4)
    m[0].weight.requires_grad_(False)
    report = precompile_nb.check(lambda m, x: m(x).sum().backward(), m, x)
    page = render_check_html(report.fn_name, [dataclasses.asdict(f) for f in report.findings])
    assert "m.0.weight" in page and "gets no gradient" in page and ">5<" in page
