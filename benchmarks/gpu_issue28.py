"""Issue 28 on the GPU: a mark_dynamic artifact's warm load, and why efficientnet_b0's first
call after load is slow. Every measurement is a fresh process with empty compiler caches.

usage: python benchmarks/gpu_issue28.py OUT [--skip dynamic,effnet,tc]

dynamic  ResNet-style CNN (conv, BatchNorm, residual blocks, pooling, head; c=32, 32x32) in
         eval mode with a mark_dynamic batch, example batch 64: precompile (cold), eager's
         first call and load + first call at batch 64 alternating, 3 each (`import_s`: the
         import of precompile_nb inside load_s), load + first call at batch 17 (path, reason,
         kernels benchmarked at the first call), a load under cProfile (`load_top`: its
         functions of most inclusive time), torch.compile(dynamic=True) cold first call.
effnet   timm efficientnet_b0 inference (batch 8, 224x224): precompile, then eager's first
         call and load + first call, each under torch.profiler (the top ops of the first
         call, CPU and CUDA time), with load's own stages; and a second call of each.
Writes OUT/gpu_issue28.json and OUT/gpu_issue28.md (also printed).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cold_profile import TOP_FUNCTIONS  # noqa: E402 (a child's cProfile summary)
ROOT = os.path.dirname(HERE)

_PRELUDE = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
OUT = {out!r}
from tests.core.models import SmallResNet  # a ResNet-style CNN

def model(kind):
    torch.manual_seed(0)
    if kind == "dynamic":
        m = SmallResNet(32).cuda().eval()
        return m, torch.randn(64, 3, 32, 32, device="cuda")
    from zoo import models
    spec = models.build("timm_efficientnet", "real", "cuda")
    spec.model.eval()
    return spec.model, spec.args["infer"][0]

def infer(m, x):
    return m(x)

def sync_time(f):
    t = time.perf_counter(); out = f(); torch.cuda.synchronize(); return time.perf_counter() - t, out

def top_ops(prof, n=15):
    rows = []
    for e in sorted(prof.key_averages(), key=lambda e: -e.cpu_time_total)[:n]:
        rows.append([e.key[:60], e.count, round(e.cpu_time_total / 1e3, 2),
                     round(getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0)) / 1e3, 2)])
    return rows

autotune_runs = []
def count_autotuning():
    try:
        from torch._inductor.runtime import triton_heuristics as th
    except ImportError:
        return
    orig = th.CachingAutotuner.benchmark_all_configs
    def counting(self, *a, **k):
        autotune_runs.append(getattr(self.fn, "__name__", "?"))
        return orig(self, *a, **k)
    th.CachingAutotuner.benchmark_all_configs = counting
"""

_COLD = _PRELUDE + r"""
m, x = model({kind!r})
if {kind!r} == "dynamic":
    torch._dynamo.mark_dynamic(x, 0)
t = time.perf_counter()
from precompile_nb import precompile
with torch.no_grad():
    code, cache = precompile(infer, m, x)
s = time.perf_counter() - t
open(OUT + "/{kind}.py", "w").write(code); open(OUT + "/{kind}.cache", "wb").write(cache)
import ast
w = code.split("\n_PC_WARM = ", 1)
rec = ast.literal_eval(w[1].split("\n\n", 1)[0]) if len(w) == 2 else {{}}
print(json.dumps({{"precompile_s": s, "cache_mb": len(cache) / 1e6,
                  "autotuned_at": rec.get("autotuned_at"),
                  "triton_kernels": len(rec.get("triton_kernels", [])),
                  "triton_skipped": rec.get("triton_skipped")}}))
"""

_EAGER = _PRELUDE + r"""
m, x = model({kind!r})
if {batch} != x.shape[0]:
    x = torch.randn({batch}, *x.shape[1:], device="cuda")
with torch.no_grad():
    if {profile}:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            first, _ = sync_time(lambda: m(x))
        ops = top_ops(prof)
    else:
        first, _ = sync_time(lambda: m(x)); ops = []
    second, _ = sync_time(lambda: m(x))
print(json.dumps({{"first_call_s": first, "second_call_s": second, "top_ops": ops}}))
"""

_LOAD = _PRELUDE + TOP_FUNCTIONS + r"""
count_autotuning()
m, x = model({kind!r})
if {batch} != x.shape[0]:
    x = torch.randn({batch}, *x.shape[1:], device="cuda")
code = open(OUT + "/{kind}.py").read()
t = time.perf_counter()
data = open(OUT + "/{kind}.cache", "rb").read()
file_s = time.perf_counter() - t
t = time.perf_counter()
from precompile_nb import precompile
import_s = time.perf_counter() - t
import cProfile
prof = cProfile.Profile() if {cprofile} else None
if prof: prof.enable()
f = precompile.load(code, data)
if prof: prof.disable()
load_s = time.perf_counter() - t
# load's functions of most inclusive time (cProfile inflates them)
load_top = top_functions(prof, 40, inclusive=True) if prof else []
count_autotuning()  # if the load imported Inductor
if {profile}:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        first, out = sync_time(lambda: f(m, x))
    ops = top_ops(prof)
else:
    first, out = sync_time(lambda: f(m, x)); ops = []
second, _ = sync_time(lambda: f(m, x))
with torch.no_grad():
    ref = m(x)
st = f.__precompile_load__
print(json.dumps({{"file_read_s": file_s, "import_s": import_s, "load_top": load_top,
                  "load_s": load_s, "first_call_s": first,
                  "second_call_s": second, "path": st["path"], "reason": st["reason"],
                  "stages": st["seconds"], "cache_mb": len(data) / 1e6,
                  "autotune_runs": autotune_runs, "top_ops": ops,
                  "max_abs_err": (out - ref).abs().max().item()}}))
"""

_TC = _PRELUDE + r"""
m, x = model({kind!r})
torch._dynamo.mark_dynamic(x, 0)
t = time.perf_counter()
with torch.no_grad():
    out = torch.compile(infer)(m, x); torch.cuda.synchronize()
print(json.dumps({{"tc_cold_s": time.perf_counter() - t}}))
"""


def child(template: str, out: str, timeout: float = 300, **kw) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpu28_") as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TMPDIR=tmp)
        src = template.format(root=ROOT, bench=HERE, out=out, **kw)
        t = time.perf_counter()
        try:
            r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout} s"}
    if r.returncode != 0:
        return {"error": r.stderr[-2500:]}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["process_s"] = time.perf_counter() - t
    return res


def main() -> None:
    out = os.path.abspath(sys.argv[1])
    skip = set(sys.argv[sys.argv.index("--skip") + 1].split(",")) if "--skip" in sys.argv else set()
    os.makedirs(out, exist_ok=True)
    res: dict = {}

    def save() -> None:  # after every part: a run cut by a timeout keeps what it measured
        with open(os.path.join(out, "gpu_issue28.json"), "w") as f:
            json.dump(res, f, indent=1)

    if "dynamic" not in skip:
        d = res["dynamic"] = {"cold": child(_COLD, out, kind="dynamic")}
        print("dynamic cold", d["cold"], flush=True)
        for r in range(3):  # alternating: a first call's time spreads between processes
            d[f"eager_b64_r{r}"] = child(_EAGER, out, kind="dynamic", batch=64, profile=False)
            d[f"load_b64_r{r}"] = child(_LOAD, out, kind="dynamic", batch=64, profile=False,
                                        cprofile=False)
        d["load_b17"] = child(_LOAD, out, kind="dynamic", batch=17, profile=False,
                              cprofile=False)
        d["load_b64_cprofile"] = child(_LOAD, out, kind="dynamic", batch=64, profile=False,
                                       cprofile=True)
        for k in ("load_b64_r0", "load_b17"):
            print(f"dynamic {k}", {a: v for a, v in d[k].items()
                                   if a not in ("top_ops", "load_top")}, flush=True)
        save()
        if "tc" not in skip:
            d["tc_cold"] = child(_TC, out, kind="dynamic")
            save()
    if "effnet" not in skip:
        e = res["effnet"] = {"cold": child(_COLD, out, kind="effnet")}
        print("effnet cold", e["cold"], flush=True)
        save()
        e["eager"] = child(_EAGER, out, kind="effnet", batch=8, profile=True)
        e["load"] = child(_LOAD, out, kind="effnet", batch=8, profile=True, cprofile=False)
        save()
        e["load_unprofiled"] = child(_LOAD, out, kind="effnet", batch=8, profile=False,
                                    cprofile=False)
    save()
    text = report(res)
    print(text)
    with open(os.path.join(out, "gpu_issue28.md"), "w") as f:
        f.write(text)


def report(res: dict) -> str:
    lines = []
    d = res.get("dynamic")
    if d:
        lines.append("## mark_dynamic CNN (batch 64 example)")
        for k, v in d.items():
            v = {kk: vv for kk, vv in v.items() if kk not in ("top_ops", "load_top")}
            lines.append(f"- {k}: {json.dumps(v)[:900]}")
        eagers = sorted(v["first_call_s"] for k, v in d.items()
                        if k.startswith("eager_b64_r") and "first_call_s" in v)
        loads = sorted(v["load_s"] + v["first_call_s"] for k, v in d.items()
                       if k.startswith("load_b64_r") and "load_s" in v)
        if eagers and loads:
            med = lambda xs: xs[len(xs) // 2]  # noqa: E731
            lines.append(f"- load + first call / eager first call (medians of "
                         f"{len(loads)} / {len(eagers)} fresh processes): "
                         f"{med(loads):.3f} / {med(eagers):.3f} s = "
                         f"{med(loads) / med(eagers):.2f}")
    e = res.get("effnet")
    if e:
        lines.append("## efficientnet_b0 inference (batch 8)")
        for k in ("cold", "load_unprofiled"):
            lines.append(f"- {k}: {json.dumps({a: b for a, b in e.get(k, {}).items() if a != 'top_ops'})[:900]}")
        for k in ("eager", "load"):
            v = e.get(k, {})
            lines.append(f"- {k}: first call {v.get('first_call_s')}, second {v.get('second_call_s')}"
                         f"{', error ' + v['error'][-300:] if 'error' in v else ''}")
            lines.append("  | op | calls | CPU ms | CUDA ms |\n  | --- | ---: | ---: | ---: |")
            lines += [f"  | {a} | {b} | {c} | {dd} |" for a, b, c, dd in v.get("top_ops", [])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
