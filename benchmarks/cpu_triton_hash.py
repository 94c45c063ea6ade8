"""A CPU precompile with a torch build that installs Triton (the CUDA builds, which pip gives by
default and which run on CPU): what hashing Triton on a thread with the capture saves
(Note [Triton's set-up while the capture runs], core/_compat/compile_pool.py).

usage: python benchmarks/cpu_triton_hash.py [--pairs N] [--workloads a,b] [--out FILE.json]

Run it with the interpreter of the torch to measure (torch 2.15's venv, say). For each
benchmark workload (benchmarks/workloads.py, CPU sizes), pairs of fresh processes in turn, each
with an empty Inductor cache: `thread` as shipped, `main` with PRECOMPILE_NB_TRITON_SETUP=0
(the lowering's key hashes Triton on the main thread, as before). Each process times
precompile() alone (torch and precompile_nb imported before the clock) and the seconds of its
main thread inside CacheBase.get_system (the hash, where that thread computes it). Prints each
pair and the medians; the ratio is median(thread) / median(main).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[2])
import torch
from torch._inductor.codecache import CacheBase
import precompile_nb
from workloads import build
real, main_s = CacheBase.get_system, []
def get_system():
    t = time.perf_counter(); out = real()
    if threading.current_thread() is threading.main_thread():
        main_s.append(time.perf_counter() - t)
    return out
CacheBase.get_system = staticmethod(get_system)
w = build(sys.argv[1], "cpu")
t = time.perf_counter()
with torch.no_grad() if w.inference else torch.enable_grad():
    precompile_nb.precompile(w.fn, *w.args)
print(json.dumps({"precompile_s": time.perf_counter() - t, "main_hash_s": sum(main_s)}))
"""


def one(workload: str, switch: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PRECOMPILE_NB_TRITON_SETUP=switch,
                   PYTHONPATH=os.path.dirname(HERE), CUDA_VISIBLE_DEVICES="")
        r = subprocess.run([sys.executable, "-c", _CHILD, workload, HERE], env=env,
                           capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--workloads", default="tiny_mlp,transformer_train")
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch

    out = {"torch": torch.__version__, "python": sys.executable, "workloads": {}}
    for w in a.workloads.split(","):
        rows = {"thread": [], "main": []}
        for k in range(a.pairs):
            for name, switch in (("thread", "1"), ("main", "0")):
                rows[name].append(one(w, switch))
            print(w, k, {n: {x: round(v, 3) for x, v in r[-1].items()} for n, r in rows.items()},
                  flush=True)
        med = {n: statistics.median(r["precompile_s"] for r in v) for n, v in rows.items()}
        out["workloads"][w] = {"runs": rows, "median_s": med,
                               "ratio": med["thread"] / med["main"]}
        print(f"{w}: precompile median {med['thread']:.2f} s (hash on a thread) / "
              f"{med['main']:.2f} s (on the main thread) = {med['thread'] / med['main']:.3f}")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
