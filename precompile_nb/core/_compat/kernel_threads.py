"""torch internals of the Triton kernels a CUDA lowering meets before Inductor's compile workers
are ready: compiled on threads of the compiling process (Note [kernels on threads while the
workers start]); checked on 2.11 (H200), 2.13, 2.14.1 and 2.15."""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from typing import Any

from .scoped_patch import ScopedPatch, switched_off

# Note [kernels on threads while the workers start]
#   Inductor hands each Triton kernel to its compile workers only once they say they are
#   ready (AsyncCompile.use_process_pool, 2.11-2.15): at the kernel's definition in the code
#   generation if they are ready then, else when the generated module loads, after the whole
#   code generation, where it compiles each such kernel in this process, one after another.
#   Even started with the capture (Note [compile workers start with the capture]), the workers
#   were ready 2-5 s after the first kernel on the H200's training steps, and the rows that
#   compiled 13-19 kernels that way were the slow ones (benchmarks/results/h200_round20).
#   Most of a Triton compile runs outside the interpreter (LLVM, ptxas): two threads compiled
#   16 kernels 1.7-1.9x as fast as one (benchmarks/results/cpu_round20). So, while precompile
#   lowers, a kernel that would compile in this process goes to a thread instead, which does
#   what a worker does: load the kernel's module and compile every configuration into Triton's
#   cache on disk (_worker_compile_triton's load_kernel().precompile(warm_cache_only=True)).
#   Inductor gets a future at once and goes on to the next kernel. When the module waits for
#   its kernels (AsyncCompile.wait, on the compiling thread) the future waits for that thread,
#   then runs Inductor's own in-process path for the kernel, unchanged, which finds every
#   configuration in Triton's cache: the kernel object, its compile id and Inductor's records
#   are made on the compiling thread as before, and its binaries are the same (same source,
#   same cache). That path is taken even where the workers became ready meanwhile
#   (use_process_pool answers False while a future resolves): handing them a kernel already
#   compiled only added a round trip to a worker, one kernel after another (seen on the H200:
#   ALBERT's 51 kernels, 42 of them resolved through the workers, waited 5.2 s against
#   torch.compile's 3.8 s).
#   A failure on a thread is dropped, and Inductor's own path meets it again and reports it
#   as it always does. When the lowering ends, the kernels no thread has begun are dropped (a
#   failed lowering waits for none of them; one that a thread is compiling may still land in
#   the Triton cache current when it ends, a correct entry keyed by its content, as any
#   compile of it would write). Once the workers are ready, kernels go to them as before,
#   and so does a kernel still waiting for a thread: the thread that takes it hands it to
#   them (the job Inductor would send, which compiles it into the same Triton cache) and the
#   future waits for that job instead. Threads share the interpreter, the workers do not: on
#   the H200, ELECTRA's training step sent all 39 kernels to 8 threads in the 0.4 s before
#   the workers were ready, and its wait for them was 4.3 s against torch.compile's 4.0 s
#   (benchmarks/results/h200_round23). A CUDA test that holds every kernel until the workers
#   are ready saw each one handed over and the result eager's (H200, torch 2.11); in the
#   zoo rows of benchmarks/results/h200_round24 none was handed (ELECTRA's workers were
#   ready at its first kernel, OPT's threads had taken all 39 kernels before the workers
#   were): the hand-over covers the case between. PRECOMPILE_NB_KERNEL_HANDOFF=0 keeps them
#   on threads.
#   Nothing changes where Inductor compiles in one thread anyway (compile_threads <= 1: its
#   wait would not resolve futures), off CUDA, under TRITON_INTERPRET=1, or for a kernel
#   Inductor already has; and only on a thread inside precompile's lowering (a torch.compile
#   beside it is left alone). Measured on the H200 (benchmarks/results/h200_round21, one run each),
#   first as a benchmark-side experiment: the GPT step's 40 kernels all went to threads,
#   11.4 s against 11.2 and 14.6 s without (the phase that waits for the kernels 3.3 s
#   against 3.7 and 4.5 s; torch.compile 14.7 s); OPT's training step 11.3 against 13.0 s
#   (39 kernels, that phase 4.8 against 6.1 s). Then as here, before the in-process answer
#   above: OPT 12.3 s against torch.compile's 15.9 s, all 39 kernels on threads.
#   Sending each kernel to a thread at its definition instead (benchmarks/cold_split.py's
#   nb+early, round 26, H200: OPT and GPT-2 training steps) started the first kernel 0.5-1.6 s
#   sooner, but the code generation, sharing the interpreter with the threads, grew by about
#   as much: no net gain in one run each (benchmarks/results/h200_round26), so not taken.
#   PRECOMPILE_NB_KERNEL_THREADS=0 (or off, false, no) compiles those kernels as Inductor does.
_NAMES = ("_load_triton_kernel_from_source", "CompiledTritonKernels", "CodeCacheFuture",
          "LambdaFuture", "get_compile_threads")
# kernels this process sent to threads, and of those the ones a thread handed to the workers
# (the names are Lowered.builds' keys)
_COUNTS = {"on_threads": 0, "handed_to_workers": 0}
_RESOLVING = threading.local()  # .on while this thread resolves a kernel compiled on a thread
_JOBS = threading.local()  # .jobs: the kernels this thread's lowering sent to threads
_POOL: list[concurrent.futures.ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _async_compile() -> Any:
    """Inductor's async_compile module (2.11-2.15: torch._inductor.async_compile), or None
    where it lacks a name this needs."""
    try:
        import torch._inductor.async_compile as ac
    except ImportError:
        return None
    return ac if all(hasattr(ac, n) for n in _NAMES) else None


@contextlib.contextmanager
def kernels_on_threads(gpu: bool = True) -> Iterator[None]:
    """While this thread lowers a graph (`gpu`: one with a tensor off the CPU, the only kind
    with Triton kernels): Note [kernels on threads while the workers start]."""
    if not gpu or switched_off("PRECOMPILE_NB_KERNEL_THREADS") or _async_compile() is None:
        yield
        return
    outer, _JOBS.jobs = getattr(_JOBS, "jobs", None), []
    try:
        with _PATCH.active(), _POOL_ASKED.active():
            yield
    finally:  # a lowering that failed leaves no kernel waiting for a thread
        for job in _JOBS.jobs:
            job.cancel()
        _JOBS.jobs = outer


def kernel_thread_counts() -> dict[str, int]:
    """How many Triton kernels this process has sent to threads so far ("on_threads"), and
    how many of those a thread handed to the compile workers, ready by then
    ("handed_to_workers"): Lowered.builds' keys (a lowering records what it added)."""
    return dict(_COUNTS)


def _threads(count: int) -> concurrent.futures.ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:  # one per compile thread Inductor would use, 8 at most: each mostly
            _POOL.append(concurrent.futures.ThreadPoolExecutor(  # waits on LLVM and ptxas
                max(1, min(8, count)), thread_name_prefix="precompile_nb-kernel"))
        return _POOL[0]


def _into_triton_cache(ac: Any, cls: Any, kernel_name: str, source_code: str,
                       env: dict[str, str]) -> Any:
    """A thread's job: the kernel compiled into Triton's cache here, or where the workers
    became ready while it waited for a thread, handed to them (their future, returned)."""
    try:
        handed = _to_workers(ac, cls, kernel_name, source_code, env)
    except Exception:  # noqa: BLE001 - the workers refused it: compiled here instead
        handed = None
    if handed is not None:
        return handed
    try:
        getattr(ac, "_set_triton_ptxas_path", lambda: None)()
        ac._load_triton_kernel_from_source(kernel_name, source_code).precompile(
            warm_cache_only=True)
    except Exception:  # noqa: BLE001 - Inductor's own path meets it again and reports it
        pass
    return None


def _to_workers(ac: Any, cls: Any, kernel_name: str, source_code: str,
                env: dict[str, str]) -> Any:
    """The workers' future for compiling the kernel into Triton's cache (the job Inductor
    hands them, 2.11-2.15's _worker_compile_triton), None where they are not ready, work on
    threads of their own (2.15's thread workers) or the job is of another shape."""
    ready = getattr(cls, "_ready_future", None)
    if (ready is None or not ready.done() or not cls.use_process_pool()
            or switched_off("PRECOMPILE_NB_KERNEL_HANDOFF") or not _worker_job_known(ac)
            or getattr(cls, "should_use_thread_workers", lambda: False)()):
        return None
    import torch._inductor.config as config

    load = functools.partial(ac._load_triton_kernel_from_source, kernel_name, source_code)
    extra = {"use_static_triton_launcher": config.use_static_triton_launcher}
    handed = cls.process_pool().submit(ac._worker_compile_triton, load, env, extra)
    _COUNTS["handed_to_workers"] += 1
    return handed


@functools.cache
def _worker_job_known(ac: Any) -> bool:
    import inspect

    try:
        names = tuple(inspect.signature(ac._worker_compile_triton).parameters)
    except (AttributeError, TypeError, ValueError):
        return False
    return names == ("load_kernel", "extra_env", "extra_config")


def _workers_env(ac: Any) -> dict[str, str]:
    """What Inductor sends a worker with each kernel: the compile's cache dirs (2.11-2.15)."""
    getattr(ac, "_set_triton_libdevice_path", lambda: None)()
    return {v: os.environ[v] for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                                       "TRITON_LIBDEVICE_PATH") if v in os.environ}


def _on_threads(inline: Any, patch: ScopedPatch) -> Any:
    ac = _async_compile()

    @functools.wraps(inline)
    def triton(self: Any, kernel_name: str, source_code: str, device_str: str = "cuda"):
        if (not patch.on() or device_str != "cuda" or ac.get_compile_threads() <= 1
                or os.environ.get("TRITON_INTERPRET", "0") == "1"
                or type(self).use_process_pool()
                or ac.CompiledTritonKernels.get(source_code) is not None):
            return inline(self, kernel_name, source_code, device_str)
        job = _threads(ac.get_compile_threads()).submit(
            _into_triton_cache, ac, type(self), kernel_name, source_code, _workers_env(ac))
        _JOBS.jobs.append(job)
        _COUNTS["on_threads"] += 1

        def result() -> Any:
            try:
                handed = job.result()
                if handed is not None:  # with the workers: Inductor's own path meets a
                    with contextlib.suppress(Exception):  # failure there again, here
                        handed.result()
            except concurrent.futures.CancelledError:  # the lowering ended first: Inductor's
                pass  # own path compiles it now
            _RESOLVING.on = True  # Inductor's in-process path, whether or not the workers
            try:  # are ready by now
                out = inline(self, kernel_name, source_code, device_str)
            finally:
                _RESOLVING.on = False
            return out.result() if isinstance(out, ac.CodeCacheFuture) else out

        return ac.LambdaFuture(result, future=job)

    return triton


_PATCH = ScopedPatch(lambda: _async_compile().AsyncCompile.triton,
                     lambda f: setattr(_async_compile().AsyncCompile, "triton", f),
                     _on_threads)


def _in_process_while_resolving(original: Any, patch: ScopedPatch) -> Any:
    if not isinstance(original, classmethod):  # a torch of another shape: left as it is
        return original
    ask = original.__func__

    def use_process_pool(cls: Any) -> bool:
        if patch.on() and getattr(_RESOLVING, "on", False):
            return False
        return ask(cls)

    return classmethod(use_process_pool)


_POOL_ASKED = ScopedPatch(  # 2.11-2.15: a classmethod
    lambda: _async_compile().AsyncCompile.__dict__.get("use_process_pool"),
    lambda f: setattr(_async_compile().AsyncCompile, "use_process_pool", f),
    _in_process_while_resolving)
