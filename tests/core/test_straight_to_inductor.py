"""Note [one trace between capture and Inductor]: a plainly functional graph goes to Inductor
without AOTAutograd's two traces, and Inductor writes the same code for it; any other graph
goes through AOTAutograd as before."""
from __future__ import annotations

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import _compat, build
from precompile_nb.core._compat import inductor, straight_to_inductor
from precompile_nb.core.capture import capture

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


def _example(seed: int = 0):
    torch.manual_seed(seed)
    return _Net(), torch.randn(6, 8), torch.randint(0, 4, (6,))


def _without_aot_id(source: str) -> list[str]:
    """The module's lines, each private compile dir's name replaced, less the line that names
    AOTAutograd's graph (written only where AOTAutograd ran)."""
    return [line for line in _compat.reproducible_inductor_source(source).splitlines()
            if not line.startswith("# AOT ID:")]


@pytest.fixture
def traced(monkeypatch):
    """Counts the graphs lowering traced once with Inductor's decompositions."""
    calls = []
    original = inductor.decomposed

    def spy(gm, fake_inputs):
        calls.append(gm)
        return original(gm, fake_inputs)

    monkeypatch.setattr(inductor, "decomposed", spy)
    return calls


@pytest.mark.parametrize("case", ["train", "infer_with_write"])
def test_inductor_writes_the_same_code_with_or_without_aot_autograd(case, traced,
                                                                     monkeypatch):
    arts = {}
    for env in ("0", "1"):
        monkeypatch.setenv(ENV, env)
        m, x, y = _example()
        arts[env] = build(_train_step, m, x, y) if case == "train" else \
            build(_counting_infer, m, x)
    assert len(traced) == 1  # only with the switch on
    a, b = arts["0"].lowered, arts["1"].lowered
    assert "AOT ID" not in b.source  # AOTAutograd did not run
    assert _without_aot_id(a.source) == _without_aot_id(b.source)
    assert [(k.name, k.source_nodes, k.fused_ops) for k in a.kernels] == \
        [(k.name, k.source_nodes, k.fused_ops) for k in b.kernels]
    assert a.kernels and all(k.source_nodes for k in b.kernels)  # provenance kept


def test_a_straight_artifact_computes_what_eager_does(traced):
    m, x, y = _example()
    code, cache = precompile(_counting_infer, m, x)
    assert len(traced) == 1
    fn = precompile.load(code, cache)
    m2, _, _ = _example()
    for _ in range(2):
        torch.testing.assert_close(fn(m, x), _counting_infer(m2, x))
    assert int(m.steps) == int(m2.steps) == 2  # precompile wrote nothing: two calls each

    m, x, y = _example(1)
    code, cache = precompile(_train_step, m, x, y)
    m2, _, _ = _example(1)
    want = _train_step(m2, x, y)
    m.zero_grad()
    torch.testing.assert_close(precompile.load(code, cache)(m, x, y), want)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def _functional(fn, *args):
    c = capture(fn, list(args))
    return _compat.functionalize(c.graph, c.fake_inputs)


def test_which_graphs_skip_aot_autograd(monkeypatch):
    m, x, y = _example()
    assert straight_to_inductor.plainly_functional(_functional(_train_step, m, x, y))
    assert straight_to_inductor.plainly_functional(_functional(_counting_infer, m, x))
    # BatchNorm's op does not say that it writes its running statistics: AOTAutograd's way
    bn = torch.nn.BatchNorm1d(8)
    c = capture(_bn_step, [bn, x])
    assert not straight_to_inductor.plainly_functional(c.graph)
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
def test_cuda_training_step_same_triton_code_and_eager_results(traced, monkeypatch):
    sources = {}
    for env in ("0", "1"):
        monkeypatch.setenv(ENV, env)
        m, x, y = _example()
        m, x, y = m.cuda(), x.cuda(), y.cuda()
        art = build(_train_step, m, x, y)
        sources[env] = (_without_aot_id(art.lowered.source),
                        [(k.name, k.source_nodes) for k in art.lowered.kernels])
    assert len(traced) == 1
    assert "AOT ID" not in art.lowered.source  # AOTAutograd did not run
    assert sources["0"] == sources["1"]
    assert any(k.kind == "triton" for k in art.lowered.kernels)
    m2, _, _ = _example()
    m2 = m2.cuda()
    want = _train_step(m2, x, y)
    m.zero_grad()
    got = precompile.load(art.python_code, art.cache)(m, x, y)
    torch.testing.assert_close(got, want)
    for p, q in zip(m.parameters(), m2.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


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
