"""Patterns of models written by others (Hugging Face, timm and the like) that capture must
handle as torch.compile does: the compiler flags libraries branch on, Python state a model keeps
in plain attributes, containers registered with torch's pytree, and the user's own exceptions."""
from __future__ import annotations

import collections
import threading

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn

from precompile_nb import PrecompileError, precompile


def _load(fn, *inputs, backend="eager"):
    code, cache = precompile(fn, *inputs, backend=backend)
    return precompile.load(code, cache)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_libraries_see_a_compiler_while_capture_traces_and_eager_code_does_not():
    seen = []

    def fn(x):
        seen.append((torch.compiler.is_compiling(), torch.compiler.is_exporting()))
        return x * 2 if torch.compiler.is_compiling() else x * 3

    x = torch.randn(4)
    f = _load(fn, x)
    assert seen[0] == (True, True)
    assert torch.equal(f(x), x * 2)  # the path kept for compilers was captured
    assert not torch.compiler.is_compiling() and not torch.compiler.is_exporting()
    assert torch.equal(fn(x), x * 3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_thread_beside_a_capture_runs_eager_code_as_eager():
    """While one thread captures, another thread's eager code sees no compiler and takes its
    eager path: the flags a capture raises belong to the tracing thread."""
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def fn(x):  # captured on the main thread, holding the trace open while the other runs
        seen["tracer"] = torch.compiler.is_compiling()
        inside.set()
        assert release.wait(60), "the other thread never finished"
        return x * 2 if torch.compiler.is_compiling() else x * 3

    def beside():
        try:
            assert inside.wait(60), "the capture never started"
            seen["beside"] = (torch.compiler.is_compiling(), torch.compiler.is_exporting())
            y = torch.ones(3)
            seen["eager"] = y * 2 if torch.compiler.is_compiling() else y * 3
        finally:
            release.set()

    other = threading.Thread(target=beside, daemon=True)
    other.start()
    x = torch.randn(4)
    f = _load(fn, x)
    other.join(60)
    assert seen["tracer"] is True
    assert seen["beside"] == (False, False)
    assert torch.equal(seen["eager"], torch.full((3,), 3.0))
    assert torch.equal(f(x), x * 2)
    assert not torch.compiler.is_compiling()


class CachingModel(nn.Module):
    """Keeps a table derived from its weight in a plain dict, filled by forward, and a plain
    attribute it sets on every call (as rotary-embedding and mask helpers do)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self._tables = {}

    def forward(self, x):
        k = x.shape[-1]
        if k not in self._tables:
            self._tables[k] = self.lin.weight.sum(0)
        self.last_batch = x.shape[0]
        return self.lin(x) + self._tables[k]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_capture_leaves_a_models_python_state_as_it_found_it(backend):
    m, x = CachingModel(), torch.randn(2, 8)
    f = _load(lambda m, x: m(x), m, x, backend=backend)
    assert m._tables == {} and not hasattr(m, "last_batch")  # no FakeTensor left behind
    expected = m(x)  # the user's own eager call afterwards computes real tensors
    assert type(m._tables[8]) is torch.Tensor
    m._tables.clear()
    torch.testing.assert_close(f(m, x), expected)
    assert m._tables == {}


def test_a_cache_an_earlier_eager_call_filled_is_named_with_how_to_empty_it():
    m, x = CachingModel(), torch.randn(2, 8)
    m(x)
    with pytest.raises(PrecompileError) as e:
        precompile(lambda m, x: m(x), m, x, backend="eager")
    assert e.value.invariant == 1
    assert "m._tables[8]" in e.value.where
    assert "m._tables.clear()" in e.value.hint



def _local_namedtuple():
    Pair = collections.namedtuple("Pair", ["a", "b"])
    pytree._register_namedtuple(Pair, serialized_type_name="tests.real_model_patterns.Pair")
    return Pair


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_function_local_namedtuple_registered_with_a_serialized_name_round_trips():
    Pair = _local_namedtuple()
    x = torch.randn(3)
    out = _load(lambda x: Pair(x + 1, x * 2), x)(x)
    assert type(out) is Pair
    assert torch.equal(out.a, x + 1) and torch.equal(out.b, x * 2)


class Box:
    def __init__(self, a, b):
        self.a, self.b = a, b


pytree.register_pytree_node(Box, lambda b: ([b.a, b.b], None), lambda v, c: Box(*v),
                            serialized_type_name="tests.real_model_patterns.Box")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_pytree_node_registered_without_key_paths_is_an_input_named_by_index():
    x, y = torch.randn(3), torch.randn(3)
    f = _load(lambda bx: bx.a * bx.b, Box(x, y))
    assert torch.equal(f(Box(y, x)), y * x)
    with pytest.raises(PrecompileError) as e:
        f(Box(x, torch.randn(4)))
    assert "bx[leaf 1]" in e.value.where


class Unregistered:
    pass


def test_a_result_the_artifact_cannot_carry_says_to_return_tensors_or_register_the_class():
    with pytest.raises(PrecompileError) as e:
        precompile(lambda x: (x + 1, Unregistered()), torch.randn(2), backend="eager")
    assert "fn's result[1]" in e.value.where
    for fix in (".logits", "use_cache=False", "register_pytree_node",
                "register_cache_pytrees_for_model(model)"):
        assert fix in e.value.hint


def test_the_users_own_exception_reaches_them_as_it_is_with_the_model_as_it_was():
    m = nn.BatchNorm1d(4).train()
    before = m.running_mean.clone()

    def step(m, x):
        m(x)
        raise ValueError("the batch is too small")

    with pytest.raises(ValueError, match="the batch is too small"):
        precompile(step, m, torch.randn(8, 4), backend="eager")
    assert torch.equal(m.running_mean, before)
    assert m.num_batches_tracked.item() == 0


class LayerDrop(nn.Module):
    """LayerDrop as transformers' older encoders write it: a Python branch on a random draw."""

    def __init__(self, p):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))
        self.p = p

    def forward(self, x):
        for layer in self.layers:
            if self.training and torch.rand([]) < self.p:
                continue
            x = layer(x)
        return x


def _drop_step(m, x):
    loss = m(x).square().mean()
    loss.backward()
    return loss


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_layer_drop_of_zero_is_captured_and_draws_as_eager_does(backend):
    m, x = LayerDrop(0.0).train(), torch.randn(2, 8)
    f = _load(_drop_step, m, x, backend=backend)
    torch.manual_seed(1)
    loss = f(m, x)
    after = torch.rand(3)
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    torch.manual_seed(1)
    torch.testing.assert_close(loss, _drop_step(m, x))
    for p, g in zip(m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    if backend == "eager":  # one draw per layer, as eager (Inductor seeds its own draws)
        assert torch.equal(after, torch.rand(3))


def test_a_layer_drop_a_draw_can_change_is_refused_naming_the_probability():
    with pytest.raises(PrecompileError) as e:
        precompile(_drop_step, LayerDrop(0.1).train(), torch.randn(2, 8), backend="eager")
    assert e.value.invariant == 3
    assert "torch.rand([]) < self.p" in e.value.where
    assert "layer-drop probability to 0" in e.value.hint


class KVCache:
    """Like a Hugging Face cache: its unflatten needs real tensors (it reads their device)."""

    def __init__(self, keys):
        self.keys = list(keys)
        self.device = self.keys[0].device


pytree.register_pytree_node(KVCache, lambda c: (c.keys, None), lambda v, _: KVCache(v),
                            serialized_type_name="tests.real_model_patterns.KVCache")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_registered_cache_object_in_a_result_comes_back_as_its_class(backend):
    def decode(m, x):
        h = m(x)
        return {"logits": h.relu(), "past": KVCache([h * 2, h + 1])}

    m, x = nn.Linear(4, 4), torch.randn(2, 4)
    out = _load(decode, m, x, backend=backend)(m, x)
    ref = decode(m, x)
    assert type(out["past"]) is KVCache and len(out["past"].keys) == 2
    torch.testing.assert_close(out["logits"], ref["logits"])
    for a, b in zip(out["past"].keys, ref["past"].keys):
        torch.testing.assert_close(a, b)


@torch.jit.script
def _bucket(relative_pos: torch.Tensor, mid: int) -> torch.Tensor:
    return torch.where(relative_pos.abs() < mid, torch.tensor(mid - 1).type_as(relative_pos),
                       relative_pos)


class Relative(nn.Module):
    """Calls a torch.jit.script helper, as DeBERTa-style relative positions do."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        pos = torch.arange(x.shape[0])[None, :] - torch.arange(x.shape[0])[:, None]
        return self.lin(x) + _bucket(pos, 2).float().mean()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_torch_jit_script_helper_is_captured_with_its_literals():
    m, x = Relative(), torch.randn(8, 8)
    with torch.no_grad():
        f = _load(lambda m, x: m(x), m, x)
        torch.testing.assert_close(f(m, x), m(x))


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_transformer_inference_under_no_grad_keeps_the_fused_op_eager_runs():
    # eager runs nn.TransformerEncoderLayer as one fused op in eval mode under no_grad; the
    # capture used to decompose it (make_fx's own torch function mode hid the fast path)
    m, x = _encoder().eval(), torch.randn(2, 5, 16)
    with torch.no_grad():
        code, cache = precompile(lambda m, x: m(x), m, x, backend="eager")
        want = m(x)
    assert "_transformer_encoder_layer_fwd" in code
    assert torch.equal(precompile.load(code, cache)(m, x), want)
    # with gradients enabled eager takes the decomposed path, and so does the capture
    code, cache = precompile(lambda m, x: m(x), m, x, backend="eager")
    assert "_transformer_encoder_layer_fwd" not in code
    torch.testing.assert_close(precompile.load(code, cache)(m, x), want)
    assert torch.overrides.has_torch_function is torch._C._has_torch_function  # restored


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_training_step_precompiled_under_no_grad_still_runs_its_backward():
    def step(m, x):
        loss = m(x).pow(2).mean()
        loss.backward()
        return loss

    m, x = _encoder().train(), torch.randn(2, 5, 16)
    with torch.no_grad():
        f = _load(step, m, x)
    ref = _encoder().train()
    want = step(ref, x)
    torch.testing.assert_close(f(m, x), want)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
