"""The warm path of load (Note [warm load] in core/warm.py): with its cache, an inductor CPU
artifact loads and runs in a fresh process without importing the compiler stack or starting
a process; without a matching cache it compiles as before and says why."""
from __future__ import annotations

import ast
import copy
import json
import os
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from precompile_nb import precompile
from precompile_nb.core import _compat, warm
from precompile_nb.core.cache import pack, read_files, read_tag
from tests.conftest import run_fresh
from tests.core.models import train_step

# Modules a warm load must not import: the compiler (Inductor's package itself pulls in
# torch._dynamo and sympy), the graph libraries, the kernel compile/lookup machinery.
HEAVY = ("torch._inductor", "torch._inductor.codecache", "torch._inductor.compile_fx",
         "torch._inductor.graph", "torch._inductor.lowering", "torch._inductor.scheduler",
         "torch._inductor.select_algorithm", "torch._inductor.async_compile", "torch._dynamo",
         "sympy", "networkx", "triton",
         # nor what only a notebook needs (imported lazily by the package)
         "IPython", "ipywidgets", "precompile_nb.viewers", "precompile_nb.magics",
         # nor precompile_nb's own stages and lowering modules (Note [a load imports no
         # stage]: they cost a tiny MLP's load 12.8 ms of 67 when they came with the door)
         "precompile_nb.core.capture", "precompile_nb.core.lower",
         "precompile_nb.core.lowerings", "precompile_nb.core.tuning",
         # nor the stages' records (their dataclasses took 4.5 ms of a 12 ms import)
         "precompile_nb.core.schemas",
         # nor the package's copy of the driver and its records: the artifact runs its own
         # (Note [a load imports no driver]: 2.1 ms of a transformer's 10.7 ms import + load)
         "precompile_nb.runtime.driver", "precompile_nb.runtime.convention",
         *(f"precompile_nb.core._compat.{m}" for m in (
             "autotune", "compile_pool", "conv_layout", "cpp_runs", "isa_probes",
             "kernel_store", "kernel_threads", "lowering_key", "pieces",
             "straight_to_inductor", "tracing", "triton_store",
             # the lowering's and the compile path's torch internals, and the switches
             # (~0.6 ms of the package's import when they came with the door)
             "inductor", "scoped_patch")),
         # nor the pair store: a load of two strings reads no files
         "precompile_nb.tools.store")

# Run in a fresh interpreter: count every child process (subprocess, spawn, fork) from before
# load, load the pair with its cache, call it once, report. {dir} holds art.py, art.cache and
# ref.pt = {"model", "args", "train"}.
CHILD = """
import json, os, subprocess, sys, warnings
warnings.simplefilter("ignore")
import torch

started = []
_popen = subprocess.Popen.__init__
def _counting_popen(self, args, *a, **k):
    started.append(str(args)[:200])
    return _popen(self, args, *a, **k)
subprocess.Popen.__init__ = _counting_popen
for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
    if hasattr(os, name):
        def _counting(*a, _name=name, _orig=getattr(os, name), **k):
            started.append(_name)
            return _orig(*a, **k)
        setattr(os, name, _counting)

from precompile_nb import precompile
d = {dir!r}
ref = torch.load(os.path.join(d, "ref.pt"), weights_only=False)
f = precompile.load(open(os.path.join(d, "art.py")).read(),
                    open(os.path.join(d, "art.cache"), "rb").read())
m = ref["model"]
out = f(m, *ref["args"])
if out.is_cuda:
    torch.cuda.synchronize()
grads = [p.grad for p in m.parameters()] if ref["train"] else []
torch.save({{"out": out, "grads": grads}}, os.path.join(d, "got.pt"))
print(json.dumps({{"heavy": [n for n in {heavy!r} if n in sys.modules], "started": started,
                  "load": f.__precompile_load__}}))
"""


def without_warm_record(code: str, cache: bytes) -> tuple[str, bytes]:
    """The pair as a precompile_nb without kernel records made it: no _PC_WARM, same files."""
    start = code.index("_PC_WARM = ")
    old = code[:start] + code[code.index("\n\n", start) + 2:]
    return old, pack(old, "inductor", tuple(read_files(cache, read_tag(cache)[1])))


def tiny_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))


@pytest.fixture(scope="module")
def forward_pair():
    m, x = tiny_mlp(), torch.randn(32, 64)
    return (m, x, *precompile(lambda m, x: m(x), m, x))


@pytest.fixture(scope="module")
def train_pair():
    m, x = tiny_mlp(), torch.randn(32, 64)
    return (m, x, *precompile(train_step, m, x))


def load_fresh(tmp: Path, code: str, cache: bytes, model: nn.Module, *args: torch.Tensor,
               train: bool) -> tuple[dict, dict]:
    """Load and call the pair once in a fresh process with empty compiler caches; returns
    its report and what it computed (output, and gradients for a training step)."""
    (tmp / "art.py").write_text(code)
    (tmp / "art.cache").write_bytes(cache)
    torch.save({"model": model, "args": args, "train": train}, tmp / "ref.pt")
    empty = tempfile.mkdtemp(dir=tmp)
    r = run_fresh(CHILD.format(dir=str(tmp), heavy=HEAVY),
                  env={"TORCHINDUCTOR_CACHE_DIR": empty,
                       "TRITON_CACHE_DIR": os.path.join(empty, "triton")})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), torch.load(tmp / "got.pt")


def test_warm_load_of_a_forward_needs_no_compiler_and_starts_no_process(forward_pair,
                                                                        tmp_path):
    m, x, code, cache = forward_pair
    report, got = load_fresh(tmp_path, code, cache, m, x, train=False)
    assert report["load"]["path"] == "warm", report["load"]
    assert "1 C++ kernel" in report["load"]["reason"]
    assert report["heavy"] == [], report["heavy"]
    assert report["started"] == [], report["started"]  # not even `g++ --version`
    torch.testing.assert_close(got["out"], m(x))


def test_warm_load_of_a_training_step_matches_eager_loss_and_gradients(train_pair, tmp_path):
    m, x, code, cache = train_pair
    report, got = load_fresh(tmp_path, code, cache, copy.deepcopy(m), x, train=True)
    assert report["load"]["path"] == "warm", report["load"]
    assert report["heavy"] == [] and report["started"] == [], report
    ref = copy.deepcopy(m)
    loss = train_step(ref, x)
    torch.testing.assert_close(got["out"], loss.detach())
    for g, p in zip(got["grads"], ref.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_a_warm_load_reads_its_records_without_parsing_the_whole_module(forward_pair,
                                                                         monkeypatch):
    # the module's syntax tree is most of a warm load's time (a GPT step's module is
    # ~450 KB): the metadata and the kernel records are read from their own statements
    import importlib

    load_module = importlib.import_module("precompile_nb.core.load")
    m, x, code, cache = forward_pair
    monkeypatch.setattr(load_module, "_read", lambda *a: pytest.fail("parsed the module"))
    f = precompile.load(code, cache)
    assert f.__precompile_load__["path"] == "warm"
    torch.testing.assert_close(f(m, x), m(x))


def test_load_without_cache_compiles_and_says_why(forward_pair):
    m, x, code, _ = forward_pair
    f = precompile.load(code)
    assert f.__precompile_load__["path"] == "compile"
    assert f.__precompile_load__["reason"].startswith("no cache")
    torch.testing.assert_close(f(m, x), m(x))


def test_cache_from_another_torch_build_compiles_and_names_the_build(forward_pair,
                                                                     monkeypatch):
    m, x, code, cache = forward_pair
    monkeypatch.setattr(_compat, "torch_build_id", lambda: "9.9.9+other")
    with pytest.warns(RuntimeWarning, match="ignoring it"):
        f = precompile.load(code, cache)
    assert f.__precompile_load__["path"] == "compile"
    assert "another torch build" in f.__precompile_load__["reason"]
    torch.testing.assert_close(f(m, x), m(x))


def test_an_artifact_made_before_the_kernel_record_compiles_and_says_so(forward_pair):
    m, x, code, cache = forward_pair
    f = precompile.load(*without_warm_record(code, cache))  # as precompile_nb made it
    assert f.__precompile_load__["used"] and f.__precompile_load__["path"] == "compile"
    assert "_PC_WARM" in f.__precompile_load__["reason"]
    torch.testing.assert_close(f(m, x), m(x))


def test_a_module_importing_more_of_inductor_takes_the_compile_path_naming_the_import():
    graph = ast.parse("from torch._inductor.runtime import triton_heuristics\n"
                      "from torch._inductor.select_algorithm import extern_kernels\n").body
    plan = warm.plan(graph, {"cpp_kernels": [], "extern_kernels": {}}, cache_used=True,
                     no_cache_reason="", cached_files=set())
    assert plan.path == "compile"
    assert "torch._inductor.runtime.triton_heuristics" in plan.reason


def test_the_light_cache_dir_is_the_one_inductor_uses(monkeypatch, tmp_path):
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "rel" / ".." / "c"))
    assert _compat.light_inductor_cache_dir() == cache_dir()
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    light = _compat.light_inductor_cache_dir()
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert light == cache_dir()


def test_the_light_triton_cache_dir_is_the_one_inductor_uses(monkeypatch, tmp_path):
    # where load installs the cubins is where Triton and the warm path look for them
    from torch._inductor.runtime.cache_dir_utils import triton_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    assert _compat.triton_cache_dir(1) == triton_cache_dir(1) == str(tmp_path / "c/triton/1")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "t"))
    assert _compat.triton_cache_dir(0) == triton_cache_dir(0)


def test_every_import_the_warm_path_serves_exists_in_this_torch():
    # a torch that renamed one of them would generate modules the warm path cannot serve
    import importlib

    served = _compat.warm_module_attrs(object, object())
    for module, names in _compat.WARM_IMPORTS.items():
        real = importlib.import_module(module)
        assert set(served[module]) == names
        for name in names:
            assert hasattr(real, name), f"{module}.{name}"
    from torch._inductor.utils import _align

    assert [served["torch._inductor.codegen.memory_planning"]["_align"](n)
            for n in (0, 1, 64, 65)] == [_align(n) for n in (0, 1, 64, 65)]


def test_a_dynamic_batch_artifact_loads_warm_and_serves_another_size_importing_no_compiler(
        tmp_path):
    from torch._dynamo import mark_dynamic
    m, x = tiny_mlp(), torch.randn(32, 64)
    mark_dynamic(x, 0)
    code, cache = precompile(lambda m, x: m(x).softmax(-1), m, x)
    xi = torch.randn(5, 64)
    report, got = load_fresh(tmp_path, code, cache, m, xi, train=False)
    assert report["load"]["path"] == "warm", report["load"]
    assert report["heavy"] == [] and report["started"] == [], report
    torch.testing.assert_close(got["out"], m(xi).softmax(-1))


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def test_a_graph_of_torch_ops_alone_says_it_has_no_compiled_kernel():
    """A graph Inductor lowers to torch's own ops only (here its matrix product) loads warm,
    and the reason says so, naming no C++ kernel it does not have."""
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    code, cache = precompile(_product, a, b)
    f = precompile.load(code, cache)
    load = f.__precompile_load__
    assert load["path"] == "warm", load
    assert "no compiled kernel, 1 torch op(s) called directly" in load["reason"], load["reason"]
    assert "C++" not in load["reason"], load["reason"]
    torch.testing.assert_close(f(a, b), a @ b)
