"""Per-call overhead of the artifact's driver, before/after a change to `runtime/driver.py`.

usage: python benchmarks/driver_overhead.py [--baseline-rev REV] [--backend inductor|eager]
                                           [--workload tiny_mlp|transformer_infer|...]

Precompiles a workload of the benchmarks (the tiny MLP unless --workload names another)
once, then builds two artifacts that share that compiled graph and differ in their metadata
and driver sections: those of this working tree, and those the package at git revision REV
(default HEAD) writes for the same workload (REV is exported with `git archive` into a
temporary folder and run there in a child process; nothing here is changed), so a change of
the metadata format is compared too. Both are timed against the compiled graph's own
`call(args)` in interleaved rounds; overhead = artifact call - graph call (best round, and
median round). Also checks that both return the same result.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from precompile_nb import precompile  # noqa: E402
from precompile_nb.core import _compat  # noqa: E402
from precompile_nb.core.emit import marker  # noqa: E402
from workloads import build  # noqa: E402

_CHILD = """
import sys, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
from precompile_nb import precompile
from workloads import build
w = build({workload!r}, "cpu")
sys.stdout.write(precompile(w.fn, *w.args, backend={backend!r})[0])
"""


def tail_of_rev(rev: str, backend: str, workload: str) -> str:
    """The metadata and driver sections that the package at `rev` writes for `workload`."""
    with tempfile.TemporaryDirectory() as tmp:
        tar = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                             check=True).stdout
        tar_path = os.path.join(tmp, "rev.tar")
        with open(tar_path, "wb") as f:
            f.write(tar)
        with tarfile.open(tar_path) as t:
            t.extractall(tmp, filter="data")
        code = subprocess.run(
            [sys.executable, "-c", _CHILD.format(root=tmp, bench=os.path.join(tmp, "benchmarks"),
                                                 backend=backend, workload=workload)],
            cwd=tmp, capture_output=True, text=True, check=True, timeout=600).stdout
    return code[code.index(marker("metadata")):]


def with_tail(code: str, tail: str) -> str:
    """`code` (its header and graph) with its metadata and driver sections replaced."""
    return code[:code.index(marker("metadata"))] + tail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-rev", default="HEAD")
    ap.add_argument("--backend", default="inductor", choices=("inductor", "eager"))
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--calls", type=int, default=500, help="calls per round")
    ap.add_argument("--workload", default="tiny_mlp", help="a CPU inference workload of "
                    "benchmarks/workloads.py")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    w = build(args.workload, "cpu")
    baseline = tail_of_rev(args.baseline_rev, args.backend, args.workload)
    t = time.perf_counter()
    code, cache = precompile(w.fn, *w.args, backend=args.backend)
    print(f"precompiled {args.workload} ({args.backend}) in {time.perf_counter() - t:.1f} s")
    precompile.load(code, cache)  # installs the kernels; the execs below compile nothing
    fns, call = {}, None
    drivers = ((f"driver @ {args.baseline_rev}", with_tail(code, baseline)),
               ("driver (working tree)", code))
    for label, src in drivers:
        ns: dict = {"__name__": "overhead_" + label}
        with _compat.running_artifact(True):
            exec(compile(src, label, "exec", dont_inherit=True), ns)  # noqa: S102
        fns[label] = ns["forward"]
        call = ns["call"]
    flat = [t for a in w.args for t in (
        [p for _, p in a.named_parameters()] + [b for _, b in a.named_buffers()]
        if isinstance(a, torch.nn.Module) else [a])]
    with torch.no_grad():
        ref = [f(*w.args) for f in fns.values()]
        assert all(torch.equal(ref[0], r) for r in ref), "the drivers disagree"
        timed = {k: (lambda f=f: f(*w.args)) for k, f in fns.items()}
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
