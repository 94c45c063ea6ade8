"""How long Inductor's Triton compile workers take to be ready, and what their start is made of.

A cold precompile (or torch.compile) hands its first Triton kernels to async_compile seconds
before the pool of compile workers says it is ready; until then each kernel compiles in the
compiling process, one after another (cold_split.py's `marks` and n.kernels_in_process). This
script times, each in a fresh process with empty caches:
- `ready`: maybe_warm_pool() (what precompile and torch.compile call) until the pool's ready job
  came back, in a process doing nothing else;
- the sidecar's own steps, one by one, as a fresh interpreter pays them: importing torch,
  importing Inductor's async_compile, CUDA's device properties, Triton's key (a hash of its
  installed files);
- `triton_compile_s`: one small kernel compiled in a process, for scale;
- `precompile_start_{forked,sidecar}_{0,2000}mb`: the workers precompile starts for a large
  CUDA graph (compile_pool.workers_for_graph), forked from the process (Note [compile workers
  forked for a build]) and Inductor's sidecar (PRECOMPILE_NB_FORK_WORKERS=0), in a process
  that holds 0 or 2,000 MB of written memory: the call itself, until the pool says it is
  ready, and until a first job came back (no GPU needed: Triton installed is enough).

    python benchmarks/pool_start.py [OUT.json] [--no-cuda]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_READY = """
import time; t0 = time.perf_counter()
import torch; t1 = time.perf_counter()
from torch._inductor.async_compile import AsyncCompile, maybe_warm_pool
t2 = time.perf_counter()
maybe_warm_pool(); t3 = time.perf_counter()
AsyncCompile.use_process_pool()
AsyncCompile._ready_future.result(timeout=120); t4 = time.perf_counter()
import json
print(json.dumps({"import_torch": t1 - t0, "import_async_compile": t2 - t1,
                  "warm_pool_call": t3 - t2, "ready_after_warm": t4 - t3}))
"""

_SIDECAR_STEPS = """
import time; t0 = time.perf_counter()
import torch; t1 = time.perf_counter()
import torch._inductor.async_compile; t2 = time.perf_counter()
torch.cuda.get_device_properties(0); t3 = time.perf_counter()
from torch._inductor.runtime.triton_compat import triton_key
triton_key(); t4 = time.perf_counter()
import triton, triton.language as tl
@triton.jit
def add(x, y, out, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B); m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
a = torch.ones(1000, device="cuda"); o = torch.empty_like(a)
t5 = time.perf_counter(); add[(1,)](a, a, o, 1000, B=1024); torch.cuda.synchronize()
t6 = time.perf_counter()
import json
print(json.dumps({"import_torch": t1 - t0, "import_async_compile": t2 - t1,
                  "cuda_properties": t3 - t2, "triton_key": t4 - t3, "triton_compile_s": t6 - t5}))
"""


_PRECOMPILE_START = """
import os, time
import torch
ballast = torch.ones(int(os.environ["BALLAST_MB"]) * 2**18)  # written memory, as a model's
from precompile_nb.core._compat import compile_pool
from torch._inductor.async_compile import AsyncCompile
t0 = time.perf_counter()
jobs = compile_pool.workers_for_graph(1000)  # what a CUDA lowering of a large graph calls
t1 = time.perf_counter()
AsyncCompile._ready_future.result(timeout=300); t2 = time.perf_counter()
AsyncCompile.process_pool().submit(os.getpid).result(timeout=300); t3 = time.perf_counter()
import json
print(json.dumps({"start_call": t1 - t0, "ready_after_start": t2 - t0,
                  "first_job_after_start": t3 - t0,
                  "forked": float(bool(compile_pool.stop_forked_workers()))}))
"""


def _fresh(src: str, env_extra: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="pool_start_") as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TMPDIR=tmp,
                   PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   **(env_extra or {}))
        script = os.path.join(tmp, "step.py")  # a file: triton.jit reads its kernel's source
        with open(script, "w") as f:
            f.write(src)
        r = subprocess.run([sys.executable, script], env=env, capture_output=True,
                           text=True, timeout=300)
    if r.returncode != 0:
        return {"error": r.stderr[-1500:]}
    return {k: round(v, 3) for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}


def main() -> None:
    out: dict = {"cpus": os.cpu_count()}
    if "--no-cuda" not in sys.argv:
        out["pool_ready"] = [_fresh(_READY) for _ in range(2)]
        out["sidecar_steps"] = [_fresh(_SIDECAR_STEPS) for _ in range(2)]
    for mb in (0, 2000):  # the workers precompile starts, forked and Inductor's sidecar
        for how, fork in (("forked", "1"), ("sidecar", "0")):
            out[f"precompile_start_{how}_{mb}mb"] = [
                _fresh(_PRECOMPILE_START, {"PRECOMPILE_NB_FORK_WORKERS": fork,
                                           "BALLAST_MB": str(mb)}) for _ in range(2)]
    print(json.dumps(out, indent=1))
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if paths:
        with open(paths[0], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
