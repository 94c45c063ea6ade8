"""Note [C++ kernels in fewer runs] on the CPU: per benchmark workload, in one process, the
step precompiled with the reorder (PRECOMPILE_NB_FEWER_RUNS=1) and without it (=0): its C++
kernel count, and the steady call of both artifacts timed in alternating rounds (each round
`--iters` calls, the per-call mean; min and median over `--rounds`), against eager's.
The cold precompile is timed in fresh processes by cold_profile.py (the README of the results
says how).

usage: python benchmarks/cpu_fewer_runs.py [--workloads transformer_train,cnn_bn_train]
                                           [--rounds 15] [--iters 200] [--threads 2] [--out DIR]
Writes DIR/cpu_fewer_runs.json and .md (also printed).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]


def measure(name: str, rounds: int, iters: int) -> dict:
    import workloads

    from precompile_nb import precompile
    w = workloads.build(name, "cpu")
    calls = {"eager": lambda: w.fn(*w.args)}
    kernels = {}
    for flag in ("1", "0"):
        os.environ["PRECOMPILE_NB_FEWER_RUNS"] = flag
        code, cache = precompile(w.fn, *w.args)
        kernels[flag] = len(re.findall(r"^cpp_fused\w* = ", code, re.M))
        f = precompile.load(code, cache)
        calls[f"fewer_runs={flag}"] = (lambda f=f: f(*w.args))
    os.environ.pop("PRECOMPILE_NB_FEWER_RUNS")
    us: dict[str, list[float]] = {k: [] for k in calls}
    for c in calls.values():
        c()
    for _ in range(rounds):
        for k, c in calls.items():
            us[k].append(timeit.timeit(c, number=iters) / iters * 1e6)
    return {"kernels": kernels, "us": us,
            "min": {k: min(v) for k, v in us.items()},
            "median": {k: statistics.median(v) for k, v in us.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="transformer_train,cnn_bn_train")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    res = {n: measure(n, a.rounds, a.iters) for n in a.workloads.split(",")}
    lines = ["| workload | C++ kernels (reordered / not) | steady µs reordered, min / median "
             "| not reordered | eager | reordered / not (median) |",
             "| --- | --- | --- | --- | --- | ---: |"]
    for n, r in res.items():
        mn, md = r["min"], r["median"]
        lines.append(f"| {n} | {r['kernels']['1']} / {r['kernels']['0']} | "
                     f"{mn['fewer_runs=1']:.1f} / {md['fewer_runs=1']:.1f} | "
                     f"{mn['fewer_runs=0']:.1f} / {md['fewer_runs=0']:.1f} | "
                     f"{mn['eager']:.1f} / {md['eager']:.1f} | "
                     f"{md['fewer_runs=1'] / md['fewer_runs=0']:.3f} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump(res, open(os.path.join(a.out, "cpu_fewer_runs.json"), "w"), indent=1)
        open(os.path.join(a.out, "cpu_fewer_runs.md"), "w").write(text + "\n")


if __name__ == "__main__":
    main()
