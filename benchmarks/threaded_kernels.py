"""An experiment of cold_split.py's `+threads` tools (not part of precompile_nb): Triton
kernels that Inductor would compile one after another in the compiling process, because its
compile workers are not ready yet, are compiled on threads of that process instead.

Round 20 found the slow cold rows on the H200 to be the ones whose first kernels met a pool
not yet ready (benchmarks/results/h200_round20), and two threads compiled Triton kernels
1.7-1.9x as fast as one (benchmarks/results/cpu_round20: Triton's LLVM step and ptxas leave
the GIL). What this does, per kernel that would compile in-process:
- a thread loads the kernel's module and compiles every configuration into Triton's cache
  on disk, as a compile worker does (`precompile(warm_cache_only=True)`);
- Inductor gets a future. When the module waits for its kernels, the future waits for that
  thread, then runs Inductor's own in-process path, which now finds each configuration in
  Triton's cache. All of Inductor's context (the graph, the compile id, its timers) stays
  on the compiling thread.

A failure on a thread is dropped: Inductor's own path then meets it and reports it as it
always does. install(counts) patches AsyncCompile.triton for the process and counts the
kernels it sent to threads in counts["kernels_on_threads"]; it returns why not where this
torch lacks a name it needs.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os


def install(counts: dict) -> str:
    import torch._inductor.async_compile as ac

    names = ("_load_triton_kernel_from_source", "CompiledTritonKernels", "CodeCacheFuture",
             "LambdaFuture")
    missing = [n for n in names if not hasattr(ac, n)]
    if missing:
        return "unavailable: torch._inductor.async_compile lacks " + ", ".join(missing)
    threads = concurrent.futures.ThreadPoolExecutor(
        max(1, min(8, (os.cpu_count() or 2) - 1)), thread_name_prefix="cold_split-kernels")
    inline = ac.AsyncCompile.triton
    set_ptxas = getattr(ac, "_set_triton_ptxas_path", lambda: None)

    def warm(load_kernel):
        try:
            set_ptxas()
            load_kernel().precompile(warm_cache_only=True)
        except Exception:  # noqa: BLE001 - Inductor's own path meets it again and reports it
            pass

    @functools.wraps(inline)
    def triton(self, kernel_name, source_code, device_str="cuda"):
        if (device_str != "cuda" or type(self).use_process_pool()
                or ac.CompiledTritonKernels.get(source_code) is not None):
            return inline(self, kernel_name, source_code, device_str)
        counts["kernels_on_threads"] = counts.get("kernels_on_threads", 0) + 1
        job = threads.submit(warm, functools.partial(ac._load_triton_kernel_from_source,
                                                     kernel_name, source_code))

        def result():
            job.result()
            out = inline(self, kernel_name, source_code, device_str)
            # the pool may be ready by now: Inductor then hands the kernel to it
            return out.result() if isinstance(out, ac.CodeCacheFuture) else out

        try:
            return ac.LambdaFuture(result, future=job)
        except TypeError:  # a torch whose LambdaFuture takes only the function
            return ac.LambdaFuture(result)

    ac.AsyncCompile.triton = triton
    return "installed"
