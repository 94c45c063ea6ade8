"""A CPU precompile with a torch build that installs Triton (the CUDA builds, which pip gives by
default and which run on CPU): what hashing Triton on a thread with the capture saves
(Note [Triton's set-up while the capture runs], core/_compat/compile_pool.py).

usage: python benchmarks/cpu_triton_hash.py [--pairs N] [--workloads a,b] [--out FILE.json]
                                           [--baseline-rev REV]

Run it with the interpreter of the torch to measure (torch 2.15's venv, say). For each
benchmark workload (benchmarks/workloads.py, CPU sizes), pairs of fresh processes in turn, each
with an empty Inductor cache: `thread` as shipped, `main` with PRECOMPILE_NB_TRITON_SETUP=0
(the lowering's key hashes Triton on the main thread, as before). Each process times
precompile() alone (torch and precompile_nb imported before the clock) and the seconds of its
main thread inside CacheBase.get_system (the hash, where that thread computes it; that hook
imports Inductor before the clock) and in the lowering key's wait for the thread's hash
(`key_wait_s`, with the imports it takes), and the cyclic collector's seconds inside
precompile() (`gc_s`, benchmarks/gc_clock.py: with the collector paused for the build, its one
collection at the end; Note [the collector pauses for a build]). Prints each
pair and the medians; the ratio is median(thread) / median(main). With --baseline-rev, the
second of each pair is REV's tree (exported with `git archive`) as shipped there instead of
`main`, the ratio is this tree's over REV's, and no hook imports Inductor before the clock (as
in a process's first precompile: the imports are part of what the thread overlaps).
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
import json, os, sys, threading, time
sys.path[:0] = [sys.argv[4], sys.argv[2]]  # the tree measured first: before the cwd's ''
import torch
import precompile_nb
import precompile_nb.core._compat.lowering_key as lk
from workloads import build
main_s, waits = [], []
if sys.argv[3] == "hook":  # imports Inductor before the clock: the thread-or-main question only
    from torch._inductor.codecache import CacheBase
    real = CacheBase.get_system
    def get_system():
        t = time.perf_counter(); out = real()
        if threading.current_thread() is threading.main_thread():
            main_s.append(time.perf_counter() - t)
        return out
    CacheBase.get_system = staticmethod(get_system)
real_wait = lk.wait_for_triton_hash  # the key waiting for the thread's hash, imports taken
def timed_wait(*a, **k):
    t = time.perf_counter(); real_wait(*a, **k); waits.append(time.perf_counter() - t)
lk.wait_for_triton_hash = timed_wait
from gc_clock import GcClock
w = build(sys.argv[1], "cpu")
with GcClock() as clock:
    t = time.perf_counter()
    with torch.no_grad() if w.inference else torch.enable_grad():
        precompile_nb.precompile(w.fn, *w.args)
    dt = time.perf_counter() - t
print(json.dumps({"precompile_s": dt, "main_hash_s": sum(main_s),
                  "key_wait_s": sum(waits), "gc_s": sum(clock.s.values()),
                  "tree": os.path.dirname(os.path.dirname(precompile_nb.__file__))}))
"""


def one(workload: str, switch: str, root: str = os.path.dirname(HERE), hook: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PRECOMPILE_NB_TRITON_SETUP=switch,
                   PYTHONPATH=root, CUDA_VISIBLE_DEVICES="")
        r = subprocess.run([sys.executable, "-c", _CHILD, workload, HERE,
                            "hook" if hook else "-", root], env=env,
                           capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if os.path.realpath(res["tree"]) != os.path.realpath(root):  # round 39's first use ran the
        raise SystemExit(f"measured {res['tree']}, not {root}")  # cwd's tree on both sides
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--workloads", default="tiny_mlp,transformer_train")
    ap.add_argument("--out")
    ap.add_argument("--baseline-rev")
    a = ap.parse_args()
    import torch

    here = os.path.dirname(HERE)
    sides = [("thread", "1", here), ("main", "0", here)]
    if a.baseline_rev:
        from cold_profile import export_rev  # this folder is on the path

        tmp = tempfile.mkdtemp(prefix="triton_hash_rev_")
        sides[1] = (a.baseline_rev, "1", export_rev(a.baseline_rev, tmp))
    out = {"torch": torch.__version__, "python": sys.executable, "workloads": {},
           "sides": [s[0] for s in sides]}
    for w in a.workloads.split(","):
        rows: dict[str, list] = {name: [] for name, _, _ in sides}
        for k in range(a.pairs):
            for name, switch, root in sides:
                rows[name].append(one(w, switch, root, hook=not a.baseline_rev))
            print(w, k, {n: {x: round(v, 3) for x, v in r[-1].items() if x != "tree"}
                         for n, r in rows.items()},
                  flush=True)
        med = {n: statistics.median(r["precompile_s"] for r in v) for n, v in rows.items()}
        other = sides[1][0]
        out["workloads"][w] = {"runs": rows, "median_s": med,
                               "ratio": med["thread"] / med[other]}
        print(f"{w}: precompile median {med['thread']:.2f} s (this tree, hash on a thread) / "
              f"{med[other]:.2f} s ({other}) = {med['thread'] / med[other]:.3f}")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
