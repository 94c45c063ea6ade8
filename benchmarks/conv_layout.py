"""Why a CNN with depthwise convolutions starts slowly on the GPU after a warm load: the
first call's time in cuDNN, with Inductor's channels-last layout optimization on (its default)
and off, against eager's first call in NCHW and in channels_last. Fresh processes, empty
compiler caches; CUDA only.

usage: python benchmarks/conv_layout.py OUT [--models timm_efficientnet,timm_mobilenetv3]

Per zoo model (`real` size, inference): eager first call NCHW and channels_last; precompile
with channels_last forced (`torch._inductor.config.force_layout_optimization`) and as
precompile_nb decides (Note [depthwise convolutions keep NCHW]) (precompile s); each artifact's fresh-process load + first
call, and steady state (median of 30 calls) against eager's in the same process.
Writes OUT/conv_layout.json and OUT/conv_layout.md (also printed).
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
spec = models.build({model!r}, "real", "cuda"); m = spec.model.eval(); x = spec.args["infer"][0]
def sync_time(f):
    t = time.perf_counter(); out = f(); torch.cuda.synchronize(); return time.perf_counter() - t, out
def steady(f, n=30):
    ts = []
    for _ in range(n):
        ts.append(sync_time(f)[0])
    return statistics.median(ts)
def infer(m, x):
    return m(x)
"""

_EAGER = _PRE + r"""
if {cl}:
    m = m.to(memory_format=torch.channels_last); x = x.contiguous(memory_format=torch.channels_last)
with torch.no_grad():
    first, _ = sync_time(lambda: m(x)); second, _ = sync_time(lambda: m(x))
print(json.dumps({{"first_call_s": first, "second_call_s": second}}))
"""

_COLD = _PRE + r"""
import torch._inductor.config as ic
t = time.perf_counter()
from precompile_nb import precompile
with torch.no_grad(), ic.patch(force_layout_optimization={layout}):
    code, cache = precompile(infer, m, x)
s = time.perf_counter() - t
open(OUT + "/{model}_{layout}.py", "w").write(code)
open(OUT + "/{model}_{layout}.cache", "wb").write(cache)
print(json.dumps({{"precompile_s": s, "channels_last_in_code": code.count("channels_last")}}))
"""

_LOAD = _PRE + r"""
from precompile_nb import precompile
code = open(OUT + "/{model}_{layout}.py").read(); data = open(OUT + "/{model}_{layout}.cache", "rb").read()
t = time.perf_counter(); f = precompile.load(code, data); load_s = time.perf_counter() - t
first, out = sync_time(lambda: f(m, x))
with torch.no_grad():
    ref = m(x)
    eager_steady = steady(lambda: m(x))
nb_steady = steady(lambda: f(m, x))
print(json.dumps({{"load_s": load_s, "first_call_s": first, "path": f.__precompile_load__["path"],
                  "steady_nb_s": nb_steady, "steady_eager_s": eager_steady,
                  "max_abs_err": (out - ref).abs().max().item()}}))
"""


def main() -> None:
    out = sys.argv[1]
    names = "timm_efficientnet,timm_mobilenetv3"
    if "--models" in sys.argv:
        names = sys.argv[sys.argv.index("--models") + 1]
    os.makedirs(out, exist_ok=True)
    res: dict = {}
    lines = ["| model | eager first NCHW s | eager first channels_last s | channels_last | "
             "precompile s | load + first call s | / eager first NCHW | steady nb/eager |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for name in names.split(","):
        r = res[name] = {}
        for cl in (False, True):
            r[f"eager_cl{cl}"] = child(_EAGER, out, model=name, cl=cl)
        for layout in (True, False):
            r[f"cold_{layout}"] = child(_COLD, out, model=name, layout=layout)
            r[f"load_{layout}"] = child(_LOAD, out, model=name, layout=layout)
        json.dump(res, open(os.path.join(out, "conv_layout.json"), "w"), indent=1)
        e0 = r["eager_clFalse"].get("first_call_s", float("nan"))
        e1 = r["eager_clTrue"].get("first_call_s", float("nan"))
        for layout in (True, False):
            c, ld = r[f"cold_{layout}"], r[f"load_{layout}"]
            if "error" in c or "error" in ld:
                lines.append(f"| {name} | {e0:.3f} | {e1:.3f} | {layout} | error: "
                             f"{(c.get('error') or ld.get('error'))[-200:]!r} | | | |")
                continue
            warm = ld["load_s"] + ld["first_call_s"]
            lines.append(f"| {name} | {e0:.3f} | {e1:.3f} | {'forced' if layout else 'default'} | "
                         f"{c['precompile_s']:.1f} | {warm:.3f} ({ld['path']}) | {warm / e0:.2f} | "
                         f"{ld['steady_nb_s'] / ld['steady_eager_s']:.2f} |")
    text = "\n".join(lines)
    open(os.path.join(out, "conv_layout.md"), "w").write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
