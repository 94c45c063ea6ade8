"""Note [kernels on threads while the workers start]: while precompile lowers, a Triton kernel
that Inductor would compile in the compiling process (its workers not ready yet) is compiled
into Triton's cache on a thread, and Inductor's own path then makes the kernel on the
compiling thread. The protocol is checked on CPU with stand-ins for Inductor's kernel; on a
GPU, a fresh process's precompile sends kernels to threads and computes what eager does, and
the switch sends none."""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

from precompile_nb.core._compat import kernel_threads
from tests.core.models import CUDA_MLP_SCRIPT

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")

ac = pytest.importorskip("torch._inductor.async_compile")


class _Kernel:
    def __init__(self, name: str, seen: list) -> None:
        self.name, self.seen = name, seen

    def precompile(self, warm_cache_only: bool = False) -> None:
        self.seen.append(("warm", self.name, threading.current_thread().name, warm_cache_only))
        if self.name == "bad":
            raise RuntimeError("the thread's failure")


@pytest.fixture
def stand_ins(monkeypatch):
    """Inductor's in-process path and kernel loader replaced by recorders; the workers never
    ready, four compile threads."""
    seen: list = []

    def inline(self, kernel_name, source_code, device_str="cuda"):
        seen.append(("inline", kernel_name, threading.current_thread().name))
        if kernel_name == "bad":
            raise RuntimeError(f"Inductor's own error for {kernel_name}")
        return f"kernel {kernel_name}"

    monkeypatch.setattr(ac.AsyncCompile, "triton", inline)
    monkeypatch.setattr(ac.AsyncCompile, "use_process_pool", classmethod(lambda cls: False))
    monkeypatch.setattr(ac, "get_compile_threads", lambda: 4)
    monkeypatch.setattr(ac, "_load_triton_kernel_from_source",
                        lambda name, source: _Kernel(name, seen))
    monkeypatch.setattr(ac.AsyncCompile, "_ready_future", None, raising=False)
    monkeypatch.delenv("PRECOMPILE_NB_KERNEL_THREADS", raising=False)
    monkeypatch.delenv("PRECOMPILE_NB_KERNEL_HANDOFF", raising=False)
    return inline, seen


def test_a_kernel_compiles_on_a_thread_and_inductor_makes_it_on_the_compiling_thread(
        stand_ins):
    inline, seen = stand_ins
    before = kernel_threads.kernel_thread_counts()["on_threads"]
    with kernel_threads.kernels_on_threads():
        future = ac.AsyncCompile().triton("k1", "source of k1", "cuda")
        assert isinstance(future, ac.CodeCacheFuture)
        assert kernel_threads.kernel_thread_counts()["on_threads"] == before + 1
        assert future.result() == "kernel k1"
    warm, made = seen
    assert warm[0] == "warm" and warm[1] == "k1" and warm[3] is True
    assert warm[2].startswith("precompile_nb-kernel")
    assert made == ("inline", "k1", threading.current_thread().name)
    assert ac.AsyncCompile.triton is inline  # put back once the lowering ends


def test_a_kernel_from_a_thread_is_made_in_process_even_once_the_workers_are_ready(
        stand_ins, monkeypatch):
    inline, seen = stand_ins
    ready = [False]
    monkeypatch.setattr(ac.AsyncCompile, "use_process_pool", classmethod(lambda cls: ready[0]))

    def made_where(self, kernel_name, source_code, device_str="cuda"):
        return "workers" if type(self).use_process_pool() else inline(
            self, kernel_name, source_code, device_str)

    monkeypatch.setattr(ac.AsyncCompile, "triton", made_where)
    with kernel_threads.kernels_on_threads():
        future = ac.AsyncCompile().triton("k1", "source of k1", "cuda")
        ready[0] = True  # the workers say they are ready before Inductor waits for k1
        assert future.result() == "kernel k1"
        assert ac.AsyncCompile().triton("k2", "source of k2", "cuda") == "workers"
    assert ac.AsyncCompile.use_process_pool() is True  # torch's own answer once it ends


def test_a_failure_on_the_thread_is_reported_by_inductors_own_path(stand_ins):
    _, seen = stand_ins
    with kernel_threads.kernels_on_threads():
        future = ac.AsyncCompile().triton("bad", "source of bad", "cuda")
        with pytest.raises(RuntimeError, match="Inductor's own error for bad"):
            future.result()
    assert [s[0] for s in seen] == ["warm", "inline"]


def test_kernels_no_thread_began_are_dropped_when_the_lowering_ends(stand_ins, monkeypatch):
    """A lowering that fails waits for no queued kernel; a dropped kernel's future, resolved
    anyway, is compiled by Inductor's own path."""
    inline, seen = stand_ins
    busy = kernel_threads._threads(4)._max_workers
    gate, started = threading.Event(), threading.Semaphore(0)

    def blocking_loader(name, source):
        started.release()
        gate.wait(30)
        return _Kernel(name, seen)

    monkeypatch.setattr(ac, "_load_triton_kernel_from_source", blocking_loader)
    futures = []
    with pytest.raises(RuntimeError, match="the lowering failed"):
        with kernel_threads.kernels_on_threads():
            for k in range(busy + 2):
                futures.append(ac.AsyncCompile().triton(f"k{k}", f"source {k}", "cuda"))
            for _ in range(busy):  # every thread holds a kernel: the last two wait in line
                assert started.acquire(timeout=30)
            raise RuntimeError("the lowering failed")
    gate.set()
    for f in futures[:busy]:
        f.future.result(timeout=30)
    warmed = sorted(s[1] for s in seen if s[0] == "warm")
    assert warmed == sorted(f"k{k}" for k in range(busy))  # the two queued ones never ran
    assert all(f.future.cancelled() for f in futures[busy:])
    assert futures[-1].result() == f"kernel k{busy + 1}"


class _Deferred:
    """A thread pool whose jobs run when the test says (the queue behind busy threads)."""

    def __init__(self) -> None:
        self.jobs: list = []

    def submit(self, fn, *args):
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.append((future, fn, args))
        return future

    def run(self) -> None:
        for future, fn, args in self.jobs:
            if future.set_running_or_notify_cancel():
                future.set_result(fn(*args))


@pytest.fixture
def workers_become_ready(stand_ins, monkeypatch):
    """Kernels wait for a thread until run(); the workers (a recorder) are ready from then."""
    deferred, handed, ready = _Deferred(), [], [False]
    monkeypatch.setattr(kernel_threads, "_threads", lambda count: deferred)
    monkeypatch.setattr(ac.AsyncCompile, "use_process_pool", classmethod(lambda cls: ready[0]))
    done: concurrent.futures.Future = concurrent.futures.Future()
    done.set_result(None)
    monkeypatch.setattr(ac.AsyncCompile, "_ready_future", done, raising=False)

    class Workers:
        fail = refuse = False

        def submit(self, fn, *args):
            if self.refuse:
                raise RuntimeError("the pool is broken")
            handed.append((fn, args))
            out: concurrent.futures.Future = concurrent.futures.Future()
            if self.fail:
                out.set_exception(RuntimeError("a worker's failure"))
            else:
                out.set_result(("pickled kernel", 0))
            return out

    workers = Workers()
    monkeypatch.setattr(ac.AsyncCompile, "process_pool", staticmethod(lambda: workers))
    monkeypatch.setenv("TRITON_CACHE_DIR", "/compile/triton")

    def become_ready() -> None:
        ready[0] = True
        deferred.run()

    return become_ready, handed, workers, stand_ins[1]


def test_a_kernel_still_waiting_for_a_thread_goes_to_the_workers_once_they_are_ready(
        workers_become_ready):
    become_ready, handed, _, seen = workers_become_ready
    before = kernel_threads.kernel_thread_counts()["handed_to_workers"]
    with kernel_threads.kernels_on_threads():
        future = ac.AsyncCompile().triton("k1", "source of k1", "cuda")
        become_ready()
        assert future.result() == "kernel k1"
    ((job, (load, env, extra)),) = handed  # Inductor's own worker job, with the compile's dirs
    assert job is ac._worker_compile_triton and load().name == "k1"
    assert env["TRITON_CACHE_DIR"] == "/compile/triton" and "use_static_triton_launcher" in extra
    assert [s[0] for s in seen] == ["inline"]  # not compiled on the thread; made in process
    assert kernel_threads.kernel_thread_counts()["handed_to_workers"] == before + 1


def test_a_workers_failure_is_reported_by_inductors_own_path(workers_become_ready):
    become_ready, handed, workers, seen = workers_become_ready
    workers.fail = True
    with kernel_threads.kernels_on_threads():
        future = ac.AsyncCompile().triton("bad", "source of bad", "cuda")
        become_ready()
        with pytest.raises(RuntimeError, match="Inductor's own error for bad"):
            future.result()
    assert len(handed) == 1 and [s[0] for s in seen] == ["inline"]


@pytest.mark.parametrize("why", ["the workers refuse it", "the hand-over is switched off"])
def test_the_kernel_is_compiled_on_its_thread_when(why, workers_become_ready, monkeypatch):
    become_ready, handed, workers, seen = workers_become_ready
    if why == "the workers refuse it":
        workers.refuse = True  # their pool's submit raises
    else:
        monkeypatch.setenv("PRECOMPILE_NB_KERNEL_HANDOFF", "0")
    with kernel_threads.kernels_on_threads():
        future = ac.AsyncCompile().triton("k1", "source of k1", "cuda")
        become_ready()
        assert future.result() == "kernel k1"
    assert handed == [] and [s[0] for s in seen] == ["warm", "inline"]


def test_kernels_go_to_inductor_as_before_outside_the_lowering_off_cuda_and_when_switched_off(
        stand_ins, monkeypatch):
    _, seen = stand_ins
    assert ac.AsyncCompile().triton("k1", "s1", "cuda") == "kernel k1"
    with kernel_threads.kernels_on_threads():
        assert ac.AsyncCompile().triton("k2", "s2", "xpu") == "kernel k2"
        other: dict = {}
        t = threading.Thread(target=lambda: other.setdefault(
            "out", ac.AsyncCompile().triton("k3", "s3", "cuda")))
        t.start()
        t.join(30)
        assert other["out"] == "kernel k3"  # a thread not lowering (a torch.compile beside)
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_THREADS", "0")
    with kernel_threads.kernels_on_threads():
        assert ac.AsyncCompile().triton("k4", "s4", "cuda") == "kernel k4"
    monkeypatch.setenv("PRECOMPILE_NB_KERNEL_THREADS", "1")
    monkeypatch.setattr(ac, "get_compile_threads", lambda: 1)  # Inductor in one thread
    with kernel_threads.kernels_on_threads():
        assert ac.AsyncCompile().triton("k5", "s5", "cuda") == "kernel k5"
    assert [s[0] for s in seen] == ["inline"] * 5


def test_a_cpu_precompile_leaves_inductors_async_compile_alone(monkeypatch):
    from precompile_nb.core import build

    entered: list = []
    active = kernel_threads._PATCH.active
    monkeypatch.setattr(kernel_threads._PATCH, "active",
                        lambda: entered.append("patched") or active())
    x = torch.randn(8)
    art = build(lambda x: x.cos() + 1, x)
    assert entered == [] and "on_threads" not in art.lowered.builds


def test_the_report_says_how_many_kernels_a_precompile_sent_to_threads(monkeypatch):
    """The counts (sent, and handed to the workers) reach the artifact's lowering record and
    the report's data (stand-in counts: on a CPU graph no Triton kernel is compiled)."""
    from precompile_nb.core import _compat, build
    from precompile_nb.core import lower as lower_stage
    from precompile_nb.tools.report import report_data

    sent, handed = [0], [0]
    compile_ = lower_stage._compile

    def compile_sending_three(*a, **k):
        out = compile_(*a, **k)
        sent[0] += 3
        handed[0] += 1  # one of them handed to the workers
        return out

    monkeypatch.setattr(lower_stage, "_compile", compile_sending_three)
    monkeypatch.setattr(_compat, "kernel_thread_counts", lambda: {
        "on_threads": sent[0], "handed_to_workers": handed[0]})
    art = build(lambda x: (x * 2).sin(), torch.randn(8))
    assert art.lowered.builds["on_threads"] == 3
    assert art.lowered.builds["handed_to_workers"] == 1
    builds = report_data(art)["kernel_builds"]
    assert builds["on_threads"] == 3 and builds["handed_to_workers"] == 1


_CHILD = CUDA_MLP_SCRIPT + r"""
import os
from precompile_nb.core._compat import kernel_threads
if os.environ.get("TEST_THREADS_WAIT_FOR_WORKERS"):  # every kernel waits in the thread queue
    take = kernel_threads._into_triton_cache  # until the workers are ready
    def after_the_workers(ac, cls, *rest):
        cls._ready_future.result(timeout=300)
        return take(ac, cls, *rest)
    kernel_threads._into_triton_cache = after_the_workers
code, cache = precompile(fn, m, x)
same = torch.allclose(precompile.load(code, cache)(m, x2), fn(m, x2), atol=1e-4, rtol=1e-4)
counts = kernel_threads.kernel_thread_counts()
print(json.dumps({"sent": counts["on_threads"], "same": bool(same),
                  "handed": counts["handed_to_workers"]}))
"""


def _run(tmp_path, env_extra: dict[str, str]) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # the workers start only at the first kernel, so the first kernels meet them not ready
    env = dict(os.environ, PYTHONPATH=root, TORCH_WARM_POOL="0",
               TORCHINDUCTOR_COMPILE_THREADS="4",
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), **env_extra)
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.cuda
def test_a_cuda_precompile_compiles_kernels_on_threads_and_computes_what_eager_does(tmp_path):
    got = _run(tmp_path, {})
    assert got["same"] is True and got["sent"] > 0, got


@pytest.mark.cuda
def test_kernels_waiting_for_a_thread_are_compiled_by_the_workers_once_ready(tmp_path):
    got = _run(tmp_path, {"TEST_THREADS_WAIT_FOR_WORKERS": "1"})
    assert got["same"] is True and got["sent"] > 0 and got["handed"] == got["sent"], got


@pytest.mark.cuda
def test_the_switch_compiles_those_kernels_as_inductor_does(tmp_path):
    assert _run(tmp_path, {"PRECOMPILE_NB_KERNEL_THREADS": "0"}) == {"sent": 0, "same": True,
                                                                    "handed": 0}
