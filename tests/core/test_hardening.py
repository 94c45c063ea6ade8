"""What torch 2.15's own precompile hardened, and precompile_nb does too: nested tensors are
refused by name, a capture inside another trace is refused, an fn that updates a parameter in
place runs once (see also test_contract.py for the example left untouched and autocast)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from precompile_nb import PrecompileError, precompile


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_a_nested_tensor_is_refused_by_name(layout):
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=layout)
    with pytest.raises(PrecompileError) as e:
        precompile(lambda m, x: m(x), nn.Linear(3, 3), nt, backend="eager")
    assert e.value.invariant == 6 and e.value.where == "x"
    assert "to_padded_tensor" in e.value.hint


def test_a_capture_inside_another_trace_is_refused():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises(PrecompileError) as e:
        with FakeTensorMode():
            precompile(lambda x: x * 2, torch.randn(3), backend="eager")
    assert "inside another trace" in str(e.value)
    assert "FakeTensorMode" in e.value.actual


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_an_fn_that_updates_a_parameter_in_place_updates_it_once_per_call():
    def sgd_by_hand(m, x):
        loss = m(x).sum()
        loss.backward()
        with torch.no_grad():
            m.weight.sub_(0.1 * m.weight.grad)
        return loss

    m, x = nn.Linear(4, 2), torch.randn(3, 4)
    before = m.weight.detach().clone()
    f = precompile.load(*precompile(sgd_by_hand, m, x, backend="eager"))
    assert torch.equal(m.weight, before)  # capture left it as it was
    ref = nn.Linear(4, 2)
    ref.load_state_dict(m.state_dict())
    f(m, x)
    sgd_by_hand(ref, x)
    torch.testing.assert_close(m.weight, ref.weight)


def test_a_closed_over_tensor_whose_storage_was_freed_is_refused_not_read():
    # FSDP2 frees its buffers so (storage resized to 0 bytes); reading one is a SIGSEGV
    freed = torch.randn(1 << 16)
    freed.untyped_storage().resize_(0)
    with pytest.raises(PrecompileError) as e:
        precompile(lambda x: x + freed, torch.randn(1 << 16), backend="eager")
    assert e.value.invariant == 1 and "freed" in e.value.where
