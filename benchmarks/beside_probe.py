"""How much of a cold CUDA precompile's tuning run is the GPU libraries' first use (cuDNN's and
cuBLAS's start, CUDA's lazy loading of their kernels), and how much of it a thread that uses
them beside the lowering takes off: an experiment, before any such thread is in the package.

usage: python benchmarks/beside_probe.py [--workloads cnn_bn_train,transformer_train]
                                         [--rounds 3] [--out DIR]

Round 42's timeline of the CNN training step (benchmarks/results/h100_round42, section 5)
found 1.3-1.9 s of its cold precompile in the run that tunes the compiled graph's kernels,
most of it in the first convolutions and the first copies on the GPU, with the GPU idle while
Inductor lowered for the 5 s before. Each round runs, in turn, two fresh processes with empty
compiler caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) that build the workload
(benchmarks/workloads.py, its CUDA size) and precompile it:

  plain    precompile alone
  beside   a thread started with precompile runs the workload's own computation once,
           eagerly, on a copy of its model and inputs (an upper bound of what the package
           could do from the captured graph's convolution and matrix shapes alone)

and records precompile's seconds and, for `beside`, when the thread ended. Prints a line a
workload (medians) and writes DIR/beside_probe.json.
"""
from __future__ import annotations

import argparse
import os
import statistics

from fresh_child import in_turn, run_fresh, save

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import copy, json, sys, threading, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
import workloads
from precompile_nb import precompile

w = workloads.build({workload!r}, "cuda")
torch.cuda.synchronize()
rec = {{}}
t0 = time.perf_counter()
if {beside!r}:
    args = copy.deepcopy(w.args)
    def run():
        with (torch.no_grad() if w.inference else torch.enable_grad()):
            w.fn(*args)
        torch.cuda.synchronize()
        rec["beside_end_s"] = time.perf_counter() - t0
    threading.Thread(target=run, daemon=True).start()
with (torch.no_grad() if w.inference else torch.enable_grad()):
    precompile(w.fn, *w.args)
rec["precompile_s"] = time.perf_counter() - t0
print(json.dumps(rec))
"""


def _one(name: str, variant: str) -> dict:
    return run_fresh(_CHILD.format(root=ROOT, bench=HERE, workload=name,
                                   beside=variant == "beside"), "beside_probe_")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="cnn_bn_train,transformer_train")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "beside_probe"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = in_turn(a.workloads.split(","), ("plain", "beside"), a.rounds, _one)
    for name, runs in res.items():
        med = {v: statistics.median(r["precompile_s"] for r in rs if "precompile_s" in r)
               for v, rs in runs.items() if any("precompile_s" in r for r in rs)}
        print(f"{name}: precompile s, medians of {a.rounds}: {med}; each: "
              f"{ {v: [round(r.get('precompile_s', -1), 2) for r in rs] for v, rs in runs.items()} }")
    save(a.out, "beside_probe.json", res)


if __name__ == "__main__":
    main()
