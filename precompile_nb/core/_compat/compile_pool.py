"""torch internals of Inductor's pool of Triton compile workers and of Triton's per-process
set-up, both started with the capture (the checked versions are named beside each)."""
from __future__ import annotations

import threading

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
WARM_MODULES = ("triton.language", "triton.compiler.compiler",
                "triton.backends.nvidia.compiler", "triton.backends.nvidia.driver",
                "torch._inductor.runtime.triton_helpers",
                "torch._inductor.runtime.triton_heuristics")
_warmed: list[bool] = []  # one entry once this process handed its workers the import jobs


def start_compile_workers() -> int:
    """Start Inductor's Triton compile pool now and have its workers import what their first
    compile imports (Note [compile workers start with the capture]); a no-op where
    torch.compile would not start the pool either. Returns how many import jobs it handed
    the workers (0 where none: no pool, or handed before in this process)."""
    try:
        from torch._inductor.async_compile import AsyncCompile, maybe_warm_pool
    except ImportError:  # a torch without it: the pool starts at the first kernel, as before
        return 0
    try:
        maybe_warm_pool()
        # 2.11-2.15: set once maybe_warm_pool started the pool (not on CPU, TORCH_WARM_POOL=0)
        if _warmed or getattr(AsyncCompile, "_ready_future", None) is None:
            return 0
        _warmed.append(True)
        import pkgutil

        from torch._inductor.async_compile import get_compile_threads

        pool = AsyncCompile.process_pool()
        jobs = list(WARM_MODULES) * get_compile_threads()  # each worker likely takes some
        for name in jobs:  # a module absent there only fails its own job, which nothing reads
            pool.submit(pkgutil.resolve_name, name + ":__name__")
        return len(jobs)
    except Exception:  # noqa: BLE001 - only a head start: the lower stage starts the pool
        return 0  # itself at its first kernel, and reports a failure there as a PrecompileError


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
_SETUP: list[threading.Thread] = []


def start_triton_setup(device_index: int) -> bool:
    """Start Triton's per-process set-up on a thread (Note [Triton's set-up while the
    capture runs]); False where it was started before, or is switched off."""
    if _SETUP or switched_off("PRECOMPILE_NB_TRITON_SETUP"):
        return False
    try:  # imported here first, so that the thread only finds them (no two threads importing
        import torch._inductor.codecache  # noqa: F401 - one module tree at once)
        import torch.utils._triton  # noqa: F401
        import triton.compiler.compiler  # noqa: F401
        import triton.runtime.driver  # noqa: F401
    except Exception:  # noqa: BLE001 - no Triton (or a broken one): nothing to set up here;
        return False  # the lowering imports it itself and reports what fails there
    t = threading.Thread(target=_triton_setup, args=(device_index,), daemon=True,
                         name="precompile_nb-triton-setup")
    _SETUP.append(t)
    t.start()
    return True


def _triton_setup(device_index: int) -> None:
    try:
        import torch
        from torch._inductor.codecache import CacheBase
        from torch.utils._triton import triton_hash_with_backend

        with torch.cuda.device(device_index):
            CacheBase.get_system()  # the hash first: the lowering asks for it before the
            triton_hash_with_backend()  # code generation asks for the driver
    except Exception:  # noqa: BLE001 - only a head start: the lowering does it again and
        pass  # reports what fails there
