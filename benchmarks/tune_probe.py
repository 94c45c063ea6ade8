"""What the tuning run of a cold CUDA precompile spends in Inductor's benchmarking of each
kernel configuration, and whether fewer benchmark iterations choose the same configurations:
an experiment, before any such setting is in the package.

usage: python benchmarks/tune_probe.py [--workloads transformer_train,cnn_bn_train]
                                       [--rounds 2] [--lean-iters 20] [--out DIR]

Round 42's timelines (benchmarks/results/h100_round42) found the run that tunes the compiled
graph's kernels at 0.9 s (transformer training step) and 1.3-1.9 s (CNN training step), much
of it in Python around each benchmark iteration (the L2 flush, the events, the copies of
mutated arguments): Inductor's benchmarker (2.11-2.15: InductorBenchmarker.benchmark_gpu)
runs each configuration 5 times to estimate it, flushes L2 100 times, then up to 100 timed
iterations (fewer for kernels slower than 0.25 ms). Each round runs, in turn, two fresh
processes with empty compiler caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) that build
the workload (benchmarks/workloads.py, its CUDA size), precompile it and load the artifact:

  default  Inductor's benchmarker as it is
  lean     benchmark_iters and memory_warmup_iters set to --lean-iters

and records precompile's seconds, the seconds inside its tuning run (autotune_now), the
configuration each kernel chose (its best_config files in the cache), and the loaded
artifact's steady call (median of 200, after 20). Prints a line a workload and writes
DIR/tune_probe.json.
"""
from __future__ import annotations

import argparse
import os
import statistics

from fresh_child import in_turn, run_fresh, save

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import functools, glob, json, os, statistics, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
import workloads
from precompile_nb import precompile
from torch._inductor.runtime import benchmarking

rec = {{"tune_s": 0.0}}
if {lean!r}:
    bench = benchmarking.InductorBenchmarker.benchmark_gpu
    @functools.wraps(bench)
    def lean(self, fn, *a, **k):
        k.setdefault("benchmark_iters", {iters!r}); k.setdefault("memory_warmup_iters", {iters!r})
        return bench(self, fn, *a, **k)
    benchmarking.InductorBenchmarker.benchmark_gpu = lean
from precompile_nb.core._compat.autotune import autotune_now as now
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return now(*a, **k)
    finally:
        rec["tune_s"] += time.perf_counter() - t
from precompile_nb.core import _compat
_compat.autotune_now = timed  # the door's name, which core/lower.py calls

w = workloads.build({workload!r}, "cuda")
grad = torch.no_grad() if w.inference else torch.enable_grad()
t = time.perf_counter()
with grad:
    code, cache = precompile(w.fn, *w.args)
rec["precompile_s"] = time.perf_counter() - t
f = precompile.load(code, cache)
times = []
with grad:
    for i in range(220):
        torch.cuda.synchronize(); t = time.perf_counter()
        f(*w.args)
        torch.cuda.synchronize()
        if i >= 20:
            times.append(time.perf_counter() - t)
rec["steady_us"] = statistics.median(times) * 1e6
choices = {{}}
for p in glob.glob(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "**", "*.best_config"),
                   recursive=True):
    with open(p) as fh:
        c = json.load(fh)
    choices[os.path.basename(p)] = {{k: v for k, v in c.items()
                                    if k in ("XBLOCK", "YBLOCK", "R0_BLOCK", "RBLOCK",
                                             "num_warps", "num_stages")}}
rec["choices"] = choices
print(json.dumps(rec))
"""


def _one(name: str, variant: str, iters: int) -> dict:
    return run_fresh(_CHILD.format(root=ROOT, bench=HERE, workload=name,
                                   lean=variant == "lean", iters=iters), "tune_probe_")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="transformer_train,cnn_bn_train")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--lean-iters", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "tune_probe"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = in_turn(a.workloads.split(","), ("default", "lean"), a.rounds,
                  lambda name, variant: _one(name, variant, a.lean_iters))
    for name, runs in res.items():

        def med(variant: str, key: str) -> float | None:
            v = [r[key] for r in runs[variant] if key in r]
            return round(statistics.median(v), 3) if v else None

        same = [r.get("choices") == runs["default"][0].get("choices")
                for r in runs["default"] + runs["lean"]]
        print(f"{name}: medians of {a.rounds}, default / lean: precompile "
              f"{med('default', 'precompile_s')} / {med('lean', 'precompile_s')} s, tuning "
              f"{med('default', 'tune_s')} / {med('lean', 'tune_s')} s, steady "
              f"{med('default', 'steady_us')} / {med('lean', 'steady_us')} us; choices as "
              f"default's first run: {same}")
    save(a.out, "tune_probe.json", res)


if __name__ == "__main__":
    main()
