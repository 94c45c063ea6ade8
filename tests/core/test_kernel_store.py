"""Note [C++ kernels built once]: a precompile on CPU reuses the C++ kernels earlier precompiles
built, instead of running the compiler again, and its artifact is the same as without."""
from __future__ import annotations

import os

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import _compat, build
from precompile_nb.core._compat import kernel_store

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _scaled(m, x):
    return torch.tanh(m(x)) * 2


def _shifted(m, x):  # the same network, another last step
    return torch.sigmoid(m(x)) + 1


@pytest.fixture
def compiler_runs(monkeypatch, tmp_path):
    """A store of its own for this test, and the list of every C++ compiler run."""
    from torch._inductor import cpp_builder

    store = str(tmp_path / "store")
    monkeypatch.setattr(_compat, "kernel_store_dir", lambda: store)
    runs: list[str] = []
    original = cpp_builder.CppBuilder.build

    def counted(self, *a, **k):
        runs.append(self.get_target_file_path())
        return original(self, *a, **k)

    monkeypatch.setattr(cpp_builder.CppBuilder, "build", counted)
    return runs


def _kernel_files(art) -> set[str]:
    return {rel for root, rel, _ in art.lowered.files if rel.endswith(".so")}


def test_precompiling_again_runs_no_compiler_and_gives_the_same_artifact(compiler_runs):
    m, x = _mlp(), torch.randn(5, 8)
    first = build(_scaled, m, x)
    assert first.lowered.builds["built"] > 0 and first.lowered.builds["reused"] == 0
    assert any(run.endswith(".so") for run in compiler_runs)
    compiler_runs.clear()
    again = build(_scaled, m, x)  # a new private compile dir, as in a new process
    assert again.lowered.builds["built"] == 0 and again.lowered.builds["reused"] > 0
    assert compiler_runs == []  # no C++ compiler ran at all
    assert _kernel_files(again) == _kernel_files(first)  # the artifact still ships them
    f = precompile.load(again.python_code, again.cache)
    torch.testing.assert_close(f(m, x), _scaled(m, x))


def test_a_changed_fn_builds_only_its_changed_kernels(compiler_runs):
    m, x = _mlp(), torch.randn(5, 8)
    build(_scaled, m, x)
    changed = build(_shifted, m, x)
    assert changed.lowered.builds["built"] > 0  # its new kernel: compiled
    assert changed.lowered.builds["reused"] > 0  # the unchanged ones: taken from the store
    f = precompile.load(changed.python_code, changed.cache)
    torch.testing.assert_close(f(m, x), _shifted(m, x))


def test_reuse_is_off_where_the_environment_says_so(monkeypatch):
    for off in ("0", "off", "False"):
        monkeypatch.setenv("PRECOMPILE_NB_KERNEL_REUSE", off)
        assert _compat.kernel_store_dir() is None
    monkeypatch.delenv("PRECOMPILE_NB_KERNEL_REUSE")
    store = _compat.kernel_store_dir()
    assert store is not None and "precompile_nb_kernels" in store


def test_the_report_says_what_was_reused(compiler_runs):
    from precompile_nb.tools.report import report_data

    m, x = _mlp(), torch.randn(5, 8)
    build(_scaled, m, x)
    builds = report_data(build(_scaled, m, x))["kernel_builds"]
    assert builds["reused"] > 0 and builds["built"] == 0


def test_a_probe_librarys_loaded_marker_travels_with_it(tmp_path):
    # torch >= 2.14 skips the child process that loads an ISA probe library when a
    # `.load_ok` marker sits beside it: kept at the end of a compile, put back with the library
    store, first, second = (str(tmp_path / d) for d in ("store", "first", "second"))
    lib = os.path.join(first, "ab", "cabc.so")
    os.makedirs(os.path.dirname(lib))
    for path in (lib, lib + ".load_ok"):
        with open(path, "w") as f:
            f.write("x")
    with _compat.reusing_built_kernels(store, first):
        pass
    kernel_store._keep(store, first, os.path.join("ab", "cabc.so"))
    assert sorted(os.listdir(os.path.join(store, "ab"))) == ["cabc.so", "cabc.so.load_ok"]
    assert kernel_store._fetch(store, second, os.path.join("ab", "cabc.so"))
    assert sorted(os.listdir(os.path.join(second, "ab"))) == ["cabc.so", "cabc.so.load_ok"]


_PRECOMPILE_IN_A_NEW_PROCESS = """
import json, torch
from precompile_nb import precompile
from precompile_nb.core import build
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(5, 8)
art = build(lambda m, x: torch.tanh(m(x)) * 2, m, x)
f = precompile.load(art.python_code, art.cache)
ok = torch.allclose(f(m, x), torch.tanh(m(x)) * 2, atol=1e-6)
print(json.dumps({"builds": dict(art.lowered.builds), "match": ok}))
"""


def test_a_new_process_precompiles_with_the_kernels_an_earlier_one_built(tmp_path):
    """The user's case: the same precompile after a restart, with Inductor's cache dir kept;
    also the ISA probes (run once per process) come from the store."""
    import json

    from tests.conftest import run_fresh

    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TMPDIR": str(tmp_path),
           "PRECOMPILE_NB_KERNEL_REUSE": "1"}
    runs = []
    for _ in range(2):
        r = run_fresh(_PRECOMPILE_IN_A_NEW_PROCESS, env=env, cwd=os.getcwd())
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["match"] and second["match"]
    assert first["builds"]["built"] > 0
    assert second["builds"] == {"reused": first["builds"]["built"], "built": 0}
