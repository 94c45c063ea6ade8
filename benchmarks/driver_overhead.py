"""Per-call overhead of the artifact's driver, before/after a change to `_driver.py`.

usage: python benchmarks/driver_overhead.py [--baseline-rev REV] [--backend inductor|eager]

Precompiles the tiny MLP of the benchmarks once, then builds two artifacts that differ only in
their driver section: the driver of this working tree and the one at git revision REV
(default HEAD, read with `git show`, nothing is changed). Both are timed against the compiled
graph's own `call(args)` in interleaved rounds; overhead = artifact call - graph call (best
round, and median round). Also checks that both drivers return the same result.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from precompile_nb import precompile  # noqa: E402
from precompile_nb.core import _compat  # noqa: E402
from precompile_nb.core.emit import DRIVER_SOURCE, marker  # noqa: E402
from workloads import build  # noqa: E402


def with_driver(code: str, driver_source: str) -> str:
    """`code` with its driver section replaced by `driver_source`."""
    cut = code.index(marker("driver"))
    return (code[:cut] + marker("driver") + "\n" + driver_source.rstrip() + "\n\n"
            "forward = _pc_make_forward(_PC_META, call, globals().get('__precompile_error__'))\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-rev", default="HEAD")
    ap.add_argument("--backend", default="inductor", choices=("inductor", "eager"))
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--calls", type=int, default=500, help="calls per round")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    w = build("tiny_mlp", "cpu")
    model, x = w.args
    baseline = subprocess.run(["git", "show", f"{args.baseline_rev}:precompile_nb/core/_driver.py"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout
    t = time.perf_counter()
    code, cache = precompile(w.fn, *w.args, backend=args.backend)
    print(f"precompiled the tiny MLP ({args.backend}) in {time.perf_counter() - t:.1f} s")
    precompile.load(code, cache)  # installs the kernels; the execs below compile nothing
    fns, call = {}, None
    drivers = ((f"driver @ {args.baseline_rev}", baseline), ("driver (working tree)", DRIVER_SOURCE))
    for label, src in drivers:
        ns: dict = {"__name__": "overhead_" + label}
        with _compat.same_kernel_keys():
            exec(compile(with_driver(code, src), label, "exec"), ns)  # noqa: S102
        fns[label] = ns["forward"]
        call = ns["call"]
    flat = [p for _, p in model.named_parameters()] + [b for _, b in model.named_buffers()] + [x]
    with torch.no_grad():
        ref = [f(model, x) for f in fns.values()]
        assert all(torch.equal(ref[0], r) for r in ref), "the drivers disagree"
        timed = {k: (lambda f=f: f(model, x)) for k, f in fns.items()}
        timed["graph alone"] = lambda: call(flat[:])
        res = {k: [] for k in timed}
        for _ in range(args.rounds):
            for k, f in timed.items():
                t = time.perf_counter()
                for _ in range(args.calls):
                    f()
                res[k].append((time.perf_counter() - t) / args.calls)
    g_min, g_med = min(res["graph alone"]), statistics.median(res["graph alone"])
    for k, v in res.items():
        line = f"{k:28s} best {min(v) * 1e6:7.2f} µs  median {statistics.median(v) * 1e6:7.2f} µs"
        if k != "graph alone":
            line += (f"   overhead best {(min(v) - g_min) * 1e6:6.2f} µs  "
                     f"median {(statistics.median(v) - g_med) * 1e6:6.2f} µs")
        print(line)


if __name__ == "__main__":
    main()
