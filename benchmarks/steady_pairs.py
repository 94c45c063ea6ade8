"""Steady-state step time of saved precompile pairs against eager's, in one process: a zoo
model's step loaded from each pair, called in alternating blocks (eager's fn among them), the
median of each one's per-call times. For comparing two builds of the same step (a compile
option on and off) after benchmarks/warm_first_call.py saved them (DIR/work/MODEL/nb.py and
nb.cache).

usage: python benchmarks/steady_pairs.py --model timm_efficientnet --workload train
                                         --pairs on=DIR1,off=DIR2 [--size real]
                                         [--device cuda] [--blocks 5] [--calls 20] [--out F]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="timm_efficientnet")
    ap.add_argument("--workload", default="train", choices=("infer", "train"))
    ap.add_argument("--size", default="real")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--pairs", required=True, help="name=DIR,...: DIR/work/MODEL/nb.{py,cache}")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    import torch

    from precompile_nb import precompile
    from zoo import models

    spec = models.REGISTRY[a.model](a.size, a.device)
    spec.model.train() if a.workload == "train" else spec.model.eval()
    fn, args = spec.fns[a.workload], (spec.model, *spec.args[a.workload])
    steps = {"eager": fn}
    for item in a.pairs.split(","):
        name, folder = item.split("=", 1)
        base = os.path.join(folder, "work", a.model, "nb")
        with open(base + ".py") as f, open(base + ".cache", "rb") as g:
            steps[name] = precompile.load(f.read(), g.read())
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    ctx = torch.enable_grad if a.workload == "train" else torch.no_grad
    times: dict[str, list[float]] = {k: [] for k in steps}
    with ctx():
        for f in steps.values():  # first calls and a warm-up, unmeasured
            for _ in range(3):
                f(*args)
        sync()
        for _ in range(a.blocks):
            for name, f in steps.items():
                for _ in range(a.calls):
                    t = time.perf_counter()
                    f(*args)
                    sync()
                    times[name].append((time.perf_counter() - t) * 1e3)
    row = {k: round(statistics.median(v), 3) for k, v in times.items()}
    row.update({f"{k}/eager": round(row[k] / row["eager"], 3) for k in steps if k != "eager"})
    print(json.dumps(row))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "median_ms": row}, f, indent=1)


if __name__ == "__main__":
    main()
