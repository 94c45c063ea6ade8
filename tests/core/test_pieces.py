"""A graph compiled in pieces at once (Note [a graph compiled in pieces], core/pieces.py):
the cut, the joined module, and what a user sees of it: eager's results, a warm fresh-process
load, and the report saying how it was compiled. PRECOMPILE_NB_PIECES asks for the pieces (one
piece is the default)."""
from __future__ import annotations

import copy
import operator

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import _compat, build, pieces
from precompile_nb.tools.report import report_data
from tests.core.models import mlp
from tests.core.test_inductor import fresh_load

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")


class Block(torch.nn.Module):
    """Linear, LayerNorm, GELU, and a transposed intermediate read far from where it is
    made: views and multi-result ops that a cut must not split from their bases."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.b = torch.nn.Linear(16, 16)
        self.c = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.a(x)))
        t = h.t()  # a view, read again at the end
        h = torch.nn.functional.gelu(self.b(h))
        return self.c(h) + (t @ h).sum() * 1e-3


def step(m, opt, x, y):
    loss = torch.nn.functional.mse_loss(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _pair():
    torch.manual_seed(0)
    m = Block()
    ref = copy.deepcopy(m)
    opt = torch.optim.AdamW(m.parameters(), lr=torch.tensor(0.01))
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=torch.tensor(0.01))
    return m, opt, ref, opt_ref, torch.randn(4, 8), torch.randn(4, 4)


def _steps_like_eager(art, m, opt, ref, opt_ref, x, y, steps: int) -> None:
    """The artifact's steps give eager's losses and leave eager's parameters."""
    f = precompile.load(art.python_code, art.cache)
    for _ in range(steps):
        torch.testing.assert_close(f(m, opt, x, y), step(ref, opt_ref, x, y))
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)


def test_a_training_step_compiled_in_three_pieces_steps_like_eager(monkeypatch):
    monkeypatch.setenv(pieces.ENV, "3")
    m, opt, ref, opt_ref, x, y = _pair()
    art = build(step, m, opt, x, y)
    assert art.lowered.split.count == 3, art.lowered.split
    assert "call_piece2" in art.python_code
    # the kernels of the pieces keep their own names in one module
    names = [k.name for k in art.lowered.kernels if k.kind == "cpp"]
    assert len(names) == len(set(names)) and any("_p2_" in n for n in names), names
    _steps_like_eager(art, m, opt, ref, opt_ref, x, y, 3)
    report = report_data(art)
    assert report["compiled_in"]["pieces"] == 3
    lines = art.python_code.splitlines()
    for k in report["kernels"]:  # each kernel's report line is its definition
        if k["kind"] == "cpp":
            assert lines[k["line"] - 1].startswith(f"{k['name']} = async_compile."), k


def _deep_mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                               torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def test_an_artifact_in_pieces_loads_warm_in_a_fresh_process(monkeypatch, tmp_path):
    monkeypatch.setenv(pieces.ENV, "2")
    m, x = _deep_mlp(), torch.randn(5, 8)
    art = build(lambda m, x: m(x), m, x)
    assert art.lowered.split.count == 2, art.lowered.split
    r = fresh_load(tmp_path, art.python_code, art.cache, m, (x,), m(x).detach(), "cache")
    assert r["match"] and r["load"]["path"] == "warm", r["load"]
    assert r["cpp_builds"] == 0, r


def _functional(fn, *args) -> torch.fx.GraphModule:
    art = build(fn, *args, backend="eager")
    c = art.captured
    return _compat.functionalize(c.graph, c.fake_inputs)


def test_no_view_and_no_item_crosses_a_cut():
    m, opt, _, _, x, y = _pair()
    gm = _functional(step, m, opt, x, y)
    cut = pieces.split(gm, 3)
    by_name = {n.name: n for n in gm.graph.nodes}
    crossing = [by_name[rec.name] for p in cut.pieces[1:] for rec, ref in zip(
        (r for r in p.nodes if r.op == "placeholder"), p.inputs) if ref.piece >= 0]
    assert crossing, "the cut should carry values between pieces"
    for n in crossing:  # fresh tensors only: never a view of another value
        assert n.target is operator.getitem or pieces._base(n) is None, n.format_node()
    # views of earlier values are made again where they are read
    remade = [r.name for p in cut.pieces for r in p.nodes
              if r.op == "call_function" and by_name.get(r.name) is not None
              and pieces._base(by_name[r.name]) is not None]
    assert remade


class PatchNet(torch.nn.Module):
    """One patch convolution, then many cheap nodes (a ViT's shape, in small)."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = torch.nn.Conv2d(3, 4, 4, stride=4)
        self.head = torch.nn.Linear(4 * 2 * 2, 2)

    def forward(self, x):
        h = self.patch(x).flatten(1)
        for _ in range(110):
            h = torch.tanh(h) * 0.5 + h * 0.5
        return self.head(h)


def _cnn() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 6 * 6, 8), torch.nn.LayerNorm(8),
                               torch.nn.GELU(), torch.nn.Linear(8, 2))


def test_a_cnn_inductor_lays_out_in_channels_last_compiles_in_one_piece(monkeypatch):
    monkeypatch.setenv(pieces.ENV, "2")
    monkeypatch.setattr(_compat, "layout_optimized", lambda gm, inputs: True)
    m, x = _cnn(), torch.randn(2, 3, 8, 8)
    art = build(lambda m, x: m(x), m, x)
    assert art.lowered.split.count == 1
    assert "channels_last" in art.lowered.split.why, art.lowered.split.why
    torch.testing.assert_close(precompile.load(art.python_code, art.cache)(m, x), m(x))


def test_a_convolution_inductor_keeps_in_eager_layout_is_cut_like_any_node(monkeypatch):
    # a graph whose convolutions stay in eager's layout (on the CPU: a training step, Note [CPU
    # training keeps NCHW]) is cut like any other, each piece compiled in that layout
    monkeypatch.setenv(pieces.ENV, "2")
    torch.manual_seed(0)
    m, x, y = PatchNet(), torch.randn(2, 3, 8, 8), torch.randn(2, 2)
    ref = copy.deepcopy(m)
    opt = torch.optim.SGD(m.parameters(), lr=torch.tensor(0.1))
    opt_ref = torch.optim.SGD(ref.parameters(), lr=torch.tensor(0.1))
    gm = _functional(step, m, opt, x, y)
    assert not _compat.layout_optimized(gm, [n.meta.get("val") for n in gm.graph.nodes
                                             if n.op == "placeholder"])
    art = build(step, m, opt, x, y)
    assert art.lowered.split.count == 2, art.lowered.split
    _steps_like_eager(art, m, opt, ref, opt_ref, x, y, 2)


def test_a_failing_piece_falls_back_to_one_piece_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv(pieces.ENV, "2")
    import subprocess
    import sys
    import time

    def broken(n, warm):  # workers that die before compiling anything
        out = []
        for k in range(n):
            folder = tmp_path / f"w{k}"
            folder.mkdir()
            proc = subprocess.Popen([sys.executable, "-c", "import sys; print('boom');"
                                     "sys.exit(3)"], stdin=subprocess.PIPE,
                                    stdout=open(folder / "log", "wb"))
            out.append(pieces._Worker(proc, str(folder), time.time()))
        return out

    monkeypatch.setattr(pieces, "_spawn", broken)
    m, x = _deep_mlp(), torch.randn(5, 8)
    art = build(lambda m, x: m(x), m, x)
    assert art.lowered.split.count == 1
    assert "failed" in art.lowered.split.why and "boom" in art.lowered.split.why
    torch.testing.assert_close(precompile.load(art.python_code, art.cache)(m, x), m(x))


def test_workers_started_early_are_taken_or_ended(monkeypatch):
    # Note [piece workers start with the capture]: started (and warmed up) before the capture,
    # taken by the lowering that cuts; every one not taken ends with the lowering
    monkeypatch.setenv(pieces.ENV, "2")
    pieces.start_workers("cpu")
    early = list(pieces._EARLY)
    assert len(early) == 2
    m, x = _deep_mlp(), torch.randn(5, 8)
    art = build(lambda m, x: m(x), m, x)
    assert art.lowered.split.count == 2 and pieces._EARLY == []
    # the early workers did the compiling: each ran its piece to the end and exited cleanly
    # (a worker the lowering does not take is killed), and each reported its three stages
    assert [w.proc.returncode for w in early] == [0, 0]
    assert [len(w) for w in art.lowered.split.workers] == [3, 3], art.lowered.split.workers
    torch.testing.assert_close(precompile.load(art.python_code, art.cache)(m, x), m(x))
    monkeypatch.setenv(pieces.ENV, "3")
    pieces.start_workers("cpu")
    early = list(pieces._EARLY)
    xd = torch.randn(5, 8)
    torch._dynamo.mark_dynamic(xd, 0)  # not cut: the early workers are not needed
    assert build(lambda m, x: m(x), m, xd).lowered.split.count == 1
    assert pieces._EARLY == [] and all(w.proc.returncode not in (None, 0) for w in early)


def test_dynamic_sizes_compile_in_one_piece(monkeypatch):
    monkeypatch.setenv(pieces.ENV, "2")
    m, x = mlp(), torch.randn(5, 8)
    torch._dynamo.mark_dynamic(x, 0)
    art = build(lambda m, x: m(x), m, x)
    assert art.lowered.split.count == 1 and "dynamic" in art.lowered.split.why
    x2 = torch.randn(7, 8)
    torch.testing.assert_close(precompile.load(art.python_code, art.cache)(m, x2), m(x2))


def test_pieces_are_asked_for_and_one_piece_is_the_default(monkeypatch):
    monkeypatch.delenv(pieces.ENV, raising=False)
    g = torch.fx.Graph()
    x = g.placeholder("x")
    for _ in range(1300):
        x = g.call_function(torch.ops.aten.relu.default, (x,))
    g.output(x)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    k, why = pieces.how_many(gm)
    assert k == 1 and pieces.ENV in why
    pieces.start_workers("cpu")  # nothing asked: no worker starts
    assert pieces._EARLY == []
    monkeypatch.setenv(pieces.ENV, "4")
    assert pieces.how_many(gm) == (4, f"{pieces.ENV}=4")
    monkeypatch.setenv(pieces.ENV, "lots")
    assert pieces.how_many(gm) == (1, f"{pieces.ENV}='lots' is not a number")


def test_cuts_leave_every_piece_a_node():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    nodes = []
    for _ in range(8):
        x = g.call_function(torch.ops.aten.relu.default, (x,))
        nodes.append(x)
    g.output(x)
    for k in (2, 3, 4):
        cuts = pieces._cuts(nodes, k)
        bounds = [0, *cuts, len(nodes)]
        assert len(cuts) == k - 1 and all(a < b for a, b in zip(bounds, bounds[1:])), cuts


@pytest.mark.cuda
def test_cuda_training_step_in_pieces_steps_like_eager_and_an_inference_loads_warm(
        monkeypatch, tmp_path):
    """Triton kernels from several workers in one module: the step follows eager's, each
    multi-config kernel was autotuned at precompile, and a fresh process loads the inference
    artifact warm, compiling and benchmarking nothing."""
    monkeypatch.setenv(pieces.ENV, "3")
    m, opt, ref, opt_ref, x, y = _pair()
    for t in (m, ref):
        t.cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=torch.tensor(0.01), capturable=True)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=torch.tensor(0.01), capturable=True)
    x, y = x.cuda(), y.cuda()
    art = build(step, m, opt, x, y)
    assert art.lowered.split.count == 3, art.lowered.split
    _steps_like_eager(art, m, opt, ref, opt_ref, x, y, 3)
    model = _deep_mlp().cuda()
    xi = torch.randn(64, 8, device="cuda")
    inf = build(lambda m, x: m(x), model, xi)
    assert inf.lowered.split.count == 3, inf.lowered.split
    warm = fresh_load(tmp_path, inf.python_code, inf.cache, model, (xi,),
                      model(xi).detach(), "cache")
    assert warm["match"] and warm["load"]["path"] == "warm", warm["load"]
    assert warm["new_triton_files"] == 0 and warm["autotune_runs"] == [], warm
