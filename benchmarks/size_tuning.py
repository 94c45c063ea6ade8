"""Note [a configuration per size] on the GPU: a graph with a dynamic dim tuned at the example's
size only (`one`, as before the note) against tuned at several sizes (`sized`: the example's,
the range's ends and the sizes below), against torch.compile(dynamic=True) (`tc`, tuned at its
first call's size, the example's) and eager: one fresh process per workload with empty
compiler caches, every variant compiled and loaded in it, then timed at each size in 7 rounds
that alternate the variants: wall ms a call (CUDA events around 20 calls, median of rounds)
and the kernels' own GPU time a call (torch.profiler, summed over 10 calls).

usage: python benchmarks/size_tuning.py OUT [--workloads softmax,mlp,cnn]
                                            [--variants one,sized,tc,eager]

softmax  torch.softmax over rows of 4096, rows dynamic: example 256, sizes 1, 16, 4096, 16384
mlp      LayerNorm + Linear(1024, 4096) + GELU + Linear back, tokens dynamic: example 512,
         sizes 1, 64, 4096, 16384
cnn      the tests' SmallResNet (conv, BatchNorm, two residual blocks) in eval mode on
         32x32, batch dynamic: example 64, sizes 1, 8, 256, 1024
Writes OUT/size_tuning.json and OUT/size_tuning.md (also printed): precompile seconds, the
kernels with a configuration per size (and each kernel's choice at each point, in the json),
the load path, the wall and kernel time at each size and their ratios to `one`.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_issue28 import child  # noqa: E402 (the fresh-process runner, empty caches)
from warm_first_call import DEVICE_START  # noqa: E402

SIZES = {"softmax": (256, [1, 16, 4096, 16384]), "mlp": (512, [1, 64, 4096, 16384]),
         "cnn": (64, [1, 8, 256, 1024])}

_CHILD = DEVICE_START + r"""
import ast, statistics
from torch import nn
from torch._dynamo import mark_dynamic
import precompile_nb
from precompile_nb.core import tuning, warm
kind, variants, example, sizes = {kind!r}, {variants!r}, {example!r}, {sizes!r}
torch.manual_seed(0)
if kind == "softmax":
    m, shape = nn.Identity(), (4096,)
    fn = lambda m, x: torch.softmax(m(x), -1)
elif kind == "mlp":
    m, shape = nn.Sequential(nn.LayerNorm(1024), nn.Linear(1024, 4096), nn.GELU(),
                             nn.Linear(4096, 1024)).cuda().eval(), (1024,)
    fn = lambda m, x: m(x)
else:
    from tests.core.models import SmallResNet
    m, shape = SmallResNet().cuda().eval(), (3, 32, 32)
    fn = lambda m, x: m(x)
x = torch.randn(example, *shape, device="cuda")
mark_dynamic(x, 0)
res, calls = {{}}, {{}}
points, add = tuning._points, tuning._add
for v in variants:
    r = res[v] = {{}}
    if v in ("one", "sized"):
        # `one`: tuned at the example's size only, as before Note [a configuration per size]
        tuning._points = (lambda c, dims, asked: ([{{}}], [])) if v == "one" else points
        chosen = r["chosen"] = []
        def log_add(choices, got, first=False, chosen=chosen):  # each kernel's choice per point
            chosen.append([[k, ch.numel, ch.record["hash"][:8]] for k, ch in sorted(got.items())])
            return add(choices, got, first)
        tuning._add = log_add
        t = time.perf_counter()
        code, cache = precompile_nb.precompile(fn, m, x, tune_sizes=[] if v == "one"
                                               else [s for s in sizes if s != example])
        r["precompile_s"] = time.perf_counter() - t
        rec = ast.literal_eval(code.split("\n" + warm.WARM_NAME + " = ", 1)[1].split("\n\n")[0])
        r["tuned_at"] = [p["x"][0] for p in rec.get("autotuned_at", [])]
        r["tuned_kernels"] = rec.get("autotuned_kernels")
        r["by_size"] = [k["function"] + ": " + ", ".join(str(b["upto"]) for b in
                                                         k["by_size"]["buckets"])
                        for k in rec["triton_kernels"] if "by_size" in k]
        f = precompile_nb.precompile.load(code, cache)
        r["path"] = f.__precompile_load__["path"]
        calls[v] = lambda xi, f=f: f(m, xi)
    elif v == "tc":
        g = torch.compile(fn, dynamic=True)
        t = time.perf_counter()
        with torch.no_grad():
            g(m, x)
        torch.cuda.synchronize()
        r["precompile_s"] = time.perf_counter() - t
        calls[v] = lambda xi, g=g: g(m, xi)
    else:
        calls[v] = lambda xi: fn(m, xi)
tuning._points, tuning._add = points, add
from torch.profiler import ProfilerActivity, profile
with torch.no_grad():
    for n in [example, *sizes]:
        xi = torch.randn(n, *shape, device="cuda")
        ref = fn(m, xi)
        wall = {{v: [] for v in variants}}
        for v in variants:
            err = (calls[v](xi) - ref).abs().max().item()
            res[v]["max_err"] = max(res[v].get("max_err", 0.0), err)
            for _ in range(5):
                calls[v](xi)
        for _ in range(7):  # rounds, the variants alternating
            for v in variants:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize(); a.record()
                for _ in range(20):
                    calls[v](xi)
                b.record(); torch.cuda.synchronize()
                wall[v].append(a.elapsed_time(b) / 20)
        for v in variants:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    calls[v](xi)
                torch.cuda.synchronize()
            gpu = sum(e.self_device_time_total for e in prof.key_averages()) / 10
            res[v].setdefault("wall_ms", {{}})[str(n)] = statistics.median(wall[v])
            res[v].setdefault("gpu_us", {{}})[str(n)] = gpu
print(json.dumps(res))
"""


def main() -> None:
    out = os.path.abspath(sys.argv[1])
    arg = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    workloads = arg.get("--workloads", "softmax,mlp,cnn").split(",")
    variants = arg.get("--variants", "one,sized,tc,eager").split(",")
    os.makedirs(out, exist_ok=True)
    res: dict = {}
    for w in workloads:
        example, sizes = SIZES[w]
        res[w] = child(_CHILD, out, timeout=500, device="cuda", kind=w, variants=variants,
                       example=example, sizes=sizes)
        print(w, json.dumps(res[w])[:3000], flush=True)
        with open(os.path.join(out, "size_tuning.json"), "w") as f:
            json.dump(res, f, indent=1)
    lines = ["| workload | variant | precompile s | tuned at | kernels by size | path | "
             + " | ".join(f"size {i}: wall ms / kernels us" for i in range(5)) + " |",
             "| --- | --- | ---: | --- | ---: | --- |" + " ---: |" * 5]
    for w, r in res.items():
        if "error" in r:
            lines.append(f"| {w} | error: {r['error'][-300:]!r} |")
            continue
        one = r.get("one", {})
        for v, rv in r.items():
            if not isinstance(rv, dict) or "wall_ms" not in rv:
                continue
            cells = []
            for n, ms in rv["wall_ms"].items():
                us = rv["gpu_us"][n]
                ratio = (f" ({ms / one['wall_ms'][n]:.2f}x / {us / one['gpu_us'][n]:.2f}x one)"
                         if one and v != "one" else "")
                cells.append(f"{n}: {ms:.3f} / {us:.1f}{ratio}")
            lines.append(f"| {w} | {v} | {rv.get('precompile_s', 0):.1f} | "
                         f"{rv.get('tuned_at', '')} | {len(rv.get('by_size', []))} | "
                         f"{rv.get('path', '')} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "size_tuning.md"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
