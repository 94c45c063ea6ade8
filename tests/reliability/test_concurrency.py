"""Concurrency: threads capturing and calling at once; processes loading one inductor artifact
into one shared compiler cache directory (SPEC §4: "concurrent calls are safe")."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
import torch
from torch import nn

from precompile_nb import precompile

from tests.conftest import run_threads

from .conftest import ROOT, example_inputs, gather_double_relu, load_quietly, shipped_files

N_THREADS = 8
N_PROCESSES = 3  # each fresh process spends ~9 s importing inductor (2 cores)


def test_eight_threads_capturing_at_once_each_get_a_correct_artifact():
    models = []
    for i in range(N_THREADS):
        torch.manual_seed(i)
        models.append(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    xs = [torch.randn(3, 8) for _ in range(N_THREADS)]
    before = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]
    results: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def capture(i: int) -> None:
        scale = float(i + 1)  # each thread its own computation: artifacts must not mix

        def fn(m, x):
            return m(x).relu() * scale

        code, cache = precompile(fn, models[i], xs[i], backend="eager")
        f = load_quietly(code, cache)
        with torch.no_grad():
            results[i] = (f(models[i], xs[i]), fn(models[i], xs[i]))

    errors = run_threads(N_THREADS, capture)
    assert not errors, errors
    for i in range(N_THREADS):
        got, want = results[i]
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        for k, v in models[i].state_dict().items():  # capture leaves the example as it was
            assert torch.equal(v, before[i][k]), (i, k)


def test_eight_threads_calling_one_loaded_artifact_get_their_own_results(eager_pair,
                                                                        inductor_pair):
    for pair in (eager_pair, inductor_pair):
        f = load_quietly(pair.python_code, pair.cache)
        _, idx = example_inputs()
        wrong: list[int] = []

        def call(i: int) -> None:
            g = torch.Generator().manual_seed(i)
            for _ in range(300):
                x = torch.randn(4, 4, generator=g)
                if not torch.equal(f(x, idx), gather_double_relu(x, idx)):
                    wrong.append(i)

        errors = run_threads(N_THREADS, call)
        assert not errors and not wrong, (pair.name, errors, wrong)


CHILD = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
import pytest
import torch
from torch._inductor import cpp_builder

builds = []
_build = cpp_builder.CppBuilder.build


def counting_build(self):  # every C++ compiler run
    builds.append(self.get_target_file_path())
    return _build(self)


cpp_builder.CppBuilder.build = counting_build
from precompile_nb import precompile
from tests.reliability.conftest import example_inputs, gather_double_relu

pair_dir, go, ready = sys.argv[1:4]
code = open(os.path.join(pair_dir, "inductor.py"), encoding="utf-8").read()
cache = open(os.path.join(pair_dir, "inductor.cache"), "rb").read()
open(ready, "w").close()
while not os.path.exists(go):  # all processes load at the same moment
    time.sleep(0.002)
f = precompile.load(code, cache)
x, idx = example_inputs()
ok = all(torch.equal(f(x, idx), gather_double_relu(x, idx)) for _ in range(100))
print(json.dumps({"ok": ok, "load": f.__precompile_load__, "cpp_builds": len(builds)}))
"""


def test_processes_loading_one_inductor_artifact_into_one_empty_shared_cache_dir(
        inductor_pair, pair_dir, tmp_path):
    shared = {"inductor": tmp_path / "shared_inductor_cache",
              # where CUDA is present even a CPU compile ships triton's driver utils
              "triton": tmp_path / "shared_triton_cache"}
    for d in shared.values():
        d.mkdir()
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(shared["inductor"]),
               TRITON_CACHE_DIR=str(shared["triton"]),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(N_PROCESSES)]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(pair_dir), str(go), str(r)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in ready]
    try:
        deadline = time.monotonic() + 180
        while not all(r.exists() for r in ready):
            assert time.monotonic() < deadline, "children did not start"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.01)
        go.touch()
        outs = [p.communicate(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    reports = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and "Traceback" not in err, err[-4000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    shipped = shipped_files(inductor_pair.cache)
    # python_code's bytecode and literals ride in the cache and are never installed (Notes
    # [bytecode in the cache], [the literals in the cache]): the files a load installs or
    # defers are the others
    files = [f for f in shipped if f[0] in shared]
    assert [f[0] for f in shipped if f[0] not in shared] == ["python", "python"]
    for r in reports:
        assert r["ok"], r  # every call in every process right
        load = r["load"]
        assert load["written"] + load["present"] + load["deferred"] == len(files), r
        assert load["written"] + load["present"] > 0, r
    # nothing torn or half-written in the shared directory (a warm load installs only the
    # libraries it loads: Note [install what is read])
    installed = 0
    for root, rel, data in files:
        path = shared[root].joinpath(*rel.split("/"))
        if path.exists():
            installed += 1
            assert hashlib.sha256(path.read_bytes()).hexdigest() == \
                hashlib.sha256(data).hexdigest(), rel
    assert installed == reports[0]["load"]["written"] + reports[0]["load"]["present"]
    for d in shared.values():
        assert not list(d.rglob(".pcnb-*")), "temporary files left behind"
    # the cache ships every binary, the CPU ISA probes included: no process compiles
    assert [r["cpp_builds"] for r in reports] == [0] * N_PROCESSES, reports


def test_threads_loading_and_capturing_together_do_not_interfere(eager_pair):
    n = N_THREADS
    x, idx = example_inputs()
    ok: list[bool] = []

    def work(i: int) -> None:
        if i % 2:
            f = load_quietly(eager_pair.python_code, eager_pair.cache)
            ok.append(torch.equal(f(x, idx), gather_double_relu(x, idx)))
        else:
            code, cache = precompile(lambda a, b: (a[b] * (i + 2)).relu(), x, idx,
                                     backend="eager")
            ok.append(torch.equal(load_quietly(code, cache)(x, idx), (x[idx] * (i + 2)).relu()))

    errors = run_threads(n, work)
    assert not errors, errors
    assert ok == [True] * n


def test_threads_loading_at_once_all_succeed_even_with_a_gc_callback(eager_pair):
    # a gc callback (memory profilers, notebook tooling register one) runs Python code in the
    # middle of ast.parse; CPython 3.11's AST construction then raised SystemError in
    # concurrent loads (python/cpython#106905) until load serialized its parsing
    import gc

    def callback(phase, info):
        pass

    gc.callbacks.append(callback)
    try:
        errors = run_threads(N_THREADS, lambda i: [
            load_quietly(eager_pair.python_code, eager_pair.cache) for _ in range(15)])
    finally:
        gc.callbacks.remove(callback)
    assert not errors, errors
