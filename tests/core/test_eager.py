"""precompile/load with the eager backend: the programming model, compared against eager."""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from precompile_nb import PrecompileError, precompile
from tests.conftest import run_fresh, run_threads
from tests.core.models import assert_sgd_matches_eager, Tied, bare_step, bn_mlp, mlp, train_step


def pc(fn, *args, **kw):
    code, cache = precompile(fn, *args, backend="eager", **kw)
    return precompile.load(code, cache)


# -- API surface -------------------------------------------------------------------------------

@pytest.mark.parametrize("option, value, old_kind, said", [
    ("backend", "tvm", ValueError, "unknown backend 'tvm'"),
    ("tracer", "jit", ValueError, "unknown tracer 'jit'"),
    ("tracer", "dynamo", NotImplementedError, "dynamo' is planned"),
    ("decompositions", [torch.ops.aten.addmm.default], TypeError, "takes a dict"),
    ("data_guards", "yes", TypeError, "takes True or False, not 'yes'"),
])
def test_an_option_value_precompile_does_not_take_is_a_precompile_error_naming_it(
        option, value, old_kind, said):
    m, x = mlp(), torch.randn(2, 8)
    with pytest.raises(PrecompileError, match=said) as ei:
        precompile(lambda m, x: m(x), m, x, **{option: value})
    e = ei.value
    assert e.stage == "capture" and e.where == f"precompile(..., {option}=...)"
    assert e.expected and e.hint
    assert isinstance(e, old_kind)  # what it was before: existing except clauses still catch it


def test_precompile_error_is_a_runtime_error_with_structured_fields():
    W = torch.randn(8)
    with pytest.raises(PrecompileError) as ei:
        precompile(lambda x: x * W, torch.randn(8), backend="eager")
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert e.invariant == 1 and e.stage == "capture"
    assert "W" in e.where and e.hint and e.expected and e.actual


# -- results match eager -----------------------------------------------------------------------

def test_inference_matches_eager_and_follows_new_weights():
    m, x = mlp(0), torch.randn(5, 8)
    f = pc(lambda m, x: m(x), m, x)
    torch.testing.assert_close(f(m, x), m(x))
    m2 = mlp(1)  # same architecture, other weights: "load a checkpoint"
    torch.testing.assert_close(f(m2, x), m2(x))


def test_pytrees_in_and_out():
    def fn(m, batch):
        a = m(batch["x"][0])
        return {"out": a, "pair": (a.sum(), None), "list": [batch["x"][1] * 2]}

    m = mlp()
    batch = {"x": [torch.randn(3, 8), torch.randn(2)]}
    f = pc(fn, m, batch)
    got, want = f(m, batch), fn(m, batch)
    torch.testing.assert_close(got["out"], want["out"])
    torch.testing.assert_close(got["pair"][0], want["pair"][0])
    assert got["pair"][1] is None
    torch.testing.assert_close(got["list"][0], want["list"][0])


def test_non_tensor_inputs_are_baked_and_checked_per_call():
    f = pc(lambda x, k: x * k, torch.ones(3), 3)
    torch.testing.assert_close(f(torch.ones(3), 3), torch.full((3,), 3.0))
    with pytest.raises(PrecompileError, match="non-tensor value differs") as ei:
        f(torch.ones(3), 5)
    assert ei.value.expected == "3" and ei.value.actual == "5"


def test_decompositions_are_handed_to_make_fx():
    aten = torch.ops.aten
    calls = []

    def gelu_as_tanh(x, approximate="none"):
        calls.append(1)
        return torch.tanh(x)

    code, _ = precompile(lambda x: torch.nn.functional.gelu(x), torch.randn(4),
                         backend="eager", decompositions={aten.gelu.default: gelu_as_tanh})
    assert calls and "aten.tanh" in code and "aten.gelu" not in code


# -- capture leaves the world as it found it -------------------------------------------------

def test_capture_leaves_model_inputs_grads_and_rng_untouched():
    m, x = bn_mlp(), torch.randn(6, 8)
    m.train()
    m(x).sum().backward()  # some existing .grad fields
    state = copy.deepcopy(m.state_dict())
    grads = [p.grad.clone() for p in m.parameters()]
    x0, rng = x.clone(), torch.get_rng_state()

    def step(m, x):
        loss = torch.nn.functional.dropout(m(x), 0.5).sum()
        loss.backward()
        return loss

    precompile(step, m, x, backend="eager")
    for k, v in m.state_dict().items():
        assert torch.equal(v, state[k]), k  # BatchNorm stats and num_batches_tracked too
    for p, g in zip(m.parameters(), grads):
        assert torch.equal(p.grad, g)
    assert torch.equal(x, x0) and torch.equal(torch.get_rng_state(), rng)


# -- invariant 1 ------------------------------------------------------------------------------

def test_closed_over_tensor_is_rejected_naming_it():
    w_local = torch.randn(8)
    with pytest.raises(PrecompileError, match="invariant 1") as ei:
        precompile(lambda x: x * w_local, torch.randn(8), backend="eager")
    assert "closure variable 'w_local'" in ei.value.where


def test_plain_module_attribute_is_rejected_naming_it():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = torch.randn(4)  # not registered

        def forward(self, x):
            return self.lin(x) * self.scale

    with pytest.raises(PrecompileError) as ei:
        precompile(lambda m, x: m(x), M(), torch.randn(2, 4), backend="eager")
    assert ei.value.invariant == 1
    assert "m.scale" in ei.value.where and "register_buffer" in ei.value.hint


def test_closed_over_model_is_rejected_with_the_fix():
    m = mlp()
    with pytest.raises(PrecompileError) as ei:
        precompile(lambda x: m(x), torch.randn(2, 8), backend="eager")
    assert "pass `m` to fn" in ei.value.hint


@pytest.mark.parametrize("as_fn", ["module", "forward"])
def test_a_model_passed_as_fn_is_rejected_saying_to_pass_it_as_an_argument(as_fn):
    m = mlp()
    fn = m if as_fn == "module" else m.forward
    with pytest.raises(PrecompileError) as ei:
        precompile(fn, torch.randn(2, 8), backend="eager")
    e = ei.value
    assert e.invariant == 1 and e.where.startswith(f"fn ({type(m).__name__}) itself, its ")
    assert "precompile(lambda m, *args: m(*args), model, *example_inputs)" in e.hint


def test_small_tensor_created_inside_fn_is_fine():
    f = pc(lambda x: x + torch.tensor([1.0, 2.0, 3.0]), torch.zeros(3))
    torch.testing.assert_close(f(torch.zeros(3)), torch.tensor([1.0, 2.0, 3.0]))


def test_effectful_op_is_rejected_at_capture():
    def fn(x):
        torch.ops.aten._print("hello")
        return x + 1

    with pytest.raises(PrecompileError) as ei:
        precompile(fn, torch.randn(3), backend="eager")
    assert ei.value.invariant == 4 and "_print" in ei.value.where


def test_item_is_a_precompile_error_naming_invariant_3():
    def fn(x):
        if x.sum().item() > 0:
            return x
        return -x

    with pytest.raises(PrecompileError) as ei:
        precompile(fn, torch.randn(3), backend="eager")
    assert ei.value.invariant == 3 and "test_eager.py" in ei.value.where


def test_item_outside_a_branch_names_the_users_line_not_only_the_graph_node():
    import torch.fx.proxy as fx_proxy
    anchors = set(getattr(fx_proxy, "_STACK_TRACE_ANCHORS", ()))

    def fn(m, x):
        s = m(x).mean().item()  # reads the value into Python
        return x * s

    with pytest.raises(PrecompileError) as ei:
        precompile(fn, nn.Linear(3, 3), torch.randn(2, 3), backend="eager")
    e = ei.value
    assert e.invariant == 3 and ".item()" in e.what
    assert "test_eager.py:" in e.where and "s = m(x).mean().item()" in e.where
    assert e.extra["source"] == e.where and e.extra["nodes"] == ["_local_scalar_dense"]
    # the torch registry it borrows for that is left as it was found
    assert set(getattr(fx_proxy, "_STACK_TRACE_ANCHORS", ())) == anchors


def test_a_tensor_turned_into_numpy_is_a_precompile_error_naming_the_users_line():
    def fn(m, x):
        scale = x.detach().numpy().std()  # NumPy inside fn
        return m(x) * float(scale)

    with pytest.raises(PrecompileError) as ei:
        precompile(fn, nn.Linear(3, 3), torch.randn(2, 3), backend="eager")
    e = ei.value
    assert e.invariant == 3 and e.stage == "capture" and "NumPy" in e.what
    assert "scale = x.detach().numpy().std()" in e.where and "torch ops" in e.hint


def test_a_result_passed_instead_of_fn_is_a_precompile_error_with_the_fix():
    m, x = mlp(), torch.randn(2, 8)
    with pytest.raises(PrecompileError) as ei:
        precompile(m(x), x, backend="eager")
    e = ei.value
    assert "not callable" in e.what and "Tensor" in e.what and e.stage == "capture"
    assert "precompile(fn, *example_inputs)" in e.hint


def test_too_few_or_too_many_example_inputs_name_fns_parameters():
    m, x = mlp(), torch.randn(2, 8)

    def predict(model, x, scale=1.0):
        return model(x) * scale

    for args, said in (((x,), "missing a required argument: 'x'"),
                       ((m, x, 2.0, 3.0), "too many positional arguments")):
        with pytest.raises(PrecompileError) as ei:
            precompile(predict, *args, backend="eager")
        e = ei.value
        assert e.stage == "capture" and e.where == "precompile(predict, ...)"
        assert "predict(model, x, scale)" in e.expected and said in e.actual
        assert "precompile(predict, model, x, scale)" in e.hint
    torch.testing.assert_close(pc(predict, m, x)(m, x), m(x))  # a default may stay unpassed


# -- invariant 5: backward -------------------------------------------------------------------

def test_sgd_loop_through_the_artifact_matches_eager():
    m_ref, x = bn_mlp(), torch.randn(6, 8)
    f = pc(train_step, copy.deepcopy(m_ref), x)
    assert_sgd_matches_eager(f, m_ref, x, steps=5, tol=1e-5)


def test_gradients_accumulate_and_frozen_params_keep_none():
    m, x = mlp(), torch.randn(4, 8)
    m[0].weight.requires_grad_(False)
    f = pc(bare_step, m, x)
    m_ref = copy.deepcopy(m)
    assert f(m, x) is None  # a bare .backward() step returns None
    f(m, x)  # no zero_grad: accumulates
    bare_step(m_ref, x)
    bare_step(m_ref, x)
    assert m[0].weight.grad is None
    for p, q in zip(m.parameters(), m_ref.parameters()):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad)


def test_a_parameter_frozen_or_unfrozen_after_capture_is_named_and_nothing_is_written():
    m, x = mlp(), torch.randn(4, 8)
    f = pc(bare_step, m, x)
    f(m, x)
    f(m, x)  # accepted calls: the batch guard is armed from here on
    m.zero_grad(set_to_none=True)
    m[2].bias.requires_grad_(False)  # frozen since the capture: eager would leave its grad None
    with pytest.raises(PrecompileError) as ei:
        f(m, x)
    e = ei.value
    assert e.invariant == 2 and e.stage == "call" and e.where == "m.2.bias"
    assert "requires_grad" in e.what and "requires_grad_(True)" in e.hint
    assert all(p.grad is None for p in m.parameters())  # the failed call wrote no gradient
    m[2].bias.requires_grad_(True)
    f(m, x)  # as captured again: accepted

    m2 = mlp()
    m2[0].weight.requires_grad_(False)
    g = pc(bare_step, m2, x)
    m2[0].weight.requires_grad_(True)  # unfrozen since: the graph has no gradient for it
    with pytest.raises(PrecompileError, match="m.0.weight: requires_grad differs"):
        g(m2, x)


@pytest.mark.parametrize("off", [torch.no_grad, torch.inference_mode])
def test_a_training_step_called_with_gradients_off_is_refused_as_eager_would(off):
    m, x = mlp(), torch.randn(4, 8)
    f = pc(bare_step, m, x)
    m_ref = copy.deepcopy(m)
    with off(), pytest.raises(RuntimeError):
        bare_step(m_ref, x)  # eager: the loss has no grad_fn
    with off(), pytest.raises(PrecompileError) as ei:
        f(m, x)  # a first call
    e = ei.value
    assert e.invariant == 5 and e.stage == "call" and "gradients off" in e.what
    assert "enable_grad" in e.hint
    f(m, x)
    f(m, x)  # accepted calls: the batch guard is armed from here on
    m.zero_grad(set_to_none=True)
    with off(), pytest.raises(PrecompileError, match="gradients off"):
        f(m, x)
    assert all(p.grad is None for p in m.parameters())  # nothing was written
    f(m, x)  # with gradients on again: accepted
    with torch.no_grad(), torch.enable_grad():
        f(m, x)  # a fn that turns them on itself is called inside enable_grad
    bare_step(m_ref, x)
    bare_step(m_ref, x)
    for p, q in zip(m.parameters(), m_ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_a_fn_taking_gradients_with_autograd_grad_is_refused_with_gradients_off():
    def weight_grad(m, x):  # returns a gradient, accumulates none
        (g,) = torch.autograd.grad(m(x).pow(2).sum(), m[0].weight)
        return g

    m, x = mlp(), torch.randn(4, 8)
    f = pc(weight_grad, m, x)
    torch.testing.assert_close(f(m, x), weight_grad(m, x))
    with torch.no_grad():
        with pytest.raises(RuntimeError):
            weight_grad(m, x)  # eager
        with pytest.raises(PrecompileError, match="gradients off") as ei:
            f(m, x)
    assert ei.value.invariant == 5
    g = pc(lambda m, x: m(x), m, x)  # no autograd in fn: any grad mode
    with torch.no_grad():
        torch.testing.assert_close(g(m, x), m(x))


def test_an_inference_artifact_takes_parameters_whatever_their_requires_grad():
    m, x = mlp(), torch.randn(4, 8)
    f = pc(lambda m, x: m(x), m, x)
    m.requires_grad_(False)
    torch.testing.assert_close(f(m, x), m(x))


def test_a_shape_in_the_result_comes_back_a_torch_size_as_in_eager():
    def fn(x, shape):
        return x.shape, {"sizes": [x.reshape(shape).size(), x.sum()]}

    x, shape = torch.randn(2, 6), torch.Size([3, 4])
    f = pc(fn, x, shape)
    got, want = f(x, shape), fn(x, shape)
    assert type(got[0]) is torch.Size and got[0] == want[0]
    assert type(got[1]["sizes"][0]) is torch.Size and got[1]["sizes"][0] == torch.Size([3, 4])
    assert got[0].numel() == 12  # what a tuple would not have


# -- invariant 4: boundary effects ------------------------------------------------------------

def test_input_mutation_buffers_and_aliases_are_reflected():
    def fn(m, x, acc):
        acc.add_(x.sum(0))
        return m(x), x.view(-1)

    m, x, acc = bn_mlp(), torch.randn(6, 8), torch.zeros(8)
    m.train()
    m_ref, x_ref, acc_ref = copy.deepcopy(m), x.clone(), acc.clone()
    f = pc(fn, copy.deepcopy(m), x.clone(), acc.clone())
    out, flat = f(m, x, acc)
    out_ref, _ = fn(m_ref, x_ref, acc_ref)
    torch.testing.assert_close(acc, acc_ref)
    torch.testing.assert_close(m[1].running_mean, m_ref[1].running_mean)
    assert int(m[1].num_batches_tracked) == 1
    flat[0] = 42.0  # still a view of x
    assert x[0, 0] == 42.0


# -- the artifact stands alone ----------------------------------------------------------------

def test_python_code_runs_in_a_fresh_process_without_precompile_nb(tmp_path):
    m, x = mlp(), torch.randn(3, 8)
    code, _ = precompile(lambda m, x: m(x), m, x, backend="eager")
    (tmp_path / "a.py").write_text(code)
    torch.save((m.state_dict(), x, m(x).detach()), tmp_path / "ref.pt")
    r = run_fresh(f"""
        import sys
        sys.modules["precompile_nb"] = None  # not importable
        import torch
        from torch import nn
        sd, x, ref = torch.load({str(tmp_path / 'ref.pt')!r})
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)); m.load_state_dict(sd)
        ns = {{}}
        exec(open({str(tmp_path / 'a.py')!r}).read(), ns)
        print("OK", torch.allclose(ns["forward"](m, x), ref))
        try:
            ns["forward"](m, x[:2])
        except RuntimeError as e:
            print(type(e).__name__, "invariant 3" in str(e))
    """)
    assert r.returncode == 0, r.stderr
    assert "OK True" in r.stdout and "PrecompileError True" in r.stdout


def test_python_code_has_header_metadata_and_driver_sections():
    code, _ = precompile(lambda m, x: m(x), mlp(), torch.randn(3, 8), backend="eager")
    head = code.splitlines()[:6]
    assert head[0].startswith("# precompile_nb artifact") and "NO weights" in head[1]
    pos = [code.index(f"# ==== [precompile_nb:{s}] ====") for s in ("graph", "metadata", "driver")]
    assert pos == sorted(pos)
    assert "_PC_META = {" in code and "def forward" not in code.split("[precompile_nb:graph]")[0]


def test_no_weights_are_embedded():
    m = nn.Linear(8, 8)
    with torch.no_grad():
        m.weight.fill_(0.123456789)
    code, cache = precompile(lambda m, x: m(x), m, torch.randn(2, 8), backend="eager")
    assert "0.123456" not in code and b"0.123456" not in cache


# -- driver checks ----------------------------------------------------------------------------

def test_driver_rejects_wrong_arity_shape_dtype_and_structure():
    m, x = mlp(), torch.randn(3, 8)
    f = pc(lambda m, x: m(x), m, x)
    with pytest.raises(PrecompileError, match="takes 2 positional arguments, got 1"):
        f(m)
    with pytest.raises(PrecompileError) as ei:
        f(m, torch.randn(4, 8))
    assert ei.value.where == "x" and ei.value.expected["shape"] == [3, 8] and ei.value.invariant == 3
    with pytest.raises(PrecompileError) as ei:
        f(m, x.double())
    assert ei.value.invariant == 6 and ei.value.actual["dtype"] == "float64"


def test_example_inputs_by_keyword_are_a_precompile_error_naming_the_keyword():
    m, x = mlp(), torch.randn(3, 8)

    def step(model, x):
        return model(x)

    with pytest.raises(PrecompileError) as ei:
        precompile(step, m, x=x, backend="eager")
    e = ei.value
    assert e.stage == "capture" and "x=" in e.where and "positional only" in str(e)
    assert "precompile(step, model, x)" in e.hint
    with pytest.raises(PrecompileError, match="did you mean backend=") as ei:
        precompile(step, m, x, backends="eager")
    # the options stay keywords
    f = pc(step, m, x, tracer="make_fx", decompositions=None)
    torch.testing.assert_close(f(m, x), m(x))


def test_calling_the_artifact_with_a_keyword_is_a_precompile_error_naming_it():
    m, x = mlp(), torch.randn(3, 8)

    def step(model, x):
        return model(x)

    f = pc(step, m, x)
    with pytest.raises(PrecompileError) as ei:
        f(m, x=x)
    e = ei.value
    assert e.stage == "call" and e.where == "x=" and "positional only" in str(e)
    assert e.hint == "pass x positionally: step(model, x)"
    torch.testing.assert_close(f(m, x), m(x))  # positionally, as ever


def test_driver_rejects_other_model_structure_tying_and_param_shape():
    m, x = mlp(), torch.randn(3, 8)
    f = pc(lambda m, x: m(x), m, x)
    other = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Linear(4, 4))
    with pytest.raises(PrecompileError) as ei:
        f(other, x)
    assert ei.value.invariant == 2 and ei.value.actual["name"] == "3.weight"
    wide = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    with pytest.raises(PrecompileError) as ei:
        f(wide, x)
    assert ei.value.where == "m.0.weight" and ei.value.expected["shape"] == [16, 8]

    t = Tied()
    ids = torch.tensor([1, 2, 3])
    g = pc(lambda m, ids: m(ids), t, ids)
    torch.testing.assert_close(g(t, ids), t(ids))
    untied = Tied()
    untied.out.weight = nn.Parameter(untied.emb.weight.detach().clone())
    with pytest.raises(PrecompileError) as ei:
        g(untied, ids)
    assert ei.value.invariant == 2


class Scaled(nn.Module):
    """A model whose forward reads plain Python attributes, as real models read their config."""

    def __init__(self):
        super().__init__()
        self.lin, self.drop = nn.Linear(8, 8), nn.Dropout(0.0)
        self.scale, self.calls = 2.0, 0

    def forward(self, x):
        self.calls += 1  # a write of fn's own: not a value the graph was specialised to
        return self.drop(self.lin(x)) * self.scale


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_model_attribute_changed_after_capture_is_named_not_silently_ignored(backend):
    m, x = Scaled(), torch.randn(3, 8)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x, backend=backend))
    for _ in range(2):  # the second call takes the remembered structure's path
        torch.testing.assert_close(f(m, x), m(x))
    m.scale = 5.0  # eager now gives another result
    with pytest.raises(PrecompileError, match="attribute fn read") as ei:
        f(m, x)
    e = ei.value
    assert (e.invariant, e.where, e.expected, e.actual) == (3, "m.scale", 2.0, 5.0)
    assert "precompile again" in e.hint
    m.scale = 2  # an int where a float was read: another type, as for a baked argument
    with pytest.raises(PrecompileError, match="attribute fn read"):
        f(m, x)
    m.scale = 2.0
    m.drop.eval()  # a submodule's mode, while the model itself stays in training
    with pytest.raises(PrecompileError) as ei:
        f(m, x)
    assert ei.value.where == "m.drop.training"
    m.drop.train()
    torch.testing.assert_close(f(m, x), m(x))
    other = Scaled()  # another instance with the same settings: accepted
    torch.testing.assert_close(f(other, x), other(x))


def test_pytree_structure_mismatch_is_named():
    f = pc(lambda d: d["a"] + d["b"], {"a": torch.ones(2), "b": torch.ones(2)})
    with pytest.raises(PrecompileError) as ei:
        f({"a": torch.ones(2), "c": torch.ones(2)})
    assert ei.value.where == "d" and "structure" in ei.value.what


def test_ambient_autocast_is_neutralised_at_call_and_rejected_at_capture():
    m, x = mlp(), torch.randn(3, 8)
    f = pc(lambda m, x: m(x), m, x)
    want = f(m, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = f(m, x)
        with pytest.raises(PrecompileError, match="autocast"):
            precompile(lambda m, x: m(x), m, x, backend="eager")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)


def test_precompile_is_safe_from_several_threads():
    models = [mlp(i) for i in range(4)]
    xs = [torch.randn(3, 8) for _ in range(4)]
    results = [None] * 4

    def work(i):
        results[i] = pc(lambda m, x: m(x).relu(), models[i], xs[i])

    errors = run_threads(4, work)
    assert not errors
    for f, m, x in zip(results, models, xs):
        torch.testing.assert_close(f(m, x), m(x).relu())


def test_invariant_1_errors_point_at_the_users_source_line():
    w_local = torch.randn(8)

    def fn(x):
        y = x + 1
        return y * w_local  # reads the closed-over tensor

    with pytest.raises(PrecompileError) as ei:
        precompile(fn, torch.randn(8), backend="eager")
    src = ei.value.extra["source"]
    assert "test_eager.py" in src and "reads the closed-over tensor" in src


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_calls_after_accepted_ones_are_still_checked_every_time(backend):
    # the driver remembers the inputs of an accepted call to check later calls in one go;
    # whatever differs afterwards must still be accepted or rejected exactly as on a first call
    m, x = mlp(), torch.randn(5, 8)
    code, cache = precompile(lambda m, x: m(x).relu(), m, x, backend=backend)
    f = precompile.load(code, cache)
    for _ in range(3):
        torch.testing.assert_close(f(m, x), m(x).relu())
    m[0].weight.requires_grad_(False)  # differs only in what the fast check looks at
    torch.testing.assert_close(f(m, x), m(x).relu())
    other = mlp(seed=1)  # another model of the same structure: new tensors, same layout
    torch.testing.assert_close(f(other, x), other(x).relu())
    with pytest.raises(PrecompileError) as ei:
        f(m, x.double())
    assert ei.value.invariant == 6
    with pytest.raises(PrecompileError) as ei:
        f(m, x[:2])
    assert ei.value.invariant == 3
    with pytest.raises(PrecompileError) as ei:
        f(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)), x)
    assert ei.value.invariant == 2
    y = torch.randn(8, 5).t()  # same shape, other strides
    if backend == "inductor":
        with pytest.raises(PrecompileError) as ei:
            f(m, y)
        assert ei.value.invariant == 6
    else:  # the eager backend accepts any layout
        torch.testing.assert_close(f(m, y), m(y).relu())
    torch.testing.assert_close(f(m, x), m(x).relu())
