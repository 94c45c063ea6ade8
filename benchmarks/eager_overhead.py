"""Per-call cost of an eager-backend artifact against calling the module itself.

usage: python benchmarks/eager_overhead.py

The workload of issue 17: nn.Sequential(Linear(64, 128), ReLU(), Linear(128, 10)) on a 32x64
input, CPU, one thread. The artifact (backend="eager") runs the captured ATen graph as Python
code behind the driver's checks; the module runs nn.Module.__call__ and F.linear. Both are
timed in interleaved rounds (so machine noise hits both alike), with grad enabled (how a
module is usually called) and under torch.no_grad(); the report is the median round of each
and the difference. Target: the artifact within 10 us of the module.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from precompile_nb import precompile  # noqa: E402

ROUNDS, CALLS = 30, 2000


def per_call_us(fn) -> float:
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - t0) / CALLS * 1e6


def main() -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    f = precompile.load(*precompile(lambda m, x: m(x), m, x, backend="eager"))
    torch.testing.assert_close(f(m, x), m(x))
    print(f"torch {torch.__version__}; {ROUNDS} interleaved rounds of {CALLS} calls")
    for mode, ctx in (("grad enabled", torch.enable_grad), ("no_grad", torch.no_grad)):
        mod, art = [], []
        with ctx():
            for _ in range(ROUNDS):
                mod.append(per_call_us(lambda: m(x)))
                art.append(per_call_us(lambda: f(m, x)))
        a, b = statistics.median(mod), statistics.median(art)
        print(f"{mode:13s} module {a:6.1f} us   artifact {b:6.1f} us   "
              f"difference {b - a:+5.1f} us (target <= 10)")


if __name__ == "__main__":
    main()
