"""torch internals of Inductor's pool of Triton compile workers: started with the capture, and
fed while it starts (the checked versions are named beside each)."""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

_OFF = ("0", "false", "off", "no")


def switched_off(variable: str) -> bool:
    """Whether the environment turns an optional behaviour off (0, false, off or no)."""
    return os.environ.get(variable, "1").strip().lower() in _OFF


# Note [compile workers start with the capture]
#   Inductor compiles Triton kernels in a pool of worker processes, but only once the pool
#   says it is ready: until then each kernel compiles in this process, one after another.
#   Started at the first kernel, the workers (one per core, each importing torch and Triton)
#   are ready seconds later, so the first kernels of a cold compile run serially.
#   torch.compile starts the pool when Dynamo hands it a graph (maybe_warm_pool, 2.11-2.15),
#   overlapping the workers' start with AOTAutograd's trace; precompile starts it before the
#   capture, for graphs whose example lives on a GPU (on CPU Inductor compiles C++ without this
#   pool). TORCH_WARM_POOL=0 turns it off, as for torch.compile. A pool started before
#   private_compile_cache is sound: each job carries the compile's TORCHINDUCTOR_CACHE_DIR and
#   TRITON_CACHE_DIR to its worker (async_compile.triton's extra_env, 2.11-2.15).
#   Measured on the H200 (benchmarks/results/h200_round11): the workers are ready 9-12 s after
#   the start, the time their sidecar's fresh interpreter takes to import torch and Inductor,
#   so a graph that reaches its first kernel sooner (a llama step, at ~8 s) compiled ~45
#   kernels here, 6-7 s. Tried and not kept: workers forked from this process (ready at once,
#   but every later phase of this process ran slower). What is kept for those kernels is
#   Note [kernels queue for starting workers].
def start_compile_workers() -> None:
    """Start Inductor's Triton compile pool now (Note [compile workers start with the
    capture]); a no-op where torch.compile would not start it either."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool
    except ImportError:  # a torch without it: the pool starts at the first kernel, as before
        return
    try:
        maybe_warm_pool()
    except Exception:  # noqa: BLE001 - only a head start: the lower stage starts the pool
        pass  # itself at its first kernel, and reports a failure there as a PrecompileError


# Note [kernels queue for starting workers]
#   While the compile workers start (Note [compile workers start with the capture]), Inductor
#   compiles each Triton kernel here, one after another (AsyncCompile.use_process_pool is
#   False until the pool's first job came back, 2.11-2.15). Handing the kernels to the
#   workers instead was tried in round 11 and blocked Inductor's code generation (codegen 2.4
#   -> 7.3 s on llama): SubprocPool.submit writes each job into a pipe to the workers'
#   sidecar, and that pipe fills while the sidecar still imports torch. So during precompile's
#   lowering of a GPU graph, (1) a kernel goes to the workers once they were started, ready or
#   not, and (2) SubprocPool.submit runs on a feeder thread of this process, which returns a
#   future at once and writes to the pipe in order, blocking only itself. Code generation
#   goes on; the kernels compile in parallel as soon as the workers are up, and Inductor waits
#   for their futures where it always did. The futures carry what the pool says: a sidecar
#   that dies fails them, and the lower stage reports that as it reports any compile error.
#   Only a pool whose sidecar process still runs is queued for; Inductor's other pools
#   (worker_start_method fork or spawn) are left as they are. PRECOMPILE_NB_POOL_QUEUE=0
#   turns this off (kernels compile here until the workers are ready, Inductor's rule).
class _Feeder:
    """One thread that runs a pool's submits in order, each returning its future at once."""

    def __init__(self, submit: Callable[..., Future]) -> None:
        self._submit = submit
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="precompile_nb-compile-feeder")
        self._thread.start()

    def submit(self, *args: Any, **kwargs: Any) -> Future:
        outer: Future = Future()
        outer.set_running_or_notify_cancel()
        self._jobs.put((outer, args, kwargs))
        return outer

    def close(self) -> None:
        """Stop after the jobs queued so far were handed over."""
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            outer, args, kwargs = job
            try:
                inner = self._submit(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - the pool's own error, to the future
                outer.set_exception(e)
                continue
            inner.add_done_callback(lambda f, outer=outer: _copy_outcome(f, outer))


def _copy_outcome(inner: Future, outer: Future) -> None:
    if inner.cancelled():
        outer.set_exception(RuntimeError("the compile worker pool cancelled this job"))
    elif (error := inner.exception()) is not None:
        outer.set_exception(error)
    else:
        outer.set_result(inner.result())


def _sidecar_runs(pool: Any) -> bool:
    process = getattr(pool, "process", None)
    return process is not None and process.poll() is None


@contextlib.contextmanager
def kernels_queue_for_workers(enabled: bool = True) -> Iterator[None]:
    """Note [kernels queue for starting workers], for the body of the block (torch 2.11-2.15:
    AsyncCompile.use_process_pool and _ready_future, SubprocPool.submit)."""
    if not enabled or switched_off("PRECOMPILE_NB_POOL_QUEUE"):
        yield
        return
    try:
        from torch._inductor.async_compile import AsyncCompile
        from torch._inductor.compile_worker.subproc_pool import SubprocPool
    except ImportError:  # a torch without them: Inductor's rule, unchanged
        yield
        return
    use_pool = AsyncCompile.__dict__.get("use_process_pool")
    if not isinstance(use_pool, classmethod) or "submit" not in SubprocPool.__dict__:
        yield
        return
    pool_submit = SubprocPool.__dict__["submit"]
    feeders: dict[int, _Feeder] = {}

    def use_process_pool(cls: Any) -> bool:
        if use_pool.__func__(cls):
            return True
        starting = cls._ready_future
        if starting is None or starting.done():  # no pool, or one that answered False
            return False
        return isinstance(pool := cls.process_pool(), SubprocPool) and _sidecar_runs(pool)

    def submit(self: Any, *args: Any, **kwargs: Any) -> Future:
        if (feeder := feeders.get(id(self))) is None:
            feeder = feeders[id(self)] = _Feeder(
                lambda *a, **k: pool_submit(self, *a, **k))
        return feeder.submit(*args, **kwargs)

    AsyncCompile.use_process_pool = classmethod(use_process_pool)
    SubprocPool.submit = submit
    try:
        yield
    finally:
        AsyncCompile.use_process_pool = use_pool
        SubprocPool.submit = pool_submit
        for feeder in feeders.values():
            feeder.close()
