"""Note [Triton kernels compiled once]: a CUDA precompile keeps each Triton kernel it compiled,
and a later one that meets the same kernel source puts the kept binaries in its private Triton
cache instead of compiling. Checked on CPU with a stand-in for Inductor's compile that writes
Triton's cache layout, with a real Inductor kernel compiled by Triton where Triton is
installed (the CUDA torch's venv: Triton compiles for a GPU target without one), and on a GPU
end to end."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading

import pytest

from precompile_nb.core import lower as lower_stage
from precompile_nb.core._compat import triton_store
from tests.core.models import CUDA_MLP_SCRIPT

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")

ac = pytest.importorskip("torch._inductor.async_compile")


class _Result:
    def __init__(self, key: str) -> None:
        self.kernel = type("Binary", (), {"hash": key})()


class _Kernel:
    def __init__(self, keys: list[str]) -> None:
        self.compile_results = [_Result(k) for k in keys]


def _compile_like_triton(source: str, configs: int, seen: list) -> _Kernel:
    """What Triton does for each configuration: a hit where its dir's group file names files
    that are there, else the files written under TRITON_CACHE_DIR/<key>."""
    from torch._inductor.runtime.runtime_utils import triton_hash_to_path_key

    here = os.environ["TRITON_CACHE_DIR"]
    keys = [hashlib.sha256(f"{source}/{c}".encode()).hexdigest() for c in range(configs)]
    for key in keys:
        d = os.path.join(here, triton_hash_to_path_key(key))
        group = os.path.join(d, "__grp__k.json")
        if os.path.isfile(group) and all(
                os.path.isfile(p) for p in json.load(open(group))["child_paths"].values()):
            seen.append(("hit", key))
            continue
        os.makedirs(d, exist_ok=True)
        for ext in ("cubin", "ptx"):
            with open(os.path.join(d, f"k.{ext}"), "wb") as f:
                f.write(key.encode())
        with open(group, "w") as f:
            json.dump({"child_paths": {f"k.{e}": os.path.join(d, f"k.{e}")
                                       for e in ("cubin", "ptx")}}, f)
        seen.append(("compiled", key))
    return _Kernel(keys)


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    """Inductor's AsyncCompile.triton replaced by _compile_like_triton (two configurations;
    a kernel named `future` comes back as Inductor's future, as from its workers)."""
    seen: list = []

    def inline(self, kernel_name, source_code, device_str="cuda"):
        if kernel_name == "future":
            return ac.LambdaFuture(lambda: _compile_like_triton(source_code, 2, seen))
        return _compile_like_triton(source_code, 2, seen)

    monkeypatch.setattr(ac.AsyncCompile, "triton", inline)
    monkeypatch.delenv("PRECOMPILE_NB_KERNEL_REUSE", raising=False)
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_THREADS", "0")  # (with threads: the last test)
    return seen, str(tmp_path / "store")


def _lower(tmp_path, name: str, store: str, kernels: dict[str, str]) -> tuple[dict, str]:
    """One lowering in a private Triton cache dir `name`: each (kernel name, source) handed
    to AsyncCompile.triton. Returns the counts and the dir."""
    here = str(tmp_path / name / "triton")
    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = here
    try:
        with triton_store.keeping_triton_kernels(store) as counts, \
                triton_store.triton_kernels_handed_over():
            for kernel_name, source in kernels.items():
                out = ac.AsyncCompile().triton(kernel_name, source, "cuda")
                if isinstance(out, ac.CodeCacheFuture):
                    out.result()
    finally:
        if old is None:
            os.environ.pop("TRITON_CACHE_DIR")
        else:
            os.environ["TRITON_CACHE_DIR"] = old
    return counts, here


def test_a_second_lowering_takes_the_kept_kernels_and_compiles_none(stand_in, tmp_path):
    seen, store = stand_in
    kernels = {"a": "source of a", "future": "source of b"}
    first, _ = _lower(tmp_path, "one", store, kernels)
    assert first == {"triton_compiled": 2}
    assert [what for what, _ in seen] == ["compiled"] * 4
    seen.clear()
    again, here = _lower(tmp_path, "two", store, kernels)
    assert again == {"triton_reused": 2}
    assert [what for what, _ in seen] == ["hit"] * 4
    assert len(os.listdir(here)) == 4  # the artifact's binaries, as from a compile
    for key in os.listdir(here):  # each group file names the files in this dir, the
        group = json.load(open(os.path.join(here, key, "__grp__k.json")))  # binary alone
        assert group["child_paths"] == {"k.cubin": os.path.join(here, key, "k.cubin")}
        assert sorted(os.listdir(os.path.join(here, key))) == ["__grp__k.json", "k.cubin"]


def test_a_changed_kernel_is_compiled_and_the_unchanged_ones_taken(stand_in, tmp_path):
    seen, store = stand_in
    _lower(tmp_path, "one", store, {"a": "source of a", "b": "source of b"})
    seen.clear()
    counts, _ = _lower(tmp_path, "two", store, {"a": "source of a", "b": "source of b, changed"})
    assert counts == {"triton_reused": 1, "triton_compiled": 1}
    assert [what for what, _ in seen] == ["hit", "hit", "compiled", "compiled"]
    seen.clear()
    counts, _ = _lower(tmp_path, "three", store, {"b": "source of b, changed"})
    assert counts == {"triton_reused": 1}  # the changed one was kept too


def test_a_kept_dir_no_compile_asks_for_is_not_packed(stand_in, tmp_path):
    seen, store = stand_in
    _lower(tmp_path, "one", store, {"a": "source of a"})
    sha = hashlib.sha256(b"source of a").hexdigest()
    index = os.path.join(store, "sources", sha[:2], f"{sha}.json")
    keys = json.load(open(index))["keys"]
    stale = os.path.join(store, "stale-key")  # e.g. kept by another Inductor's options
    os.makedirs(stale)
    open(os.path.join(stale, "k.cubin"), "wb").close()
    json.dump({"keys": [*keys, "stale-key"]}, open(index, "w"))
    counts, here = _lower(tmp_path, "two", store, {"a": "source of a"})
    assert counts == {"triton_reused": 1}
    assert sorted(os.listdir(here)) == sorted(keys)


def test_a_kernel_whose_compile_cannot_be_read_is_not_kept(stand_in, tmp_path, monkeypatch):
    seen, store = stand_in
    monkeypatch.setattr(ac.AsyncCompile, "triton", lambda self, n, s, d="cuda": "a kernel")
    counts, here = _lower(tmp_path, "one", store, {"a": "source of a"})
    assert counts == {} and not os.path.exists(store)


def test_nothing_is_looked_up_outside_the_lowering_off_cuda_or_with_the_switch_off(
        stand_in, tmp_path, monkeypatch):
    seen, store = stand_in
    _lower(tmp_path, "one", store, {"a": "source of a"})
    seen.clear()

    def in_dir(name: str, call) -> None:  # a fresh Triton cache: a lookup would find "a"
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / name))
        with triton_store.keeping_triton_kernels(store) as counts, \
                triton_store.triton_kernels_handed_over():
            call()
        assert counts == {}

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "plain"))
    ac.AsyncCompile().triton("a", "source of a", "cuda")  # no lowering
    in_dir("xpu", lambda: ac.AsyncCompile().triton("a", "source of a", "xpu"))

    def beside() -> None:  # another thread beside the lowering
        other = threading.Thread(target=ac.AsyncCompile().triton, args=("a", "source of a"))
        other.start()
        other.join()

    in_dir("thread", beside)
    assert [what for what, _ in seen] == ["compiled"] * 6
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_REUSE", "0")
    assert triton_store.triton_store_dir() is None


_REPORT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "viewers", "data",
                       "report_cuda_inference.json")


def test_a_real_inductor_kernel_compiled_by_triton_is_found_again(tmp_path, monkeypatch):
    """Inductor's worker-side compile of a kernel from an H200 precompile, which Triton does
    for the GPU named in the kernel's source without one."""
    pytest.importorskip("triton")
    from torch._inductor.runtime import triton_helpers
    from torch._inductor.utils import clear_caches

    monkeypatch.setattr(triton_helpers, "set_driver_to_gpu", lambda: None)  # no GPU here
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_THREADS", "0")  # one compile at a time, here
    found = re.search(r"async_compile\.triton\('(\w+)', '''(.*?)'''", json.load(
        open(_REPORT))["python_code"], re.S)
    name = found.group(1)
    source = found.group(2).replace("triton_helpers.set_driver_to_gpu()\n", "")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    binaries: list = []  # each compile's cubins (path -> inode), before and after

    def cubins() -> dict[str, int]:
        here = os.environ["TRITON_CACHE_DIR"]
        return {os.path.join(r, f): os.stat(os.path.join(r, f)).st_ino
                for r, _, names in os.walk(here) for f in names if f.endswith(".cubin")}

    def worker_compile(self, kernel_name, source_code, device_str="cuda"):
        clear_caches()  # as each private compile dir starts: the kernel's module loaded anew
        before = cubins()
        kernel = ac._load_triton_kernel_from_source(kernel_name, source_code)
        kernel.precompile(warm_cache_only=True)
        binaries.append((before, cubins()))
        return kernel

    monkeypatch.setattr(ac.AsyncCompile, "triton", worker_compile)
    store = str(tmp_path / "store")
    first, here = _lower(tmp_path, "one", store, {name: source})
    assert first == {"triton_compiled": 1} and binaries[0][0] == {} and binaries[0][1]
    again, there = _lower(tmp_path, "two", store, {name: source})
    assert again == {"triton_reused": 1}
    before, after = binaries[1]
    assert len(before) == len(binaries[0][1]) and after == before  # found, none written
    assert sorted(os.listdir(there)) == sorted(os.listdir(here))



def test_a_kernel_is_looked_up_before_a_thread_compiles_it(stand_in, tmp_path, monkeypatch):
    """With the kernel threads of a lowering whose compile workers are not ready (Note
    [kernels on threads while the workers start]): the thread finds the kept binaries."""
    seen, store = stand_in
    _lower(tmp_path, "one", store, {"a": "source of a"})
    seen.clear()
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_THREADS", "1")
    monkeypatch.setattr(ac.AsyncCompile, "use_process_pool", classmethod(lambda cls: False))
    monkeypatch.setattr(ac, "get_compile_threads", lambda: 4)
    on_thread: list = []

    class _OnThread:  # what a thread compiles: the kernel, as Triton would
        def __init__(self, name, source):
            self.source = source

        def precompile(self, warm_cache_only=False):
            on_thread.append(threading.current_thread().name)
            _compile_like_triton(self.source, 2, seen)

    monkeypatch.setattr(ac, "_load_triton_kernel_from_source", _OnThread)
    counts, _ = _lower(tmp_path, "two", store, {"a": "source of a"})
    assert on_thread and on_thread[0].startswith("precompile_nb-kernel")
    assert [what for what, _ in seen] == ["hit"] * 4  # on the thread, then Inductor's path
    assert counts == {"triton_reused": 1}

_CHILD = CUDA_MLP_SCRIPT + r"""
from precompile_nb.core import build
out = []
for _ in range(2):  # the second as a cell run again
    art = build(fn, m, x)
    got = precompile.load(art.python_code, art.cache)(m, x2)
    out.append({"builds": dict(art.lowered.builds), "same": bool(torch.allclose(
        got, fn(m, x2), atol=1e-4, rtol=1e-4)), "binaries": sorted(
        rel for root, rel, _ in art.lowered.files if root == "triton")})
print(json.dumps(out))
"""


@pytest.mark.cuda
def test_a_cuda_precompile_again_compiles_no_triton_kernel_here_or_in_a_new_process(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    env.pop("PRECOMPILE_NB_KERNEL_REUSE", None)
    runs = []
    for _ in range(2):  # the second process as after a restart
        r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        runs += json.loads(r.stdout.strip().splitlines()[-1])
    first, *again = runs
    kernels = first["builds"].get("triton_compiled", 0)
    assert kernels > 0 and "triton_reused" not in first["builds"], first
    for run in again:
        assert run["builds"].get("triton_reused") == kernels, run
        assert "triton_compiled" not in run["builds"], run
    assert all(run["same"] for run in runs)
    assert all(run["binaries"] == first["binaries"] for run in again)  # the same artifact


def test_a_later_precompile_in_the_process_still_ships_tritons_driver_helper(monkeypatch):
    """Triton builds its CUDA driver helper once per process (h200_round23): the artifacts of
    later precompiles carry the one the first built."""
    monkeypatch.setitem(lower_stage._BUILT_ONCE, "triton", {})
    helper = ("triton", "H/cuda_utils.cpython-312-x86_64-linux-gnu.so", b"helper")
    kernel = ("triton", "K/triton_poi_fused_0.cubin", b"cubin")
    first = lower_stage._with_triton_helpers([helper, kernel])
    assert first == [helper, kernel]
    later = lower_stage._with_triton_helpers([kernel])
    assert later == [helper, kernel]  # the helper this process built, once
