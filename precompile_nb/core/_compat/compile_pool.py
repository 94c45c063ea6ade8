"""torch internals of Inductor's pool of Triton compile workers, started with the capture (the
checked versions are named beside each)."""
from __future__ import annotations


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
#   them here. Tried and not kept: workers forked from this process (ready at once, but every
#   later phase of this process ran slower, round 11); every kernel handed to the workers
#   still starting, through a feeder thread so that the hand-over never blocks on the pipe to
#   their sidecar (round 12, benchmarks/results/h200_round12): llama's wait for its kernels
#   was 5.5 and 5.6 s with it, 3.4 and 5.3 s without. What else sets when that wait ends
#   (the workers' own first imports and compiles, we think) is not yet measured.
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
