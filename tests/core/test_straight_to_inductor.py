"""Note [one trace between capture and Inductor]: a plainly functional graph goes to Inductor
without AOTAutograd's two traces, and Inductor writes the same code for it; any other graph
goes through AOTAutograd as before."""
from __future__ import annotations

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import _compat, build
from precompile_nb.core._compat import straight_to_inductor
from precompile_nb.core.capture import capture

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")

ENV = straight_to_inductor.ENV


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.b = torch.nn.Linear(16, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.norm(self.a(x))))


def _train_step(m, x, y):
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    return loss


def _counting_infer(m, x):
    m.steps.add_(1)  # a write into an input: a copy_ at the graph's end
    return m(x).softmax(-1)


def _bn_step(bn, x):
    return bn(x).sum()


def _cnn(seed: int = 0):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, stride=2), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    return m, torch.randn(4, 3, 12, 12), torch.randint(0, 4, (4,))


def _example(seed: int = 0):
    torch.manual_seed(seed)
    return _Net(), torch.randn(6, 8), torch.randint(0, 4, (6,))


def _without_aot_id(source: str) -> list[str]:
    """The module's lines, each private compile dir's name replaced, less the line that names
    AOTAutograd's graph (written only where AOTAutograd ran)."""
    return [line for line in _compat.reproducible_inductor_source(source).splitlines()
            if not line.startswith("# AOT ID:")]


def _code(source: str) -> list[str]:
    """The module's lines less its comments. Its comments name each kernel's source nodes:
    handed straight to Inductor, a graph's copy_ into an input (BatchNorm's statistics) is a
    node of its own there; AOTAutograd adds those writes after its trace, named nowhere."""
    return [line for line in _without_aot_id(source) if not line.lstrip().startswith("#")]


def _same_kernels(aot, straight) -> None:
    """The same kernels, each computing the same nodes, the straight path's naming the copy_
    of an input it writes besides."""
    assert [(k.name, k.fused_ops) for k in aot] == [(k.name, k.fused_ops) for k in straight]
    for a, b in zip(aot, straight):
        extra = [n for n in b.source_nodes if n not in a.source_nodes]
        assert [n for n in b.source_nodes if n not in extra] == list(a.source_nodes)
        assert all(n.startswith("copy_") for n in extra), (b.name, extra)


@pytest.fixture
def traced(monkeypatch):
    """Counts the graphs lowering traced once with Inductor's decompositions."""
    calls = []
    original = straight_to_inductor.decomposed

    def spy(gm, fake_inputs):
        calls.append(gm)
        return original(gm, fake_inputs)

    # the lowering imports it from its module at each lowering (a load imports neither)
    monkeypatch.setattr(straight_to_inductor, "decomposed", spy)
    return calls


@pytest.fixture
def pre_grad(monkeypatch):
    """Counts the graphs Inductor's pre-grad passes ran on (compile_fx's module global, which
    2.11's compile_fx calls before AOTAutograd and 2.13-2.15's inside it)."""
    import torch._inductor.compile_fx as compile_fx

    calls = []
    original = compile_fx._recursive_pre_grad_passes

    def spy(gm, *args, **kwargs):
        calls.append(gm)
        return original(gm, *args, **kwargs)

    monkeypatch.setattr(compile_fx, "_recursive_pre_grad_passes", spy)
    return calls


@pytest.mark.parametrize("case", ["train", "infer_with_write", "bn_train", "bn_infer"])
def test_inductor_writes_the_same_code_with_or_without_aot_autograd(case, traced, pre_grad,
                                                                     monkeypatch):
    arts, passes = {}, {}
    for env in ("0", "1"):
        monkeypatch.setenv(ENV, env)
        before = len(pre_grad)
        m, x, y = _cnn() if case.startswith("bn") else _example()
        if case == "bn_infer":
            arts[env] = build(lambda m, x: m(x), m.eval(), x)
        else:
            arts[env] = build(_train_step, m, x, y) if case in ("train", "bn_train") else \
                build(_counting_infer, m, x)
        passes[env] = len(pre_grad) - before
    assert len(traced) == 1  # only with the switch on
    assert passes["0"] >= 1 and passes["1"] == 0  # the straight path runs no pre-grad pass
    a, b = arts["0"].lowered, arts["1"].lowered
    assert "AOT ID" not in b.source  # AOTAutograd did not run
    assert _code(a.source) == _code(b.source)
    _same_kernels(a.kernels, b.kernels)
    assert a.kernels and all(k.source_nodes for k in b.kernels)  # provenance kept


@torch.library.custom_op("pcnb_straight_test::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_twice.register_fake
def _(x):
    return torch.empty_like(x)


def test_the_lowering_says_whether_the_graph_skipped_aot_autograd_and_why_not(monkeypatch):
    m, x, y = _example()
    assert build(_train_step, m, x, y).lowered.split.aot_autograd == ""
    art = build(lambda x: _twice(x).relu(), x)  # a non-ATen op: AOTAutograd's way
    why = art.lowered.split.aot_autograd
    assert "pcnb_straight_test" in why or "twice" in why, why
    assert "not an ATen op" in why and "AOT ID" in art.lowered.source
    torch.testing.assert_close(precompile.load(art.python_code, art.cache)(x), (x * 2).relu())
    monkeypatch.setenv(ENV, "0")
    assert build(_train_step, m, x, y).lowered.split.aot_autograd == f"{ENV}=0"


def test_a_straight_artifact_computes_what_eager_does(traced):
    m, x, y = _example()
    code, cache = precompile(_counting_infer, m, x)
    assert len(traced) == 1
    fn = precompile.load(code, cache)
    m2, _, _ = _example()
    for _ in range(2):
        torch.testing.assert_close(fn(m, x), _counting_infer(m2, x))
    assert int(m.steps) == int(m2.steps) == 2  # precompile wrote nothing: two calls each

    for example in (_example, _cnn):  # a CNN's BatchNorm statistics written as eager's
        m, x, y = example(1)
        code, cache = precompile(_train_step, m, x, y)
        m2, _, _ = example(1)
        fn = precompile.load(code, cache)
        m.zero_grad()
        for _ in range(2):
            torch.testing.assert_close(fn(m, x, y), _train_step(m2, x, y))
        for p, q in zip(m.parameters(), m2.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
        for a, b in zip(m.buffers(), m2.buffers()):
            torch.testing.assert_close(a, b)
    assert len(traced) == 3


def _functional(fn, *args):
    c = capture(fn, list(args))
    return _compat.functionalize(c.graph, c.fake_inputs)


def test_which_graphs_skip_aot_autograd(monkeypatch):
    m, x, y = _example()
    assert straight_to_inductor.plainly_functional(_functional(_train_step, m, x, y))
    assert straight_to_inductor.plainly_functional(_functional(_counting_infer, m, x))
    # BatchNorm's op does not say that it writes its running statistics: as captured, the
    # graph is not functional; the functional re-trace says those writes (Note [BatchNorm's
    # writes said before functionalizing]), in training and in eval
    bn = torch.nn.BatchNorm1d(8)
    c = capture(_bn_step, [bn, x])
    assert not straight_to_inductor.plainly_functional(c.graph)
    for training in (True, False):
        bn.train(training)
        c = capture(_bn_step, [bn, x])
        g = _compat.functionalize(c.graph, c.fake_inputs, batch_norm=True)
        assert straight_to_inductor.plainly_functional(g)
        written = {n.args[0].name for n in g.graph.nodes
                   if n.target is torch.ops.aten.copy_.default}
        assert len(written) == (3 if training else 0)  # mean, var, num_batches_tracked
    # an input read after a write into it
    g = _functional(_counting_infer, m, x)
    copy = next(n for n in g.graph.nodes if n.target is torch.ops.aten.copy_.default)
    with g.graph.inserting_after(copy):
        g.graph.call_function(torch.ops.aten.add.Tensor, (copy.args[0], 1))
    assert not straight_to_inductor.plainly_functional(g)
    # switched off
    monkeypatch.setenv(ENV, "0")
    assert not straight_to_inductor.plainly_functional(_functional(_train_step, m, x, y))


@pytest.mark.cuda
@pytest.mark.parametrize("example", [_example, _cnn], ids=["mlp", "cnn_bn"])
def test_cuda_training_step_same_triton_code_and_eager_results(example, traced, pre_grad,
                                                               monkeypatch):
    lowered, passes = {}, {}
    for env in ("0", "1"):
        monkeypatch.setenv(ENV, env)
        m, x, y = example()
        m, x, y = m.cuda(), x.cuda(), y.cuda()
        before = len(pre_grad)
        art = build(_train_step, m, x, y)
        lowered[env] = art.lowered
        passes[env] = len(pre_grad) - before
    # cudnn's BatchNorm keeps AOTAutograd's way (Note [BatchNorm's writes said before
    # functionalizing]); the plain step does not run it
    straight = example is _example
    assert len(traced) == (1 if straight else 0)
    assert passes["0"] >= 1 and passes["1"] == (0 if straight else passes["0"])
    assert ("AOT ID" not in art.lowered.source) == straight
    assert _code(lowered["0"].source) == _code(lowered["1"].source)
    _same_kernels(lowered["0"].kernels, lowered["1"].kernels)
    assert any(k.kind == "triton" for k in art.lowered.kernels)
    m2, _, _ = example()
    m2 = m2.cuda()
    want = _train_step(m2, x, y)
    m.zero_grad()
    got = precompile.load(art.python_code, art.cache)(m, x, y)
    # Inductor's BatchNorm sums in another order than cudnn's: the first convolution's weight
    # gradient differed from eager's by up to 1.3e-5 on the H200
    tol = dict(atol=1e-4, rtol=1e-4) if example is _cnn else {}
    torch.testing.assert_close(got, want, **tol)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tol)
    for a, b in zip(m.buffers(), m2.buffers()):  # BatchNorm's statistics (cudnn's op)
        torch.testing.assert_close(a, b, **tol)


def test_a_graph_writing_an_input_that_shares_storage_with_another_takes_aot_autograd():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        base = torch.empty(4)
        vals = {"a": base, "b": base.view(2, 2), "c": torch.empty(2, 2)}
    for other, apart in (("b", False), ("c", True)):
        g = torch.fx.Graph()
        a, o = g.placeholder("a"), g.placeholder(other)
        a.meta["val"], o.meta["val"] = vals["a"], vals[other]
        new = g.call_function(torch.ops.aten.add.Tensor, (g.call_function(
            torch.ops.aten.view.default, (o, [4])), 1))
        g.output((g.call_function(torch.ops.aten.copy_.default, (a, new)),))
        gm = torch.fx.GraphModule(torch.nn.Module(), g)
        assert straight_to_inductor.plainly_functional(gm) is apart
