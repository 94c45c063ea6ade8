"""Note [Triton's set-up while the capture runs]: a CUDA precompile starts Triton's
per-process set-up (its CUDA driver, the hash of its sources) on a thread of its own with the
capture; the artifact computes what eager does, and the switch leaves the set-up to the
lowering. Each case runs in a fresh process: the set-up happens once per process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")

_CHILD = r"""
import json, torch
from precompile_nb import precompile
from precompile_nb.core._compat import compile_pool

def fn(x, w):
    return torch.relu(x @ w).sum(dim=1)

x, w = torch.randn(32, 64, device="cuda"), torch.randn(64, 16, device="cuda")
code, cache = precompile(fn, x, w)
threads = [t.name for t in compile_pool._SETUP]
for t in compile_pool._SETUP:
    t.join(60)
x2 = torch.randn(32, 64, device="cuda")
same = torch.allclose(precompile.load(code, cache)(x2, w), fn(x2, w), atol=1e-4, rtol=1e-4)
print(json.dumps({"threads": threads, "same": bool(same)}))
"""


def _run(env_extra: dict[str, str], child: str = _CHILD) -> Any:
    """The child's last line of output, read as JSON."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, **env_extra)
    r = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.cuda
def test_a_cuda_precompile_sets_triton_up_on_its_own_thread_and_computes_what_eager_does():
    got = _run({})
    assert got == {"threads": ["precompile_nb-triton-setup"], "same": True}


@pytest.mark.cuda
def test_the_switch_leaves_tritons_set_up_to_the_lowering():
    got = _run({"PRECOMPILE_NB_TRITON_SETUP": "0"})
    assert got == {"threads": [], "same": True}


def test_the_lowerings_key_waits_for_the_threads_hash_instead_of_hashing_triton_again(
        monkeypatch):
    """Round 37's finding: the key reached the hash while the thread was still at it and
    hashed Triton again beside it. Now the hash is computed once, on the thread."""
    import contextlib
    import threading
    import time

    import torch
    from torch._inductor import codecache

    from precompile_nb.core._compat import compile_pool, lowering_key

    calls, done = [], {}

    def get_system():  # Inductor's own caches after the first call; slow as the real one
        calls.append((threading.current_thread().name, "value" in done))
        if "value" not in done:
            time.sleep(0.5)
            done["value"] = {"hash": "h"}
        return done["value"]

    monkeypatch.setattr(codecache.CacheBase, "get_system", staticmethod(get_system))
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(compile_pool, "_HASHED", threading.Event())
    go = threading.Event()
    go.set()  # the imports done
    monkeypatch.setattr(compile_pool, "_GO", go)
    monkeypatch.setattr(compile_pool, "_IMPORTED", [True])
    thread = threading.Thread(target=compile_pool._triton_setup, args=(0,), name="setup")
    monkeypatch.setattr(compile_pool, "_SETUP", [thread])
    thread.start()
    while not calls and thread.is_alive():  # the thread is inside the hash
        time.sleep(0.01)
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    lowering_key.graph_and_setting_key(gm, [torch.randn(2)])
    thread.join(10)
    assert calls[0] == ("setup", False) and len(calls) > 1, calls  # the key asked too
    assert all(found for _, found in calls[1:]), calls  # and found the thread's hash
    assert compile_pool._HASHED.is_set()


def test_while_the_thread_hashes_the_key_takes_the_code_generations_imports(monkeypatch):
    """Round 38: the key idled while the thread hashed, and the lowering then spent as long
    importing Inductor's code generation; now those imports fill the wait. Once the hash is
    done there is nothing to wait for, and the key takes nothing early."""
    import threading

    from torch._inductor.codegen import common

    from precompile_nb.core._compat import compile_pool

    seen = []
    monkeypatch.setattr(common, "init_backend_registration",
                        lambda: seen.append(compile_pool._HASHED.is_set()))
    hashed = threading.Event()
    monkeypatch.setattr(compile_pool, "_HASHED", hashed)
    thread = threading.Thread(target=hashed.wait, name="setup")  # alive until it has hashed
    monkeypatch.setattr(compile_pool, "_SETUP", [thread])
    thread.start()
    threading.Timer(0.2, hashed.set).start()  # the thread's hash, done a little later
    compile_pool.wait_for_triton_hash()
    assert seen == [False] and hashed.is_set()  # imported while hashing, then waited
    thread.join(10)
    compile_pool.wait_for_triton_hash()
    assert seen == [False]  # hash done: nothing taken early
    monkeypatch.setattr(compile_pool, "_HASHED", threading.Event())
    compile_pool.wait_for_triton_hash()  # a thread that is gone without its hash (in a forked
    assert seen == [False]  # child): nothing to wait for, the key hashes itself
    monkeypatch.setattr(compile_pool, "_SETUP", [])
    compile_pool.wait_for_triton_hash()  # no thread (the switch off, or no Triton)
    assert seen == [False]


def test_the_thread_hashes_triton_while_the_caller_imports_inductor(monkeypatch):
    """Round 39: the thread started after Inductor's imports, though Triton's hash (the
    largest part) needs none of them; now it hashes while the caller imports them, and
    takes the rest (Inductor's key, which needs them) once they are done."""
    import threading

    from torch._inductor import codecache

    from precompile_nb.core._compat import compile_pool

    log, began, done = [], threading.Event(), threading.Event()

    def key():  # Triton's hash, slow as the real one
        log.append("hash begins")
        began.set()
        done.wait(5)
        log.append("hash ends")

    def imports():  # the caller's imports of Inductor's caches
        began.wait(5)
        log.append("imports")
        done.set()
        return True

    monkeypatch.setattr(compile_pool, "_triton_key", lambda: key)
    monkeypatch.setattr(compile_pool, "_import_for_setup", imports)
    monkeypatch.setattr(codecache.CacheBase, "get_system",
                        staticmethod(lambda: log.append("inductor's key") or {}))
    for name, value in (("_STARTED", set()), ("_SETUP", []), ("_HASHED", threading.Event()),
                        ("_GO", threading.Event()), ("_IMPORTED", [])):
        monkeypatch.setattr(compile_pool, name, value)
    monkeypatch.delenv("PRECOMPILE_NB_TRITON_SETUP", raising=False)
    assert compile_pool.start_triton_setup(None)
    assert compile_pool._setup_done(10)
    assert log == ["hash begins", "imports", "hash ends", "inductor's key"], log


_CPU_CHILD = r"""
import importlib.util, json, threading, torch
from torch._inductor.codecache import CacheBase
from precompile_nb import precompile
from precompile_nb.core._compat import compile_pool

real, askers = CacheBase.get_system, []
def get_system():  # who computes the hash (cached after the first call, as Inductor's)
    askers.append(threading.current_thread().name)
    return real()
CacheBase.get_system = staticmethod(get_system)

def fn(x, w):
    return torch.relu(x @ w).sum(dim=1)

x, w = torch.randn(8, 16), torch.randn(16, 4)
code, cache = precompile(fn, x, w)
same = torch.allclose(precompile.load(code, cache)(x, w), fn(x, w), atol=1e-5, rtol=1e-5)
print(json.dumps({"threads": [t.name for t in compile_pool._SETUP], "first": askers[:1],
                  "triton": importlib.util.find_spec("triton") is not None, "same": bool(same)}))
"""


def _run_cpu(env_extra: dict[str, str]) -> dict:
    return _run({"CUDA_VISIBLE_DEVICES": "", **env_extra}, child=_CPU_CHILD)


def test_a_cpu_precompile_hashes_triton_on_a_thread_where_triton_is_installed():
    """With a torch build that installs Triton (the CUDA builds, which run on CPU), the
    lowering's key hashes Triton on a CPU build too: a thread takes the hash with the
    capture, and the key finds it. A build without Triton starts nothing."""
    got = _run_cpu({"PRECOMPILE_NB_LOWERING_REUSE": "1"})  # the store on, as by default
    assert got["same"]
    if got["triton"]:  # torch 2.15's leg of the tests: the CUDA build, Triton installed
        assert got["threads"] == ["precompile_nb-triton-setup"]
        assert got["first"] == ["precompile_nb-triton-setup"]
    else:  # the CPU build: no Triton, nothing to hash
        assert got["threads"] == [] and got["first"] == ["MainThread"]


def test_a_cpu_precompile_starts_no_hash_thread_without_the_lowering_store():
    got = _run_cpu({"PRECOMPILE_NB_LOWERING_REUSE": "0"})
    assert got["same"] and got["threads"] == []


_FORK_CHILD = r"""
import os, signal, torch
from precompile_nb import precompile, PrecompileError

def refused(x):  # a branch on data: refused at the capture, early
    return x.nonzero().sum() if x.sum() > 0 else x

try:
    precompile(refused, torch.randn(4))
except PrecompileError:
    pass
pid = os.fork()  # as a data loader's workers are made
if pid == 0:
    signal.alarm(240)  # a child that hangs ends, and says so in its status
    code, cache = precompile(lambda x: torch.relu(x) + 1, torch.randn(4))
    x = torch.randn(4)
    os._exit(0 if torch.equal(precompile.load(code, cache)(x), torch.relu(x) + 1) else 3)
_, status = os.waitpid(pid, 0)
print(status)  # the last line, as JSON: the child's wait status
"""


def test_a_process_forked_after_a_refused_precompile_can_precompile():
    """A precompile refused at the capture returns only once Triton's set-up thread is done:
    a fork right after it copied the thread's held lock, and the child's precompile hung
    (torch 2.15 on CPU, where the thread hashes Triton)."""
    status = _run({"PRECOMPILE_NB_LOWERING_REUSE": "1", "CUDA_VISIBLE_DEVICES": ""},
                  child=_FORK_CHILD)
    assert status == 0  # the child precompiled, loaded, and matched eager
