"""Can Triton kernels compile on threads of one process, side by side?

While Inductor's pool of compile workers starts, a cold compile builds each Triton kernel in
the compiling process, one after another (benchmarks/results/h200_round20: the slow rows are
the ones whose first kernels met a pool not yet ready). Threads would only help if Triton's
compile leaves Python's GIL while it works: its LLVM steps and ptxas (a subprocess) do. This
script compiles N distinct small kernels for an sm_90 target (no GPU needed) in a fresh
process, one after another, then N others on W threads, and reports wall and CPU seconds.

    python benchmarks/triton_threads.py [--kernels 16] [--threads 2] [--out OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import concurrent.futures as cf, importlib.util, json, os, sys, time
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
n, threads, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def kernel(i):  # triton.jit reads its source from a file
    path = os.path.join(tmp, f"k{i}.py")
    with open(path, "w") as f:
        f.write(f'''import triton, triton.language as tl
@triton.jit
def k{i}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.exp(x) * {i + 1}.0 + tl.sin(x) * tl.cos(x) / (1.0 + tl.abs(x))
    tl.store(y_ptr + offs, y, mask=offs < n)
''')
    spec = importlib.util.spec_from_file_location(f"k{i}", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return getattr(mod, f"k{i}")

def build(fn):
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs={"BLOCK": 1024}),
                          target=GPUTarget("cuda", 90, 32))

build(kernel(10_000))  # the process's one-time set-up, outside both timings
out = {}
for name, workers, first in (("serial", 1, 0), ("threads", threads, n)):
    fns = [kernel(first + i) for i in range(n)]
    w0, c0 = time.perf_counter(), time.process_time()
    if workers == 1:
        for f in fns: build(f)
    else:
        with cf.ThreadPoolExecutor(workers) as ex: list(ex.map(build, fns))
    out[name] = {"wall_s": round(time.perf_counter() - w0, 3),
                 "cpu_s": round(time.process_time() - c0, 3)}
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    runs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:  # empty Triton cache, fresh process
            env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, "cache"),
                       TRITON_DEFAULT_FP_FUSION="1")
            r = subprocess.run([sys.executable, "-c", _CHILD, str(args.kernels),
                                str(args.threads), tmp], env=env, capture_output=True,
                               text=True, timeout=900)
            if r.returncode:
                sys.exit(r.stderr[-3000:])
            runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    result = {"kernels": args.kernels, "threads": args.threads, "cpus": os.cpu_count(),
              "runs": runs, "speedup": [round(x["serial"]["wall_s"] / x["threads"]["wall_s"], 2)
                                        for x in runs]}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
