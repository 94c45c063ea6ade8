"""Note [no repro string nobody reads]: while precompile lowers, Inductor writes its runnable
repro of the graph only where a structured trace is being written; the result is the same."""
from __future__ import annotations

import logging

import pytest
import torch

from precompile_nb import precompile

# these tests watch what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")


@pytest.fixture
def repro_calls(monkeypatch) -> list:
    import torch._dynamo.repro.after_aot as after_aot

    calls: list = []
    original = after_aot.save_graph_repro

    def spy(*args, **kwargs):
        calls.append(args[3] if len(args) > 3 else kwargs.get("compiler_name"))
        return original(*args, **kwargs)

    monkeypatch.setattr(after_aot, "save_graph_repro", spy)
    return calls


def _fn(x):
    return torch.relu(x) * 3


def test_no_repro_is_written_where_no_structured_trace_reads_it(repro_calls):
    f = precompile.load(*precompile(_fn, torch.randn(16)))
    assert repro_calls == []
    x = torch.randn(16)
    torch.testing.assert_close(f(x), _fn(x))
    import torch._dynamo.repro.after_aot as after_aot

    assert after_aot.save_graph_repro.__name__ == "spy"  # put back after the lowering


def test_a_structured_trace_still_gets_its_repro(repro_calls):
    from torch._logging._internal import trace_log

    handler = logging.NullHandler()
    trace_log.addHandler(handler)
    try:
        precompile(_fn, torch.randn(16))
    finally:
        trace_log.removeHandler(handler)
    assert repro_calls and set(repro_calls) == {"inductor"}
