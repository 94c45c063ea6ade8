"""What a dynamic dimension costs per call: a static artifact against a mark_dynamic one of the
same computation at the same size, side by side in one process, plus the cost of the guard
checks alone.

usage: python benchmarks/dynamic_overhead.py [--rounds 100] [--calls 300]

Workload: nn.Sequential(Linear(64, 128), BatchNorm1d(128), ReLU(), Linear(128, 10)) in eval
mode on a 32x64 input (the BatchNorm gives the dynamic artifact a guard on the batch). Reports
best and median per-call times, the dynamic/static ratio, and the per-guard cost (the time of
the driver's input checks with and without the guards, divided by the number of guards).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from precompile_nb import precompile  # noqa: E402
from precompile_nb.core import build  # noqa: E402


def timed(f, rounds: int, calls: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        out.append((time.perf_counter() - t) / calls)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(),
                      nn.Linear(128, 10)).eval()
    x = torch.randn(32, 64)
    fn = lambda m, x: m(x)  # noqa: E731
    static = precompile.load(*precompile(fn, m, x))
    xd = x.detach()
    torch._dynamo.mark_dynamic(xd, 0)
    art = build(fn, m, xd)
    dynamic = precompile.load(art.python_code, art.cache)
    guards = art.captured.convention.guards
    torch.testing.assert_close(static(m, x), dynamic(m, x))
    with torch.no_grad():
        res = {"static": [], "dynamic": []}
        for _ in range(3):  # interleaved
            res["static"] += timed(lambda: static(m, x), args.rounds // 3, args.calls)
            res["dynamic"] += timed(lambda: dynamic(m, x), args.rounds // 3, args.calls)
    for k, v in res.items():
        print(f"{k:8s} best {min(v) * 1e6:8.2f} us  median {statistics.median(v) * 1e6:8.2f} us")
    ratio = statistics.median(res["dynamic"]) / statistics.median(res["static"])
    print(f"dynamic / static (median): {ratio:.3f}")
    # the guards alone: evaluate each compiled guard the way the driver does
    from precompile_nb.runtime.driver import _PC_GUARD_FNS

    codes = [(compile(g.expr, "<guard>", "eval"), {n: x.shape[d] for n, (_, d) in
                                                   g.symbols.items()}) for g in guards]

    def check() -> None:
        for code, sizes in codes:
            eval(code, _PC_GUARD_FNS, dict(sizes))  # noqa: S307 - our own expressions

    per = min(timed(check, args.rounds, args.calls)) / max(len(codes), 1)
    print(f"guards: {[g.text for g in guards]}; per guard {per * 1e6:.2f} us")


if __name__ == "__main__":
    main()
