"""The warm path of a CUDA artifact (Note [warm CUDA load]): each Triton kernel's cubin is
launched by torch's static CUDA launcher, with no Triton, Inductor or Dynamo imported.

The planning, the recorded launch and the generated launcher run on any machine (the launch
itself is replaced by a recorder); the end-to-end tests are CUDA-marked (run on the H200,
results in benchmarks/results/)."""
from __future__ import annotations

import ast
import copy
import json
import os
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from precompile_nb import precompile
from precompile_nb.core import _compat, warm
from tests.conftest import cuda
from tests.core.test_warm_path import load_fresh, without_warm_record

KERNEL_SRC = "@triton.jit\ndef triton_red_fused_0(in_ptr0, out_ptr0, xnumel, r0_numel, ...): pass\n"

# what Inductor's CUDA module looks like to the planner (2.11: header and one kernel)
MODULE = textwrap.dedent(f'''
    import torch
    from torch._inductor.async_compile import AsyncCompile
    from torch._inductor.select_algorithm import extern_kernels
    import triton
    import triton.language as tl
    from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
    from torch._C import _cuda_getCurrentRawStream as get_raw_stream
    async_compile = AsyncCompile()
    triton_red_fused_0 = async_compile.triton('triton_red_fused_0', {KERNEL_SRC!r},
                                              device_str='cuda')
    async_compile.wait(globals())
    del async_compile
    def call(args):
        x, = args
        out = torch.empty_like(x)
        triton_red_fused_0.run(x, out, 4096, 384, stream=get_raw_stream(0))
        return (out,)
''')

LAUNCH = {"function": "triton_red_fused_0", "num_warps": 4, "shared": 2048,
          "arg_types": "OOiiOO", "scratch": 2,
          "def_args": ["in_ptr0", "out_ptr0", "xnumel", "r0_numel"],
          "call_args": ["in_ptr0", "out_ptr0", "xnumel", "r0_numel"],
          "grid": {"prefix": [], "x": "-((xnumel) // -(2))", "y": "1", "z": "1"},
          "device": 0, "cc": 90}
CUBIN = "HASHDIR/triton_red_fused_0.cubin"


def record() -> dict:
    return {"cpp_kernels": [], "extern_kernels": {},
            "triton_kernels": [{"var": "triton_red_fused_0", "cubin": CUBIN,
                                "sha256": warm.triton_digest("triton_red_fused_0", KERNEL_SRC),
                                **copy.deepcopy(LAUNCH)}],
            "triton_skipped": {}}


@pytest.fixture
def a_gpu(monkeypatch):
    """This process can launch cubins on an sm_90 GPU (for the planner; nothing launches)."""
    monkeypatch.setattr(_compat, "can_launch_cubins", lambda: None)
    monkeypatch.setattr(_compat, "cuda_capability", lambda device: 90)


def plan(rec, cached=(CUBIN,)):
    return warm.plan(ast.parse(MODULE).body, rec, cache_used=True, no_cache_reason="",
                     cached_files=set(), cached_triton=set(cached), triton_dir="/triton")


def test_a_cuda_module_with_every_kernel_recorded_takes_the_warm_path(a_gpu):
    p = plan(record())
    assert p.path == "warm", p.reason
    assert "1 Triton kernel(s) launched from their cubins" in p.reason
    # `import triton.language as tl` is answered without importing Triton
    ns = {"__builtins__": warm.builtins_for(p.imports)}
    exec("import triton\nimport triton.language as tl\n"  # noqa: S102
         "from torch._inductor.runtime.triton_heuristics import start_graph\n", ns)
    assert not isinstance(ns["triton"], type(torch)) and ns["tl"] is not None


@pytest.mark.parametrize("change, why", [
    (lambda r: r["triton_kernels"].clear() or r["triton_skipped"].update(
        triton_red_fused_0="2 configurations are left: it is autotuned at its first call"),
     "Triton kernel triton_red_fused_0 is compiled at load: 2 configurations are left"),
    (lambda r: r.pop("triton_kernels"), "made by an older precompile_nb"),
    (lambda r: r["triton_kernels"][0].update(cc=80),
     "built for compute capability 8.0, GPU 0 of this process is 9.0"),
    (lambda r: r["triton_kernels"][0].update(def_args=["x): import os\n(", "out_ptr0"]),
     "malformed (an argument name is not an identifier of its own)"),
    (lambda r: r["triton_kernels"][0]["grid"].update(x="__import__('os')"),
     "is not arithmetic on the arguments"),
    (lambda r: r["triton_kernels"][0].update(arg_types="OOi"),
     "argument types and arguments differ in number"),
])
def test_a_kernel_the_warm_path_cannot_launch_compiles_and_says_why(a_gpu, change, why):
    rec = record()
    change(rec)
    p = plan(rec)
    assert p.path == "compile" and why in p.reason, p.reason


def test_a_missing_cubin_or_launcher_compiles_and_says_why(a_gpu, monkeypatch):
    p = plan(record(), cached=())
    assert p.path == "compile" and "holds no cubin for Triton kernel" in p.reason
    monkeypatch.setattr(_compat, "can_launch_cubins", lambda: "CUDA is not available")
    p = plan(record())
    assert p.path == "compile" and p.reason == "CUDA is not available"


def test_the_generated_launcher_computes_inductors_grid_and_passes_scratch(monkeypatch):
    launches = []
    monkeypatch.setattr(_compat, "launch_cubin", lambda: lambda *a: launches.append(a))
    run = warm.launcher(LAUNCH, function=1234)
    run("in", "out", 4095, 384, stream=7)
    # grid_0 = ceil(4095 / 2); the cubin takes the 4 arguments and 2 scratch pointers
    assert launches == [(1234, 2048, 1, 1, 4, 2048, "OOiiOO",
                         ("in", "out", 4095, 384, None, None), 7)]
    with torch.profiler.profile() as prof:  # a profiler sees a range named after the kernel
        run("in", "out", 8, 384, stream=7)
    assert launches[-1][1] == 4
    assert "triton_red_fused_0" in {e.name for e in prof.events()}


def test_a_two_dimensional_grid_with_a_prefix():
    launches = []
    rec = {**LAUNCH, "def_args": ["in_ptr0", "ynumel", "xnumel"],
           "call_args": ["in_ptr0", "ynumel", "xnumel"], "arg_types": "Oii", "scratch": 0,
           "grid": {"prefix": ["y_grid_raw_ = -((ynumel) // -(16))",
                               "y_grid_div_ = -((y_grid_raw_) // -(65535))"],
                    "x": "-((xnumel) // -(64))",
                    "y": "(0 if y_grid_div_ == 0 else -((y_grid_raw_) // -(y_grid_div_)))",
                    "z": "y_grid_div_"}}
    assert warm._malformed_launch({**rec, "cubin": CUBIN}) is None
    mp = pytest.MonkeyPatch()
    mp.setattr(_compat, "launch_cubin", lambda: lambda *a: launches.append(a))
    try:
        warm.launcher(rec, function=1)("p", 100, 1000, stream=0)
    finally:
        mp.undo()
    assert launches[0][1:4] == (16, 7, 1)


def test_record_finds_each_cubin_by_the_kernels_hash_even_under_a_shortened_name():
    long_name = "triton_red_fused_" + "x" * 200
    files = (("triton", "D1/__grp__k.json", b'{"child_paths": {}}'),
             ("triton", "D1/" + long_name[:150] + ".json", json.dumps({"hash": "h1"}).encode()),
             ("triton", "D1/" + long_name[:150] + ".cubin", b"\x7fELF"),
             ("triton", "D2/k2.json", json.dumps({"hash": "h2"}).encode()))
    src = MODULE.replace("triton_red_fused_0 = async_compile", "k_b = async_compile.triton("
                         "'k_b', 'src', device_str='cuda')\ntriton_red_fused_0 = async_compile")
    rec = warm.record(src, files, {"triton_red_fused_0": {**LAUNCH, "hash": "h1"},
                                   "k_b": {"why": "TMA descriptors"}})
    assert [k["cubin"] for k in rec["triton_kernels"]] == ["D1/" + long_name[:150] + ".cubin"]
    assert rec["triton_skipped"] == {"k_b": "TMA descriptors"}


def test_a_cubin_the_driver_refuses_is_an_oserror_naming_it(monkeypatch):
    # load's warm path falls back to compiling on OSError (as for a C++ library that does
    # not import), with a warning that says why
    def refuse(path, function, shared, device):
        raise RuntimeError("CUDA driver error: device kernel image is invalid")

    monkeypatch.setattr(torch._C, "_StaticCudaLauncher",
                        type("L", (), {"_load_kernel": staticmethod(refuse)}), raising=False)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    with pytest.raises(OSError, match="cannot load kernel k0 from /c/k0.cubin: CUDA driver"):
        _compat.load_cubin("/c/k0.cubin", "k0", 0, 0)


def test_a_warm_load_hands_the_driver_each_cubin_from_memory_and_installs_none(
        a_gpu, monkeypatch, tmp_path):
    # Note [cubins from memory]: the warm path reads the cubin's bytes through an anonymous
    # memory file; nothing is written under Triton's cache, and should the warm path fail
    # the cubin is left to install with the rest
    import importlib

    load = importlib.import_module("precompile_nb.core.load")
    if not _compat.cubins_from_memory():
        pytest.skip("this process cannot make anonymous memory files (not Linux)")
    monkeypatch.setattr(_compat, "triton_cache_dir", lambda device: str(tmp_path / "triton"))
    monkeypatch.setattr(_compat, "light_inductor_cache_dir", lambda: str(tmp_path / "ind"))
    seen = []

    def driver(path, function, shared, device):  # cuModuleLoad opens the path it is given
        with open(path, "rb") as f:
            seen.append((path, f.read(), function))
        return 1234, 32, 0  # (function, n_regs, n_spills)

    monkeypatch.setattr(torch._C, "_StaticCudaLauncher",
                        type("L", (), {"_load_kernel": staticmethod(driver),
                                       "_launch_kernel": staticmethod(print)}), raising=False)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    p = plan(record())
    stats = {"written": 0, "present": 0, "deferred": 0}
    cubin = b"\x7fELF cubin bytes" * 100
    files = [("triton", CUBIN, memoryview(cubin)), ("triton", "HASHDIR/k.ptx", b"ptx")]
    rest = load._install(files, p, {"device_index": 0}, stats)
    assert not (tmp_path / "triton").exists()  # nothing installed for the warm path
    assert {f[1] for f in rest} == {CUBIN, "HASHDIR/k.ptx"} and stats["deferred"] == 2
    kernel = p.imports["torch._inductor.async_compile"]["AsyncCompile"]().triton(
        "triton_red_fused_0", KERNEL_SRC)
    assert kernel.name == "triton_red_fused_0"
    [(path, data, function)] = seen
    assert path.startswith("/proc/self/fd/") and data == cubin
    assert function == "triton_red_fused_0"


def test_a_launch_record_that_cannot_be_made_is_a_reason_at_load_not_an_error():
    # recording is best effort: precompile never fails on it, the load says why it compiles
    assert _compat.triton_launch_records(["triton_poi_fused_0"]) == {
        "triton_poi_fused_0": {"why": "Inductor's module was not found after the compile"}}
    assert _compat.triton_launch_records([]) == {}


# ---- on the GPU ---------------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4, vocab: int = 128):
        super().__init__()
        self.emb, self.heads = nn.Embedding(vocab, d), heads
        self.ln1, self.ln2, self.ln = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, idx):
        x = self.emb(idx)
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        x = x + self.down(F.gelu(self.up(self.ln2(x))))
        return self.ln(x) @ self.emb.weight.t()


def lm_step(m, idx, targets):
    loss = F.cross_entropy(m(idx).flatten(0, 1), targets.flatten())
    loss.backward()
    return loss.detach()


@pytest.fixture(scope="module")
def lm_pair():
    """An LM training step on the GPU (a fused reduction whose long name Triton shortens,
    attention, GEMMs) and its pair."""
    torch.manual_seed(0)
    m = Block().cuda()
    idx, tg = (torch.randint(0, 128, (4, 32), device="cuda") for _ in range(2))
    return (m, idx, tg, *precompile(lm_step, m, idx, tg))


@cuda
def test_cuda_warm_load_of_a_training_step_launches_cubins_without_any_compiler(lm_pair,
                                                                                tmp_path):
    m, idx, tg, code, cache = lm_pair
    report, got = load_fresh(tmp_path, code, cache, copy.deepcopy(m), idx, tg, train=True)
    load = report["load"]
    assert load["path"] == "warm", load
    assert "Triton kernel(s) launched from their cubins" in load["reason"]
    assert report["heavy"] == [], report["heavy"]  # no Inductor, Dynamo, sympy, Triton
    assert report["started"] == [], report["started"]
    ref = copy.deepcopy(m)
    torch.testing.assert_close(got["out"], lm_step(ref, idx, tg))
    for g, p in zip(got["grads"], ref.parameters()):
        torch.testing.assert_close(g, p.grad)


@cuda
def test_cuda_warm_load_without_records_compiles_and_gives_the_same_result(lm_pair, tmp_path):
    m, idx, tg, code, cache = lm_pair
    old, old_cache = without_warm_record(code, cache)  # as an older precompile_nb made it
    report, got = load_fresh(tmp_path, old, old_cache, copy.deepcopy(m), idx, tg, train=True)
    assert report["load"]["path"] == "compile" and "_PC_WARM" in report["load"]["reason"]
    torch.testing.assert_close(got["out"], lm_step(copy.deepcopy(m), idx, tg))


@cuda
def test_cuda_mark_dynamic_cnn_is_autotuned_at_precompile_and_loads_warm(tmp_path):
    # Note [autotuning dynamic sizes]: a dynamic batch used to leave its multi-config kernels
    # to be benchmarked at the first call after load, which sent the load down the compile path
    from tests.core.models import SmallResNet
    from torch._dynamo import mark_dynamic

    from precompile_nb.core.cache import read_tag

    torch.manual_seed(0)
    m, x = SmallResNet().cuda().eval(), torch.randn(8, 3, 16, 16, device="cuda")
    mark_dynamic(x, 0)
    code, cache = precompile(lambda m, x: m(x), m, x)
    rec = ast.literal_eval(code.split(f"\n{warm.WARM_NAME} = ", 1)[1].split("\n\n", 1)[0])
    # the example's size, then the bottom of the range (Note [a configuration per size])
    assert rec["autotuned_at"] == [{"x": [8, 3, 16, 16]}, {"x": [1, 3, 16, 16]}], rec
    assert len(rec["autotuned_kernels"]) == 2 and min(rec["autotuned_kernels"]) > 0, rec
    assert rec["triton_skipped"] == {}, rec["triton_skipped"]
    assert any(rel.endswith(".best_config") for _, rel, _, _ in read_tag(cache)[1]["files"])
    for n in (1, 37):  # other sizes of the range, each in a fresh process
        xi = torch.randn(n, 3, 16, 16, device="cuda")
        (tmp_path / str(n)).mkdir()
        report, got = load_fresh(tmp_path / str(n), code, cache, m, xi, train=False)
        assert report["load"]["path"] == "warm", report["load"]
        assert report["heavy"] == [] and report["started"] == [], report
        torch.testing.assert_close(got["out"], m(xi), atol=1e-4, rtol=1e-4)


@cuda
def test_cuda_a_dynamic_batch_keeps_a_configuration_per_size_and_each_launch_picks_it(
        tmp_path, monkeypatch):
    # Note [a configuration per size]: a row softmax tuned at 256 (the example), 16384 and 1
    # rows. Which configuration is fastest is the GPU's to say, and can be one for all sizes;
    # here the autotuner is made to choose by size (the first configuration up to 64k
    # elements, the last above), so that each size must run its own cubin and match eager
    from torch._dynamo import mark_dynamic
    from torch._inductor.runtime import triton_heuristics as th

    def by_size(self, *args, **kwargs):
        n = 1
        for name, a in zip(self.fn.arg_names, args):
            n *= a if "numel" in name and type(a) is int else 1
        pick = self.launchers[0 if n <= 65536 else -1]
        return {launcher: 0.0 if launcher is pick else 1.0 for launcher in self.launchers}

    monkeypatch.setattr(th.CachingAutotuner, "benchmark_all_configs", by_size)
    x = torch.randn(256, 4096, device="cuda")
    mark_dynamic(x, 0)
    m = nn.Identity()
    code, cache = precompile(lambda m, x: torch.softmax(m(x), -1) * 2, m, x,
                             tune_sizes=[16384])
    monkeypatch.undo()
    rec = ast.literal_eval(code.split(f"\n{warm.WARM_NAME} = ", 1)[1].split("\n\n", 1)[0])
    assert rec["autotuned_at"] == [{"x": [256, 4096]}, {"x": [16384, 4096]},
                                   {"x": [1, 4096]}], rec["autotuned_at"]
    sized = [k["by_size"] for k in rec["triton_kernels"] if "by_size" in k]
    assert sized and all(len(s["buckets"]) == 2 for s in sized), rec["triton_kernels"]
    for n in (1, 300, 16384):  # each in a fresh process
        xi = torch.randn(n, 4096, device="cuda")
        (tmp_path / str(n)).mkdir()
        report, got = load_fresh(tmp_path / str(n), code, cache, m, xi, train=False)
        assert report["load"]["path"] == "warm", report["load"]
        assert "with a configuration per size" in report["load"]["reason"], report["load"]
        assert report["heavy"] == [] and report["started"] == [], report
        torch.testing.assert_close(got["out"], torch.softmax(xi, -1) * 2)


def _triton_kernel_dir(d: str, name: str, built_in: str) -> list[tuple[str, str, bytes]]:
    """The files Triton 3.x leaves for one compiled kernel, its group file naming them by
    absolute path in the compiling process's cache."""
    names = [f"{name}.{e}" for e in ("source", "ttir", "ttgir", "llir", "ptx", "cubin", "json")]
    group = {"child_paths": {n: f"{built_in}/{d}/{n}" for n in names}}
    return ([("triton", f"{d}/__grp__{name}.json", json.dumps(group).encode())]
            + [("triton", f"{d}/{n}", b"\x7fELF" if n.endswith("cubin") else
                json.dumps({"hash": d}).encode() if n.endswith("json") else b"IR " * 100)
               for n in names])


def test_a_cache_keeps_each_triton_kernels_binary_and_what_finds_it(tmp_path, monkeypatch):
    """Note [Triton binaries only]: the compile stages' texts are left out of the cache, and
    each installed group file names only files that are there, so Triton's own cache lookup
    (a miss when a named file is missing) still finds the kernel on the compile path."""
    from precompile_nb.core import cache as cache_mod
    built = "/tmp/precompile_nb_gone/tmpx/triton"
    files = (_triton_kernel_dir("H1", "triton_poi_fused_add_0", built)
             + [("triton", "NOBIN/k.ptx", b"ptx"), ("triton", "NOBIN/k.json", b"{}"),
                ("inductor", "ab/cab.py", b"x = 1")])
    kept = _compat.triton_binaries_only(files)
    names = {rel for _, rel, _ in kept}
    assert names == {"H1/__grp__triton_poi_fused_add_0.json", "H1/triton_poi_fused_add_0.cubin",
                     "H1/triton_poi_fused_add_0.json", "NOBIN/k.ptx", "NOBIN/k.json",
                     "ab/cab.py"}  # a dir without a binary is kept as it is
    assert warm._cubins_by_hash(tuple(kept)) == {"H1": "H1/triton_poi_fused_add_0.cubin"}
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    cache_mod.install(kept, 0)
    group = json.loads((tmp_path / "triton" / "H1" / "__grp__triton_poi_fused_add_0.json")
                       .read_text())
    assert sorted(group["child_paths"]) == ["triton_poi_fused_add_0.cubin",
                                            "triton_poi_fused_add_0.json"]
    assert all(os.path.exists(p) for p in group["child_paths"].values())
    try:  # Triton's own lookup, where Triton is installed (the CUDA builds of torch)
        from triton.runtime.cache import FileCacheManager
    except ImportError:
        return
    monkeypatch.setattr(FileCacheManager, "__init__", lambda self, key: setattr(
        self, "cache_dir", str(tmp_path / "triton" / key)) or setattr(self, "key", key)
        or setattr(self, "lock_path", None), raising=True)
    found = FileCacheManager("H1").get_group("triton_poi_fused_add_0.json")
    assert found is not None and sorted(found) == sorted(group["child_paths"])
