"""Note [compile workers forked for a build]: where nothing else chose how Inductor starts its
Triton compile workers, precompile forks them from the compiling process for a graph of many
operations (ready at once, at a lower priority) and ends them with the build; a small graph, a
user's own choice, or the switch keeps Inductor's sidecar. Each case runs in a fresh process
(the pool is one per process); they need Triton installed (the torch 2.15 leg, the GPU
machine), not a GPU: the workers only start."""
from __future__ import annotations

import json

import pytest

from tests.conftest import run_fresh

pytest.importorskip("triton")

# the child's start: imports, and children(), the pids of this process's child processes
_PRELUDE = r"""
import errno, json, os, time
import torch
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.compile_worker.subproc_pool import SubprocPool
from precompile_nb.core._compat import compile_pool

def children():
    out = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                out |= {int(p) for p in f.read().split()}
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return out
"""

_CHILD = _PRELUDE + r"""
early = compile_pool.start_compile_workers()  # before the capture
at_capture = AsyncCompile.process_pool.cache_info().currsize > 0
jobs = early + compile_pool.workers_for_graph(int(os.environ["OPS"]))  # at the lowering
pool = AsyncCompile.process_pool()
AsyncCompile._ready_future.result(timeout=300)
seen = {"at_capture": at_capture, "jobs": jobs, "sidecar": isinstance(pool, SubprocPool),
        "parent_is_us": pool.submit(os.getppid).result(timeout=300) == os.getpid(),
        "nice_above_ours": pool.submit(os.nice, 0).result(timeout=300) - os.nice(0)}
workers = children()
seen["forked_workers"] = compile_pool.forked_worker_count()
seen["stopped"] = compile_pool.stop_forked_workers()
seen["sidecar_ended"] = compile_pool.stop_unready_sidecar()  # a ready one stays
seen["pool_forgotten"] = AsyncCompile.process_pool.cache_info().currsize == 0
deadline = time.monotonic() + 120
while seen["stopped"] and workers & children() and time.monotonic() < deadline:
    time.sleep(0.2)
seen["workers_left"] = len(workers & children()) if seen["stopped"] else -1
print(json.dumps(seen))
"""


def _run(env: dict[str, str]) -> dict:
    r = run_fresh(_CHILD, env={"TORCHINDUCTOR_COMPILE_THREADS": "2", "TORCH_WARM_POOL": "1",
                               **env}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_large_graphs_workers_are_forked_niced_and_end_with_the_build(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_WORKER_START", raising=False)
    seen = _run({"PRECOMPILE_NB_FORK_WORKERS": "1", "OPS": "1000"})
    # nothing started before the capture: the lowering forks, knowing the graph
    assert seen == {"at_capture": False, "jobs": 0, "sidecar": False, "parent_is_us": True,
                    "nice_above_ours": 5, "forked_workers": 2, "stopped": True,
                    "sidecar_ended": False, "pool_forgotten": True, "workers_left": 0}, seen


@pytest.mark.parametrize("env", [{"PRECOMPILE_NB_FORK_WORKERS": "0", "OPS": "1000"},
                                 {"TORCHINDUCTOR_WORKER_START": "subprocess", "OPS": "1000"},
                                 {"PRECOMPILE_NB_FORK_WORKERS": "1", "OPS": "3"}],
                         ids=["switch-off", "user-chose-subprocess", "small-graph"])
def test_a_choice_made_elsewhere_or_a_small_graph_keeps_inductors_sidecar(env, monkeypatch):
    if "TORCHINDUCTOR_WORKER_START" not in env:
        monkeypatch.delenv("TORCHINDUCTOR_WORKER_START", raising=False)
    seen = _run(env)
    # the sidecar's workers are its children, not ours; they get the import jobs, and stay
    assert seen["sidecar"] and not seen["parent_is_us"], seen
    # started before the capture where nothing can fork later, else at the lowering
    assert seen["at_capture"] == (env["OPS"] == "1000"), seen
    assert seen["jobs"] > 0 and seen["nice_above_ours"] == 0, seen
    assert not seen["stopped"] and not seen["pool_forgotten"], seen
    assert not seen["sidecar_ended"], seen  # ready by the build's end: kept for the next one
    assert seen["forked_workers"] == 0, seen


# Note [an unready sidecar ends with the build]: the child precompiles nothing; it does what a
# small CUDA graph's build does with the pool (workers_for_graph at the lowering, then the end
# of the build at once, before the sidecar has imported torch)
_UNREADY = _PRELUDE + r"""
import torch._inductor.async_compile as ac
if os.environ.get("POOL_BEFORE"):  # a pool that was there before (a torch.compile's)
    AsyncCompile.process_pool().submit(os.getpid).result(timeout=300)
jobs = compile_pool.workers_for_graph(3)
pool = AsyncCompile.process_pool()
seen = {"jobs": jobs > 0, "ended": compile_pool.stop_unready_sidecar()}
seen["forgotten"] = AsyncCompile.process_pool.cache_info().currsize == 0
seen["exit_waits_for_it"] = pool in ac._pool_set
deadline = time.monotonic() + 120
while seen["ended"] and pool.process.poll() is None and time.monotonic() < deadline:
    time.sleep(0.2)
seen["sidecar_gone"] = pool.process.poll() is not None
# the next compile starts a pool of its own, with the import jobs, and uses it once ready
again = compile_pool.workers_for_graph(3)
new = AsyncCompile.process_pool()
AsyncCompile._ready_future.result(timeout=300)
seen["next"] = {"new_pool": new is not pool, "jobs": again > 0,
                "job_ran": new.submit(os.getpid).result(timeout=300) != os.getpid(),
                "ended_once_ready": compile_pool.stop_unready_sidecar()}
print(json.dumps(seen))
"""


@pytest.mark.parametrize("env", [{}, {"PRECOMPILE_NB_END_UNREADY_SIDECAR": "0"},
                                 {"POOL_BEFORE": "1"}],
                         ids=["let-go", "switch-off", "pool-there-before"])
def test_a_sidecar_not_ready_when_the_build_ends_is_let_go(env, monkeypatch):
    """A script that precompiled a small CUDA graph used to wait seconds at its exit for the
    sidecar started for it: let go, nothing waits for it, it ends, and the next compile gets a
    pool that works. Kept where the switch says so or where the pool was not the build's."""
    monkeypatch.delenv("TORCHINDUCTOR_WORKER_START", raising=False)
    r = run_fresh(_UNREADY, env={"TORCHINDUCTOR_COMPILE_THREADS": "2", "TORCH_WARM_POOL": "1",
                                 "PRECOMPILE_NB_FORK_WORKERS": "1", **env}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    let_go = not env
    assert seen["ended"] == let_go and seen["forgotten"] == let_go, seen
    assert seen["exit_waits_for_it"] == (not let_go), seen
    assert seen["sidecar_gone"] == let_go, seen
    assert seen["jobs"], seen  # the sidecar's workers were handed the import jobs
    assert seen["next"]["new_pool"] == let_go and seen["next"]["job_ran"], seen
    assert seen["next"]["jobs"] == let_go, seen  # import jobs again, for the new sidecar
    assert not seen["next"]["ended_once_ready"], seen


_FORK_FAILS = _PRELUDE + r"""
real_fork, forks = os.fork, []
def failing_fork():  # the second fork finds no memory for the copy
    forks.append(1)
    if len(forks) > 1:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")
    return real_fork()
os.fork = failing_fork
jobs = compile_pool.workers_for_graph(1000)
os.fork = real_fork
pool = AsyncCompile.process_pool()
AsyncCompile._ready_future.result(timeout=300)
mine = set()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:  # what is left of the failed pool: none of our children
    mine = children()
    if mine <= {pool.process.pid}:
        break
    time.sleep(0.2)
print(json.dumps({"forks_tried": len(forks), "sidecar": isinstance(pool, SubprocPool),
                  "jobs": jobs, "forked_workers": compile_pool.forked_worker_count(),
                  "children_besides_the_sidecar": len(mine - {pool.process.pid}),
                  "job": pool.submit(os.getpid).result(timeout=300) != os.getpid()}))
"""


def test_a_fork_that_fails_leaves_no_worker_and_takes_the_sidecar(monkeypatch):
    """A fork can fail (no memory for the copy, a limit on processes): the workers forked
    before the failure end, Inductor's sidecar takes over, and this process exits (a pool
    that never started would leave its exit waiting for them)."""
    monkeypatch.delenv("TORCHINDUCTOR_WORKER_START", raising=False)
    r = run_fresh(_FORK_FAILS, env={"TORCHINDUCTOR_COMPILE_THREADS": "2",
                                    "TORCH_WARM_POOL": "1", "PRECOMPILE_NB_FORK_WORKERS": "1"},
                  timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen == {"forks_tried": 2, "sidecar": True, "jobs": 12, "forked_workers": 0,
                    "children_besides_the_sidecar": 0, "job": True}, seen
