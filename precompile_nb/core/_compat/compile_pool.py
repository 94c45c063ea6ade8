"""torch internals of Inductor's pool of Triton compile workers and of Triton's per-process
set-up, both started with the capture (the checked versions are named beside each)."""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .scoped_patch import switched_off


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
#   so a graph that reaches its first kernel sooner (a llama step, at ~8 s) compiles some of
#   them here (since round 21 on threads: Note [kernels on threads while the workers
#   start]). Tried and not kept: workers forked from this process (ready at once, but every
#   later phase of this process ran slower, round 11); every kernel handed to the workers
#   still starting, through a feeder thread so that the hand-over never blocks on the pipe to
#   their sidecar (round 12, benchmarks/results/h200_round12): llama's wait for its kernels
#   was 5.5 and 5.6 s with it, 3.4 and 5.3 s without. What set that wait is the workers' own
#   first imports: each worker is a fresh process that imports Triton's compiler and
#   Inductor's Triton runtime at its first kernel. So, once the pool is started, each worker
#   is handed jobs that only import those modules (WARM_MODULES), which they run while the
#   capture and lowering go on (round 13, benchmarks/results/h200_round13): llama's training
#   step 15.8 -> 13.1 s and 13.9 -> 12.2 s in two pairs, its wait for the kernels after code
#   generation (autotune_now) 2.8 -> 1.4 s; bert's 18.1 -> 18.3 s, its wait 3.0 -> 1.4 s.
#   Where the lowering may fork the workers instead (Note [compile workers forked for a
#   build]), nothing starts before the capture: the lowering forks them, or starts the sidecar.
WARM_MODULES = ("triton.language", "triton.compiler.compiler",
                "triton.backends.nvidia.compiler", "triton.backends.nvidia.driver",
                "torch._inductor.runtime.triton_helpers",
                "torch._inductor.runtime.triton_heuristics")
_warmed: list[Any] = []  # the sidecar that was handed the import jobs


def start_compile_workers() -> int:
    """Before the capture: start Inductor's Triton compile pool (its sidecar, whose workers
    are then handed jobs that import what their first compile imports: Note [compile workers
    start with the capture]), unless the lowering may fork the workers instead (Note [compile
    workers forked for a build]); a no-op where torch.compile would not start the pool either.
    Returns how many import jobs it handed the workers (0 where none: no pool, left to the
    lowering, or handed before in this process)."""
    try:
        from torch._inductor.async_compile import AsyncCompile
    except ImportError:  # a torch without it: the pool starts at the first kernel, as before
        return 0
    try:
        return 0 if _fork_chosen(AsyncCompile) else _start_sidecar(AsyncCompile)
    except Exception:  # noqa: BLE001 - only a head start: the lower stage starts the pool
        return 0  # itself at its first kernel, and reports a failure there as a PrecompileError


def workers_for_graph(ops: int) -> int:
    """When Inductor is about to compile a CUDA graph of `ops` operations: fork the compile
    workers where Note [compile workers forked for a build] says so, else start Inductor's
    sidecar as start_compile_workers does (a no-op where it started it). Returns how many
    import jobs that handed the workers."""
    try:
        from torch._inductor.async_compile import AsyncCompile, maybe_warm_pool
    except ImportError:
        return 0
    if _FORKED:  # forked for this build already (a lowering tried again under a guard)
        return 0
    try:
        if (ops < FORK_MIN_OPS or threading.current_thread() is not threading.main_thread()
                or not _fork_chosen(AsyncCompile) or not _setup_done(timeout=30.0)):
            return _start_sidecar(AsyncCompile)
    except Exception:  # noqa: BLE001 - as in start_compile_workers
        return 0
    try:
        _import_quietly(WARM_MODULES)  # before the fork: the workers find them imported
        with _forked_start():
            maybe_warm_pool()
        if getattr(AsyncCompile, "_ready_future", None) is not None:
            from torch._inductor.async_compile import get_compile_threads

            _FORKED.append((AsyncCompile.process_pool(), get_compile_threads()))
        return 0
    except Exception:  # noqa: BLE001 - a fork that failed (no memory for the copy, a limit on
        _end(_forget(None))  # processes): its half-made pool goes, Inductor's sidecar comes
        try:
            return _start_sidecar(AsyncCompile)
        except Exception:  # noqa: BLE001 - as in start_compile_workers
            return 0


def forked_worker_count() -> int:
    """How many compile workers workers_for_graph forked for the build under way (Lowered.
    builds' "forked_workers"); 0 where it forked none."""
    return sum(n for _, n in _FORKED)


def _start_sidecar(async_compile_cls: Any) -> int:
    from torch._inductor.async_compile import maybe_warm_pool

    had_pool = async_compile_cls.process_pool.cache_info().currsize > 0
    maybe_warm_pool()
    # 2.11-2.15: set once maybe_warm_pool started the pool (not on CPU, TORCH_WARM_POOL=0)
    if getattr(async_compile_cls, "_ready_future", None) is None:
        return 0
    pool = async_compile_cls.process_pool()
    if not had_pool and not _SIDECAR:  # started for this build (Note [an unready sidecar
        _SIDECAR.append(pool)  # ends with the build])
    if _warmed and _warmed[0] is pool:
        return 0
    _warmed[:] = [pool]
    import pkgutil

    from torch._inductor.async_compile import get_compile_threads

    jobs = list(WARM_MODULES) * get_compile_threads()  # each worker likely takes some
    for name in jobs:  # a module absent there only fails its own job, which nothing reads
        pool.submit(pkgutil.resolve_name, name + ":__name__")
    return len(jobs)


# Note [an unready sidecar ends with the build]
#   Inductor's sidecar is a fresh interpreter that imports torch, then starts one worker per
#   core, each importing torch too; it reads nothing from its pipe until its own imports are
#   done, and Inductor's exit handler waits for it (SubprocPool.shutdown, 2.11-2.15). A small
#   CUDA graph's build is over before the sidecar precompile started for it is ready (its few
#   kernels compiled on threads: Note [kernels on threads while the workers start]), so a
#   script that precompiled one and ended sat at its exit until the sidecar had started: on
#   the H100 (benchmarks/results/h100_round30_suite_warm) the precompile processes of
#   tiny_mlp, transformer_infer and cnn_dynamic_infer ended 7.6-8.9 s after their last line,
#   eager's 0.7 s, those that forked their workers for the build 1.6-1.8 s; on the
#   development machine (torch 2.15, Triton 3.9, 8 compile threads on 2 cores) a process that
#   started the sidecar as a small graph's lowering does and ended a second later took
#   4.0-4.3 s to exit (0.8-0.9 s with no sidecar), 0.9 s with what follows (not yet measured
#   on a GPU). So
#   when the build ends, a sidecar that precompile started for it (no pool was there before)
#   and that is still not ready is forgotten by Inductor, as forked workers are, and told to
#   shut down from a daemon thread: nothing waits for it, and it ends once it reads that.
#   It ran no job of the build (a kernel goes to the workers only once they are ready), and
#   the next compile that wants a pool starts one. A sidecar that became ready stays, for the
#   next compile of the process (a notebook's), as before. PRECOMPILE_NB_END_UNREADY_SIDECAR=0
#   (or off, false, no) keeps it in every case.
_SIDECAR: list[Any] = []  # the sidecar _start_sidecar started for the build under way


def end_build_workers() -> None:
    """At a build's end: the workers forked for it (Note [compile workers forked for a build])
    and a sidecar started for it that is not ready yet (Note [an unready sidecar ends with the
    build]) end, and Triton's set-up thread is done (Note [Triton's set-up while the capture
    runs]: no fork after precompile copies it halfway through an import)."""
    stop_forked_workers()
    stop_unready_sidecar()
    _setup_done(timeout=60.0)


def stop_unready_sidecar() -> bool:
    """At a build's end: end the sidecar started for it where it is not ready yet (Note [an
    unready sidecar ends with the build]); True where it ended one."""
    if not _SIDECAR:
        return False
    pool = _SIDECAR.pop()
    try:
        import torch._inductor.async_compile as ac

        ready = getattr(ac.AsyncCompile, "_ready_future", None)
        if (switched_off("PRECOMPILE_NB_END_UNREADY_SIDECAR") or ready is None or ready.done()
                or _forget(pool) is None):
            return False
    except Exception:  # noqa: BLE001 - left as it was: it ends with this process, as before
        return False
    threading.Thread(target=_shut_down, args=(pool,), daemon=True,
                     name="precompile_nb-sidecar-end").start()
    return True


def _shut_down(pool: Any) -> None:
    try:
        pool.shutdown()  # tells the sidecar, then waits for it (on this thread alone)
    except Exception:  # noqa: BLE001 - a sidecar already gone
        pass


# Note [compile workers forked for a build]
#   Inductor's workers hang off a sidecar, a fresh interpreter that imports torch and
#   Inductor before it takes a job: ready 7.5-10 s after the start on the H200's zoo steps
#   (benchmarks/results/h200_round26), by which time the code generation is over and its
#   kernels have compiled on threads of this process, which share its interpreter (Note
#   [kernels on threads while the workers start]). Workers forked from this process have all
#   of that imported at once (on the 2-core development machine: ready 0.4-0.5 s after the
#   call against the sidecar's 3.0-3.9 s, benchmarks/results/cpu_round27). Inductor has this
#   start itself (worker_start_method="fork"); precompile takes it for a CUDA graph that
#   Inductor is about to compile (not one found in the lowering store) where nothing else
#   chose: no pool in this process yet, no TORCHINDUCTOR_WORKER_START set and the config at
#   its default, Linux, not a daemon process (which may not have children). It forks from
#   the main thread, once Triton's set-up thread has ended (Note [Triton's set-up while the
#   capture runs]): a fork copies only the forking thread, and a lock another thread held (a
#   module it was importing) would stay held in every worker; the workers also inherit the
#   set-up, which each would otherwise redo at its first kernel. A graph of fewer than
#   FORK_MIN_OPS operations keeps the sidecar: its few kernels compile on threads about as
#   soon, and the forks (one per core) are a cost of their own: forked before the capture
#   for every graph, the tiny MLP's precompile took 2.5 s against torch.compile's 2.3 s on
#   an H100, 0.6 s of it before the capture, and its one kernel, compiled in a worker
#   without Triton's set-up, 0.6 s (benchmarks/results/h100_round27; forked at the lowering,
#   the zoo steps took 0.65-0.76 of torch.compile's time and the tiny MLP 0.74,
#   benchmarks/results/h100_round28). The workers run at a lower priority (nice 5): they
#   compile while this process lowers and generates code, and where both want the cores the
#   lowering, which the result waits for, goes first. A fork shares this process's memory
#   page by page until either side writes to a page, so the workers would keep the pages
#   this process rewrites alive for as long as they live: they end with the build (Inductor
#   starts its own pool where a later compile needs one). The fork copies no CUDA state a
#   worker uses: a Triton compile for a known target touches no device (Inductor's fork
#   start computes the device's properties before it forks, for the same reason). The
#   workers also inherit the paused collector (Note [the collector pauses for a build]);
#   they live no longer than the build. A fork that fails (no memory for the copy, a limit
#   on processes) ends the workers forked before it and takes the sidecar.
#   PRECOMPILE_NB_FORK_WORKERS=0 (or off, false, no) keeps Inductor's sidecar.
FORK_MIN_OPS = 32
# the pool workers_for_graph forked and its number of workers, until stop_forked_workers
_FORKED: list[tuple[Any, int]] = []
_NICE = 5


def _fork_chosen(async_compile_cls: Any) -> bool:
    import multiprocessing
    import sys

    from torch._inductor import config

    cached = getattr(async_compile_cls.process_pool, "cache_info", None)
    return (sys.platform.startswith("linux") and not switched_off("PRECOMPILE_NB_FORK_WORKERS")
            and "TORCHINDUCTOR_WORKER_START" not in os.environ
            and getattr(config, "worker_start_method", None) == "subprocess"
            and cached is not None and cached().currsize == 0
            and not multiprocessing.current_process().daemon)


def _import_quietly(names: tuple[str, ...]) -> None:
    """Imports each of `names` ahead of the code that needs it; one that fails is left to that
    code, which imports it again and reports the failure (a worker at its first job, the
    lowering as a PrecompileError)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass


def _niced(initializer: Any, *args: Any) -> None:
    """A forked worker's start: a lower priority, then Inductor's own initializer."""
    try:
        os.nice(_NICE)
    except OSError:
        pass
    initializer(*args)


@contextlib.contextmanager
def _forked_start() -> Iterator[None]:
    """While Inductor creates its pool: forked workers (2.11-2.15's worker_start_method), each
    starting through _niced (async_compile._async_compile_initializer, 2.11-2.15)."""
    import warnings

    import torch._inductor.async_compile as ac
    from torch._inductor import config

    initializer = getattr(ac, "_async_compile_initializer", None)
    if initializer is not None:
        ac._async_compile_initializer = functools.partial(_niced, initializer)
    try:
        with config.patch(worker_start_method="fork"), warnings.catch_warnings():
            # Python 3.12 warns of any fork in a process with threads (CUDA's, a notebook's)
            warnings.filterwarnings("ignore", message=".*multi-threaded.*fork",
                                    category=DeprecationWarning)
            yield
    finally:
        if initializer is not None:
            ac._async_compile_initializer = initializer


def stop_forked_workers() -> bool:
    """End the workers workers_for_graph forked (Note [compile workers forked for a
    build]) where they are still Inductor's pool, and forget them there; True where it
    ended some."""
    stopped = False
    while _FORKED:
        pool, _ = _FORKED.pop()
        try:
            _forget(pool)
            pool.shutdown(wait=False, cancel_futures=True)
            stopped = True
        except Exception:  # noqa: BLE001 - workers left running end with this process
            pass
    return stopped


def _forget(pool: Any) -> Any:
    """Inductor's current pool, where it is `pool` (None: whichever it is), forgotten by
    Inductor (2.11-2.15: process_pool's cache, the readiness future, the set of pools that
    its exit ends), so that its next compile starts a pool of its own; returns the pool
    forgotten, or None. Not Inductor's after_fork: that forgets every pool, 2.15's thread
    pool too, where this must forget only the one precompile forked."""
    import torch._inductor.async_compile as ac

    current = ac.AsyncCompile.process_pool
    if not current.cache_info().currsize or (pool is not None and current() is not pool):
        return None
    made = current()
    current.cache_clear()
    ac.AsyncCompile._ready_future = None
    getattr(ac, "_pool_set", set()).discard(made)
    return made


def _end(pool: Any) -> None:
    """A pool whose start failed, ended: the workers forked before the failure stopped (a
    process pool that never started its manager would leave them waiting for jobs, and this
    process's exit waiting for them)."""
    if pool is None:
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.terminate()
            proc.join(10)  # reaped: no process of it left behind
        except Exception:  # noqa: BLE001 - already gone
            pass
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:  # noqa: BLE001 - a pool that never started has nothing to shut down
        pass


# Note [Triton's set-up while the capture runs]
#   A process's first Triton compile pays two set-ups that Inductor caches for the process
#   (2.11-2.15): Triton's CUDA driver, whose first use builds its C helper module with the C
#   compiler (triton.runtime.driver.active, reached from Inductor's code generation through
#   torch.utils._triton.triton_hash_with_backend, which also asks ptxas its version), and the
#   hash of Triton's own sources (triton_key, reached through CacheBase.get_system, the key
#   of the autotuning cache that the lowering of a matrix product opens). A cProfile of the
#   tiny MLP's cold precompile on the H200 (benchmarks/results/h200_round19) found 0.38 s
#   of the first under code generation and 0.39 s of the second under the lowering, on this
#   thread, one after the other; torch.compile paid the same two (0.34 s and 0.37 s). Both
#   wait mostly outside the interpreter (the compiler subprocess, reading and hashing files),
#   so a CUDA precompile starts them on a thread of their own with the capture, once per
#   process, on the example's device, so that they overlap the capture and the traces
#   (where the lowering asks before the thread is done, it computes them again itself, as
#   before: the two are plain caches). The thread's errors are dropped (the lowering then
#   meets them itself), and where the thread builds the helper before the lowering enters
#   the build's private directory, the helper lands in the Triton cache the build found, for
#   the next process to reuse. The thread takes the hash first. The lowering needs it
#   first, and triton_hash_with_backend builds the driver before it hashes. Measured on the
#   H200 in the other order (benchmarks/results/h200_round20): the tiny MLP's code
#   generation fell from 0.43 to 0.06 s, but its lowering stayed at 0.47-0.49 s. Its
#   capture takes 0.13 s, so the lowering likely reached the hash before the thread had it.
#   In this order (benchmarks/results/h200_round21, one run each): lowering 0.36 against
#   0.40 s without the thread, code generation 0.29 against 0.43 s.
#   PRECOMPILE_NB_TRITON_SETUP=0 (or off, false, no) leaves both to the lowering.
#   Round 37 (H100, tiny MLP, benchmarks/results/h100_round37/timeline): the lowering's key
#   (lowering_key.graph_and_setting_key, the first to ask) still reached the hash before the
#   thread had it, and hashed Triton's sources and its 0.5 GB library again beside the thread
#   (0.7 s of the main thread). So the key waits for the thread's hash where a thread is at
#   it (wait_for_triton_hash): at most what hashing again would take, and the work once.
#   Round 38 (H100, torch's bytecode compiled): the key still waited 0.27 s (tiny MLP) and
#   0.23 s (the dynamic CNN) for the thread, and right after the wait the lowering spent
#   0.5 s importing Inductor's code generation (init_backend_registration, the first thing
#   GraphLowering does). The key now takes those imports while the thread hashes: the same
#   imports, once, in the time the wait would have idled (hashing reads and digests with
#   the interpreter's lock released).
#   A CPU precompile keys its lowering the same way, and with a torch build that installs
#   Triton (the CUDA builds, which pip gives by default and which run on CPU) that key hashes
#   Triton too: 0.38 s of the tiny MLP's CPU precompile on torch 2.15 on the 2-core
#   development machine, on the main thread. A CPU precompile starts a thread for the hash
#   alone, where the lowering store is on (without it nothing on a CPU lowering asks).
#   The thread ends with the build (end_build_workers joins it): a precompile refused at the
#   capture used to leave it hashing, and a process forked then (a data loader's workers)
#   copies no thread but whatever lock it held: on torch 2.15 on CPU, a refused precompile,
#   a fork, and a precompile in the child hung the child (over 300 s; with the thread
#   switched off, 7.6 s). A successful build has waited for the hash already. And the key
#   waits only for a thread that is alive (none is in a forked child).
#   Round 39 (a slower H100): the tiny MLP's key still waited 0.41 s after taking the code
#   generation's imports.
#   The thread started only after Inductor's own imports (~1 s, torch._inductor.codecache),
#   which it needs for the key's last steps, not for Triton's hash (triton_key, most of the
#   time: 0.77 s of it on torch 2.15's Triton on the development machine). So the thread
#   now starts first, with Triton alone imported (0.15 s; the hash then imports nothing
#   more, checked on torch 2.15's Triton: every package it walks is imported by then), and
#   hashes while this thread imports Inductor's caches and the compile pool; it takes the
#   rest once those imports are done (_GO), so that no two threads import one module tree.
#   Round 40 (a third H100): the tiny MLP's key waited for no hash, only taking the code
#   generation's imports (one run, benchmarks/results/h100_round40/).
_SETUP: list[threading.Thread] = []
_HASHED = threading.Event()  # set when the thread's hash is done (or failed)
_GO = threading.Event()  # set when start_triton_setup has imported what the thread uses next
_IMPORTED: list[bool] = []  # whether those imports succeeded
_STARTED: set[str] = set()  # "hash" (a CPU build's thread), "cuda" (the whole set-up)


def _setup_done(timeout: float) -> bool:
    """Whether Triton's set-up thread (if any) has ended, waiting up to `timeout` s: a fork
    must not copy a thread's half-done import or build."""
    for t in _SETUP:
        t.join(timeout)
    return not any(t.is_alive() for t in _SETUP)


def start_triton_setup(device_index: int | None) -> bool:
    """Start Triton's per-process set-up on a thread (Note [Triton's set-up while the
    capture runs]); for a CPU build (`device_index` None) only the hash, which the
    lowering's key asks for where Triton is installed (the caller starts it only where a
    lowering is keyed). False where it was started before, or is switched off. Imports
    Inductor's caches here while the thread hashes Triton's files."""
    kind = "hash" if device_index is None else "cuda"
    if "cuda" in _STARTED or (kind == "hash" and _STARTED) or \
            switched_off("PRECOMPILE_NB_TRITON_SETUP"):
        return False  # once a process (the hash of a CPU build's thread serves a CUDA one)
    key = _triton_key()
    if key is None:  # no Triton (or a broken one): nothing to set up here; the lowering
        return False  # imports it itself and reports what fails there
    t = threading.Thread(target=_triton_setup, args=(device_index, key), daemon=True,
                         name="precompile_nb-triton-setup")
    _STARTED.add(kind)
    _SETUP.append(t)
    t.start()
    try:  # here, one module tree at once: the thread reads and digests files meanwhile
        _IMPORTED.append(_import_for_setup())
    finally:
        _GO.set()
    return True


def import_lowering() -> None:
    """Imports Inductor's compile entry (2.11-2.15: torch._inductor.compile_fx, which brings
    most of Inductor, Dynamo's and sympy's modules), as the lowering's first step would: at
    the build's start, where the collector can take its objects as old (Note [the collector
    pauses for a build])."""
    _import_quietly(("torch._inductor.compile_fx",))


def _import_for_setup() -> bool:
    """What the set-up thread uses after Triton's hash, imported on the caller's thread;
    False where that fails (the lowering imports them itself and reports what fails)."""
    try:
        import torch._inductor.codecache  # noqa: F401
        import torch.utils._triton  # noqa: F401
        import triton.compiler.compiler  # noqa: F401
        import triton.runtime.driver  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def _triton_key() -> Callable[[], str] | None:
    """Triton's hash of its own sources and library (cached by Triton for the process), where
    Inductor finds it (2.11-2.15: triton.runtime.cache, before Triton 3.4
    triton.compiler.compiler); importing it imports Triton's package tree, the backends'
    too, which is all the hash imports. None without Triton."""
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            key = getattr(importlib.import_module(module), "triton_key", None)
        except Exception:  # noqa: BLE001 - no such module in this Triton, no Triton, or a
            continue  # broken one (then neither imports)
        if callable(key):
            return key
    return None


def _triton_setup(device_index: int | None, key: Callable[[], str] | None = None) -> None:
    try:
        if key is not None:
            key()  # the largest part (reading and digesting files), beside the imports
        _GO.wait(300)  # set by start_triton_setup once they are done (or have failed)
        if False in _IMPORTED:
            return
        import torch
        from torch._inductor.codecache import CacheBase
        from torch.utils._triton import triton_hash_with_backend

        if device_index is None:  # a CPU build: the hash alone
            CacheBase.get_system()
            return
        with torch.cuda.device(device_index):
            CacheBase.get_system()  # the hash first: the lowering asks for it before the
            _HASHED.set()  # code generation asks for the driver (a failure: set below)
            triton_hash_with_backend()
    except Exception:  # noqa: BLE001 - only a head start: the lowering does it again and
        pass  # reports what fails there
    finally:
        _HASHED.set()


def wait_for_triton_hash(timeout: float = 60.0) -> None:
    """Where Triton's set-up thread is hashing Triton (Note [Triton's set-up while the
    capture runs]), wait for its hash instead of computing it again beside it, taking the
    code generation's imports meanwhile."""
    if not _HASHED.is_set() and any(t.is_alive() for t in _SETUP):
        _import_code_generation()  # what the lowering imports next, while the thread hashes
        _HASHED.wait(timeout)


def _import_code_generation() -> None:
    """Inductor's code generation backends, imported and registered as GraphLowering's first
    step does it (2.11-2.15: once a process, reading no setting the build changes)."""
    try:
        from torch._inductor.codegen.common import init_backend_registration

        init_backend_registration()
    except Exception:  # noqa: BLE001 - only a head start: the lowering imports them itself
        pass  # and reports what fails there
