"""Why a CNN with depthwise convolutions starts slowly on the GPU after a warm load: the
first call's time in cuDNN, with Inductor's channels-last layout optimization on (its default)
and off, against eager's first call in NCHW and in channels_last. Fresh processes, empty
compiler caches; CUDA only.

usage: python benchmarks/conv_layout.py OUT [--models timm_efficientnet,timm_mobilenetv3]
           [--workload infer|train] [--layouts default,cl_depthwise,nchw,dw7_nchw]

Per zoo model (`real` size, inference or the training step): eager first call NCHW and
channels_last; precompile (precompile s) with channels_last forced
(`torch._inductor.config.force_layout_optimization`) and as precompile_nb decides (Note
[depthwise convolutions keep NCHW]), or for the training step as precompile_nb decides
(channels_last, depthwise convolutions in NCHW: Note [depthwise convolutions of a CUDA training
step run in NCHW]), with every convolution in channels_last (`cl_depthwise`: that rule off,
PRECOMPILE_NB_DEPTHWISE_NCHW=0), with the rule widened to 7x7 kernels (`dw7_nchw`) and
with Inductor's layout optimization off (`nchw`);
`--layouts` picks some of them; each artifact's fresh-process load + first
call, and steady state (median of 30 calls) against eager's in the same process.
Writes OUT/conv_layout_WORKLOAD.json and OUT/conv_layout_WORKLOAD.md (also printed).
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_issue28 import child  # noqa: E402 (the fresh-process runner, empty caches)

_PRE = r"""
import json, os, statistics, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
OUT = {out!r}
from zoo import models
import contextlib
W = {workload!r}
spec = models.build({model!r}, "real", "cuda")
m = spec.model.train() if W == "train" else spec.model.eval()
args, fn = list(spec.args[W]), spec.fns[W]
ctx = (lambda: contextlib.nullcontext()) if W == "train" else torch.no_grad
def sync_time(f):
    t = time.perf_counter(); out = f(); torch.cuda.synchronize(); return time.perf_counter() - t, out
def steady(f, n=30):
    ts = []
    for _ in range(n):
        ts.append(sync_time(f)[0])
    return statistics.median(ts)
"""

_EAGER = _PRE + r"""
if {cl}:
    m = m.to(memory_format=torch.channels_last)
    args[0] = args[0].contiguous(memory_format=torch.channels_last)
with ctx():
    first, _ = sync_time(lambda: fn(m, *args)); second, _ = sync_time(lambda: fn(m, *args))
print(json.dumps({{"first_call_s": first, "second_call_s": second}}))
"""

_COLD = _PRE + r"""
import torch._inductor.config as ic
os.environ.update({env!r})
{pre}
t = time.perf_counter()
from precompile_nb import precompile
with ctx(), ic.patch({patch!r}):
    code, cache = precompile(fn, m, *args)
s = time.perf_counter() - t
open(OUT + "/{model}_{layout}.py", "w").write(code)
open(OUT + "/{model}_{layout}.cache", "wb").write(cache)
print(json.dumps({{"precompile_s": s, "channels_last_in_code": code.count("channels_last")}}))
"""

_LOAD = _PRE + r"""
from precompile_nb import precompile
code = open(OUT + "/{model}_{layout}.py").read(); data = open(OUT + "/{model}_{layout}.cache", "rb").read()
t = time.perf_counter(); f = precompile.load(code, data); load_s = time.perf_counter() - t
with ctx():
    first, out = sync_time(lambda: f(m, *args))
    ref = fn(m, *args)
    eager_steady = steady(lambda: fn(m, *args))
    nb_steady = steady(lambda: f(m, *args))
out, ref = out[0] if isinstance(out, tuple) else out, ref[0] if isinstance(ref, tuple) else ref
print(json.dumps({{"load_s": load_s, "first_call_s": first, "path": f.__precompile_load__["path"],
                  "steady_nb_s": nb_steady, "steady_eager_s": eager_steady,
                  "max_abs_err": (out - ref).abs().max().item()}}))
"""


def main() -> None:
    out = sys.argv[1]
    names = "timm_efficientnet,timm_mobilenetv3"
    if "--models" in sys.argv:
        names = sys.argv[sys.argv.index("--models") + 1]
    workload = sys.argv[sys.argv.index("--workload") + 1] if "--workload" in sys.argv else "infer"
    layouts = {"forced": ({"force_layout_optimization": True}, {}), "default": ({}, {})}
    if workload == "train":  # as precompile_nb decides (channels_last but depthwise NCHW),
        # every convolution channels_last (Inductor's own choice), NCHW throughout
        layouts = {"default": ({}, {}), "cl_depthwise": ({}, {"PRECOMPILE_NB_DEPTHWISE_NCHW": "0"}),
                   "nchw": ({"layout_optimization": False}, {}),
                   # the rule widened to 7x7 depthwise kernels (ConvNeXt's): an experiment
                   "dw7_nchw": ({}, {}, "import precompile_nb.core._compat.conv_layout as cl\n"
                                        "cl._NCHW_MAX_KERNEL = 7")}
    if "--layouts" in sys.argv:
        keep = sys.argv[sys.argv.index("--layouts") + 1].split(",")
        layouts = {k: v for k, v in layouts.items() if k in keep}
    os.makedirs(out, exist_ok=True)
    res: dict = {}
    lines = ["| model | eager first NCHW s | eager first channels_last s | channels_last | "
             "precompile s | load + first call s | / eager first NCHW | steady nb/eager |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for name in names.split(","):
        r = res[name] = {}
        for cl in (False, True):
            r[f"eager_cl{cl}"] = child(_EAGER, out, model=name, cl=cl, workload=workload)
        for layout, (patch, env, *pre) in layouts.items():
            kw = dict(model=name, layout=layout, workload=workload)
            r[f"cold_{layout}"] = child(_COLD, out, patch=patch, env=env, pre="".join(pre), **kw)
            r[f"load_{layout}"] = child(_LOAD, out, **kw)
        json.dump(res, open(os.path.join(out, f"conv_layout_{workload}.json"), "w"), indent=1)
        e0 = r["eager_clFalse"].get("first_call_s", float("nan"))
        e1 = r["eager_clTrue"].get("first_call_s", float("nan"))
        for layout in layouts:
            c, ld = r[f"cold_{layout}"], r[f"load_{layout}"]
            if "error" in c or "error" in ld:
                lines.append(f"| {name} | {e0:.3f} | {e1:.3f} | {layout} | error: "
                             f"{(c.get('error') or ld.get('error'))[-200:]!r} | | | |")
                continue
            warm = ld["load_s"] + ld["first_call_s"]
            lines.append(f"| {name} {workload} | {e0:.3f} | {e1:.3f} | {layout} | "
                         f"{c['precompile_s']:.1f} | {warm:.3f} ({ld['path']}) | {warm / e0:.2f} | "
                         f"{ld['steady_nb_s'] / ld['steady_eager_s']:.2f} |")
    text = "\n".join(lines)
    open(os.path.join(out, f"conv_layout_{workload}.md"), "w").write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
