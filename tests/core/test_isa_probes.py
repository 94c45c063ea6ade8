"""Note [ISA probes at once]: a process's first precompile of a CPU graph probes the CPU's
vector ISAs on threads beside the compile; the answers, and the artifact, are those of the
one-by-one probes."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from tests.conftest import run_fresh
from tests.core.models import mlp
from tests.core.test_inductor import fresh_load

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")

ROOT = Path(__file__).resolve().parents[2]

_FIRST_PRECOMPILE = """
    import json, threading, warnings
    warnings.simplefilter("ignore")
    import torch
    from torch._inductor import cpu_vec_isa
    from precompile_nb import precompile
    from tests.core.models import mlp
    started = []
    _start = threading.Thread.start
    def _spy(self):
        started.append(self.name)
        return _start(self)
    threading.Thread.start = _spy
    torch.manual_seed(0)
    code, cache = precompile({fn}, {args})
    threading.Thread.start = _start
    open({out!r} + ".py", "w").write(code)
    open({out!r} + ".cache", "wb").write(cache)
    print(json.dumps({{"probed": cpu_vec_isa.valid_vec_isa_list.cache_info().currsize,
                      "cpp": code.count("cpp_pybinding("),
                      "isas": [str(i) for i in cpu_vec_isa.valid_vec_isa_list()],
                      "probe_threads": [n for n in started if "ISA probe" in n]}}))
"""
_MLP = ("lambda m, x: m(x).relu()", "mlp(), torch.randn(5, 8)")


def _first_precompile(tmp: Path, name: str, env: dict, graph: tuple[str, str] = _MLP) -> dict:
    """A fresh process's first precompile of `graph` (fn, args as source): what it probed
    (before the report asks), its C++ kernels, the ISAs and the probe threads started."""
    out = str(tmp / name)
    r = run_fresh(_FIRST_PRECOMPILE.format(out=out, fn=graph[0], args=graph[1]),
                  cwd=str(ROOT), env={
                      "TORCHINDUCTOR_CACHE_DIR": str(tmp / f"{name}_inductor"),
                      "PRECOMPILE_NB_KERNEL_REUSE": "0", **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_first_precompile_probes_the_isas_at_once_with_the_one_by_one_answers(tmp_path):
    at_once = _first_precompile(tmp_path, "at_once", {})
    one_by_one = _first_precompile(tmp_path, "one_by_one", {"PRECOMPILE_NB_ISA_AT_ONCE": "0"})
    assert at_once["isas"] == one_by_one["isas"], (at_once, one_by_one)
    assert one_by_one["probe_threads"] == []
    if os.uname().machine in ("x86_64", "AMD64"):  # one thread per ISA the CPU names
        assert len(at_once["probe_threads"]) >= len(at_once["isas"]) > 0, at_once
    # the artifact ships the probes: a fresh process loads it without any C++ build
    torch.manual_seed(0)
    m, x = mlp(), torch.randn(5, 8)
    code = (tmp_path / "at_once.py").read_text()
    cache = (tmp_path / "at_once.cache").read_bytes()
    warm = fresh_load(tmp_path, code, cache, m, (x,), m(x).relu().detach(), "cache")
    assert warm["match"] and warm["load"]["used"] and warm["cpp_builds"] == 0, warm


def test_a_graph_without_cpp_kernels_probes_nothing(tmp_path):
    # a lone Linear is one library call (addmm): Inductor never asks for the CPU's ISAs, and
    # precompile starts no probe for it either (it used to, and waited for them)
    r = _first_precompile(tmp_path, "linear", {}, (
        "lambda m, x: m(x)", "torch.nn.Linear(8, 4), torch.randn(3, 8)"))
    assert {k: r[k] for k in ("cpp", "probed", "probe_threads")} == {
        "cpp": 0, "probed": 0, "probe_threads": []}
