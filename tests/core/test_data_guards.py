"""precompile(..., data_guards=True): a branch or a size that depends on tensor data is kept as
the example takes it and checked on every call; a call whose data would take another way is a
PrecompileError naming the branch's line, and writes nothing back. One test per cause: a
bool() of a reduction (DETR's non-finite clamp), a size from nonzero (DeBERTa's label filter),
a loop over .tolist() writing into slices (the MoE backward of transformers < 5.24; with
Inductor too), and a random draw (LayerDrop), which stays refused."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from precompile_nb import PrecompileError, precompile

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


class Clamped(nn.Module):
    """DETR's encoder layer in training: clamps the activations if any is not finite."""

    def __init__(self):
        super().__init__()
        self.lin, self.bn = nn.Linear(8, 8), nn.BatchNorm1d(8)

    def forward(self, h):
        h = self.bn(self.lin(h))
        if not torch.isfinite(h).all():
            h = torch.clamp(h, -1e4, 1e4)
        return h


def _step(m, x):
    loss = (m(x) ** 2 * torch.arange(8.0)).sum()
    loss.backward()
    return loss


def _clamped(backend):
    torch.manual_seed(0)
    m, x = Clamped().train(), torch.randn(4, 8)
    return m, x, precompile.load(*precompile(_step, m, x, backend=backend, data_guards=True))


@pytest.fixture(scope="module")
def clamped_eager():
    return _clamped("eager")


def test_a_branch_on_data_is_refused_by_default_and_the_fix_names_data_guards():
    torch.manual_seed(0)
    with pytest.raises(PrecompileError) as e:
        precompile(_step, Clamped().train(), torch.randn(4, 8), backend="eager")
    assert e.value.invariant == 3 and e.value.stage == "capture"
    assert "if not torch.isfinite(h).all():" in e.value.where
    assert "data_guards=True" in e.value.hint


def _eager_step(m, x):
    state = {k: v.clone() for k, v in m.state_dict().items()}
    m.zero_grad(set_to_none=True)
    loss = _step(m, x)
    grads = [p.grad.clone() for p in m.parameters()]
    m.load_state_dict(state)
    m.zero_grad(set_to_none=True)
    return loss, grads


def _check_same_as_eager_and_refused_without_effects(m, x, f):
    loss, grads = _eager_step(m, x)
    torch.testing.assert_close(f(m, x), loss)
    for p, g in zip(m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    m.zero_grad(set_to_none=True)
    stats = {k: v.clone() for k, v in m.state_dict().items()}
    bad = x.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(PrecompileError) as e:
        f(m, bad)
    assert e.value.invariant == 3 and e.value.stage == "call"
    assert "if not torch.isfinite(h).all():" in e.value.where  # the branch's line
    assert "Eq(u0, 1) held" in e.value.expected  # what the example did
    assert "data_guards=True" in e.value.hint
    # nothing of the refused call was written back: no gradient, no BatchNorm statistics
    assert all(p.grad is None for p in m.parameters())
    for k, v in m.state_dict().items():
        assert torch.equal(v, stats[k]), k


def test_a_data_guard_keeps_the_example_branch_and_refuses_another_without_effects(
        clamped_eager):
    _check_same_as_eager_and_refused_without_effects(*clamped_eager)


def test_a_data_guard_with_inductor_checks_inside_the_compiled_graph():
    _check_same_as_eager_and_refused_without_effects(*_clamped("inductor"))


def _labelled_loss(logits, labels):
    """DeBERTa-v2's loss with problem_type None: only the labels >= 0 count."""
    idx = (labels >= 0).nonzero()
    if idx.size(0) > 0:
        picked = torch.gather(logits, 0, idx.expand(idx.size(0), logits.size(1)))
        return nn.functional.cross_entropy(picked, torch.gather(labels, 0, idx.view(-1)))
    return logits.sum() * 0


def test_a_size_from_nonzero_stays_dynamic_and_only_its_branch_is_guarded():
    logits = torch.randn(4, 3)
    f = precompile.load(*precompile(_labelled_loss, logits, torch.tensor([0, 2, 1, 0]),
                                    backend="eager", data_guards=True))
    for labels in ([0, 2, 1, 0], [0, -1, 1, -1]):  # another count of labels: same graph
        labels = torch.tensor(labels)
        torch.testing.assert_close(f(logits, labels), _labelled_loss(logits, labels))
    with pytest.raises(PrecompileError) as e:
        f(logits, torch.tensor([-1, -1, -1, -1]))
    assert "if idx.size(0) > 0:" in e.value.where
    assert "u0 = 4 (the number of rows of nonzero's result)" in e.value.expected


def _grouped(x, w, offs):
    """The MoE backward of transformers < 5.24: one matmul per group of rows, skipping the
    empty groups, written into slices of one output."""
    out = torch.zeros(x.size(0), w.size(2))
    start = 0
    for i, end in enumerate(offs.tolist()):
        if start == end:
            continue
        out[start:end] = torch.mm(x[start:end], w[i])
        start = end
    return out


def test_a_loop_over_tolist_serves_other_offsets_and_refuses_an_empty_group():
    x, w = torch.randn(10, 4), torch.randn(3, 4, 5)
    f = precompile.load(*precompile(_grouped, x, w, torch.tensor([3, 7, 10]), backend="eager",
                                    data_guards=True))
    for offs in ([3, 7, 10], [2, 7, 10]):
        offs = torch.tensor(offs)
        torch.testing.assert_close(f(x, w, offs), _grouped(x, w, offs))
    with pytest.raises(PrecompileError) as e:
        f(x, w, torch.tensor([3, 3, 10]))
    assert "if start == end:" in e.value.where


def _grouped_mm(x, w, offs):
    """transformers' grouped_mm_fallback before 5.24: a custom op (fake kernel, no data
    dependence in the forward) whose backward is Python that loops over offs.tolist() and
    writes each group's matmul into slices of the gradients (`out=`)."""
    out = x.new_zeros(x.size(0), w.size(2))
    start = 0
    for i, end in enumerate(offs.tolist()):
        if start != end:
            torch.mm(x[start:end], w[i], out=out[start:end])
        start = end
    return out


def _grouped_mm_backward(ctx, grad):
    x, w = ctx.saved_tensors
    grad_x, grad_w = torch.zeros_like(x), torch.zeros_like(w)
    start = 0
    for i, end in enumerate(ctx.offs.tolist()):
        if start == end:
            continue
        torch.mm(grad[start:end], w[i].T, out=grad_x[start:end])
        torch.mm(x[start:end].T, grad[start:end], out=grad_w[i])
        start = end
    return grad_x, grad_w, None


def _grouped_mm_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.offs = inputs[2]


torch.library.custom_op("precompile_nb_tests::grouped_mm", _grouped_mm, mutates_args=(),
                        schema="(Tensor x, Tensor w, Tensor offs) -> Tensor")
torch.library.register_fake("precompile_nb_tests::grouped_mm",
                            lambda x, w, offs: x.new_empty(x.size(0), w.size(2)))
torch.library.register_autograd("precompile_nb_tests::grouped_mm", _grouped_mm_backward,
                                setup_context=_grouped_mm_context)


class Experts(nn.Module):
    """An MoE layer's routing: tokens sorted by expert, one matmul per expert's group."""

    def __init__(self):
        super().__init__()
        self.proj, self.w = nn.Linear(4, 4), nn.Parameter(torch.randn(2, 4, 3))

    def forward(self, x, expert):
        offs = torch.bincount(expert, minlength=2).cumsum(0)
        return torch.ops.precompile_nb_tests.grouped_mm(self.proj(x)[expert.argsort()],
                                                        self.w, offs)


def _moe_step(m, x, expert):
    loss = (m(x, expert) ** 2).sum()
    loss.backward()
    return loss


def _assert_step_is_eagers(f, m, x, expert):
    """f(m, x, expert) returns eager's loss and leaves eager's gradients."""
    m.zero_grad(set_to_none=True)
    loss = _moe_step(m, x, expert)
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad(set_to_none=True)
    torch.testing.assert_close(f(m, x, expert), loss)
    for p, g in zip(m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)


def test_an_moe_backward_over_tolist_offsets_compiles_with_inductor_and_serves_other_routings():
    """torch 2.11's Inductor could not lower this graph (its reinplace pass saw two sizes of
    one slice as different unbacked symbols: Note [scatters with data-dependent bounds]);
    2.13 and 2.15 lower it either way."""
    torch.manual_seed(0)
    m, x = Experts().train(), torch.randn(8, 4)
    example = torch.tensor([0, 1, 1, 0, 1, 0, 1, 1])
    f = precompile.load(*precompile(_moe_step, m, x, example, backend="inductor",
                                    data_guards=True))
    for expert in (example, torch.tensor([0, 0, 1, 0, 1, 0, 1, 1])):  # 3/5 tokens, then 4/4
        _assert_step_is_eagers(f, m, x, expert)
    m.zero_grad(set_to_none=True)
    with pytest.raises(PrecompileError) as e:  # expert 0 gets no token
        f(m, x, torch.ones(8, dtype=torch.int64))
    assert e.value.stage == "call" and "if start == end:" in e.value.where
    assert all(p.grad is None for p in m.parameters())


@pytest.mark.cuda
def test_an_moe_step_on_cuda_is_tuned_on_the_example_routing():
    """Precompile runs a CUDA graph once to autotune its kernels. On stand-in inputs (zero
    expert ids) expert 1 got no token, the graph's data guard stopped the run and precompile
    failed (mixtral, qwen2_moe training on the H200): the run now gets copies of the
    example's values (Note [tuning on the example's values]), and leaves them as they were."""
    torch.manual_seed(0)
    m, x = Experts().cuda().train(), torch.randn(8, 4, device="cuda")
    example = torch.tensor([0, 1, 1, 0, 1, 0, 1, 1], device="cuda")
    before = [t.clone() for t in (x, example, *m.parameters())]
    f = precompile.load(*precompile(_moe_step, m, x, example, backend="inductor",
                                    data_guards=True))
    for t, b in zip((x, example, *m.parameters()), before):
        assert torch.equal(t, b) and t.grad is None
    _assert_step_is_eagers(f, m, x, example)


def test_the_tuning_run_gets_the_example_values_and_constants():
    """What lower hands the one tuning run (CUDA only, so checked here on what it builds):
    the example's own tensors, inputs the graph never reads left out, then the constants."""
    from precompile_nb.core.capture import capture
    from precompile_nb.core.tuning import tuning_values

    def fn(m, x, idx):
        return m(x)[idx] * torch.tensor([2.0, 3.0])

    m, x, idx = nn.Linear(4, 2), torch.randn(3, 4), torch.tensor([2, 0])
    c = capture(fn, [m, x, idx])
    values = tuning_values(c, len(c.fake_inputs), unread=())
    assert [v is t for v, t in zip(values, (m.weight, m.bias, x, idx))] == [True] * 4
    assert torch.equal(values[4], torch.tensor([2.0, 3.0])) and len(values) == 5
    assert tuning_values(c, 4, unread=(2,))[:3] == [m.weight, m.bias, idx]


class LayerDrop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            if self.training and torch.rand([]) < 0.1:
                continue
            x = layer(x)
        return x


def test_a_branch_on_a_random_draw_is_refused_even_with_data_guards():
    with pytest.raises(PrecompileError) as e:
        precompile(lambda m, x: m(x).sum(), LayerDrop().train(), torch.randn(2, 8),
                   backend="eager", data_guards=True)
    assert e.value.invariant == 3 and "random draw" in e.value.what
    assert "torch.rand([]) < 0.1" in e.value.where
    assert "layerdrop = 0.0" in e.value.hint


def _size_branch(x):
    y = x + 1
    return y * 2 if y.shape[0] > 4 else y


def test_a_branch_on_a_mark_unbacked_size_stays_refused_with_data_guards():
    x = torch.randn(6, 3)
    torch._dynamo.decorators.mark_unbacked(x, 0)
    with pytest.raises(PrecompileError) as e:
        precompile(_size_branch, x, data_guards=True)
    assert e.value.invariant == 3 and "dynamic dim x.shape[0]" in e.value.what
    assert "if y.shape[0] > 4" in e.value.where


def test_a_host_scalar_where_the_fake_kernel_says_the_gpu_is_not_a_mismatch():
    """CUDA's memory-efficient attention returns its RNG seed and offset as 0-dim host tensors,
    its fake kernel as GPU tensors: with data_guards, real-value propagation's cross-check
    called that a metadata mismatch and a Qwen3-MoE training step on an H100 failed at the
    capture. Checked here on what the check is handed (no GPU needed to build a fake one);
    anything else on another device stays a mismatch."""
    from torch._subclasses import fake_utils
    from torch._subclasses.fake_tensor import FakeTensorMode

    from precompile_nb.core._compat.realdata import real_values

    with FakeTensorMode():
        seed, grad = (torch.empty(s, dtype=torch.long, device="cuda") for s in ((), (2,)))
    with real_values():
        fake_utils._check_fake_real_tensors(torch.tensor(151392), seed, "output[2]")
        with pytest.raises(Exception, match="cuda"):
            fake_utils._check_fake_real_tensors(torch.tensor([1, 2]), grad, "output[0]")


@pytest.mark.cuda
def test_attention_training_on_cuda_with_data_guards_matches_eager():
    """The user's side of the test above: memory-efficient attention in a training step on
    the GPU, captured with data guards (a branch on the data beside it)."""
    def step(q, k, v):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        loss = out.square().mean() if bool((q > 0).any()) else out.sum()
        loss.backward()
        return loss

    q, k, v = (torch.randn(2, 2, 16, 8, device="cuda", requires_grad=True) for _ in range(3))
    f = precompile.load(*precompile(step, q, k, v, data_guards=True))
    got = f(q, k, v)
    grads = [t.grad for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    want = step(q, k, v)
    torch.testing.assert_close(got, want)
    for g, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(g, t.grad)
