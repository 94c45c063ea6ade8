"""Which convolutions make a CNN's first call slow on the GPU: every aten.convolution and
aten.convolution_backward of eager's first and second call, timed one by one (synchronized
before and after), grouped by kind (depthwise, 1x1, other) and direction, in NCHW and in
channels_last. Fresh process per (model, layout), empty compiler caches; CUDA only.

usage: python benchmarks/conv_first_call.py OUT [--models timm_convnext,timm_efficientnet]
           [--workload train|infer] [--layouts nchw,channels_last]

A warm load runs the convolutions through the same aten ops (Inductor calls them as extern
kernels), in the layout Inductor chose: channels_last for a graph with a backward. This says
how much of a first call is each kind's (cuDNN's per-configuration first-use cost), which
decides what a load could avoid. Writes OUT/conv_first_call.json and .md (also printed).
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from conv_layout import _PRE  # noqa: E402 (a zoo model at real size on the GPU: m, args, fn)
from gpu_issue28 import child  # noqa: E402 (the fresh-process runner, empty caches)

_CHILD = _PRE + r"""
from torch.utils._python_dispatch import TorchDispatchMode
if {layout!r} == "channels_last":
    m = m.to(memory_format=torch.channels_last)
    args[0] = args[0].contiguous(memory_format=torch.channels_last)
aten = torch.ops.aten

def kind(w, groups):
    if groups > 1 and w.size(1) == 1:
        return "depthwise %dx%d" % tuple(w.shape[-2:])
    if tuple(w.shape[-2:]) == (1, 1) and groups == 1:
        return "1x1"
    return "other %dx%d g%d" % (*w.shape[-2:], groups)

class Timed(TorchDispatchMode):
    def __init__(self):
        super().__init__(); self.rows = {{}}
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {{}}
        if func in (aten.convolution.default, aten.convolution_backward.default):
            w = args[1] if func is aten.convolution.default else args[2]
            groups = args[8] if func is aten.convolution.default else args[9]
            key = ("fwd" if func is aten.convolution.default else "bwd") + " " + kind(w, groups)
            torch.cuda.synchronize(); t = time.perf_counter()
            out = func(*args, **kwargs)
            torch.cuda.synchronize(); dt = time.perf_counter() - t
            r = self.rows.setdefault(key, [0, 0.0]); r[0] += 1; r[1] += dt
            return out
        return func(*args, **kwargs)

res = {{}}
for call in ("first", "second"):
    mode = Timed()
    torch.cuda.synchronize(); t = time.perf_counter()
    with ctx(), mode:
        fn(m, *args)
    torch.cuda.synchronize()
    res[call] = {{"total_s": time.perf_counter() - t, "convs": mode.rows}}
print(json.dumps(res))
"""


def main() -> None:
    out = os.path.abspath(sys.argv[1])
    opt = {a: sys.argv[sys.argv.index(a) + 1] for a in ("--models", "--workload", "--layouts")
           if a in sys.argv}
    models = opt.get("--models", "timm_convnext,timm_efficientnet").split(",")
    workload = opt.get("--workload", "train")
    layouts = opt.get("--layouts", "nchw,channels_last").split(",")
    os.makedirs(out, exist_ok=True)
    res: dict = {}
    lines = [f"eager {workload}, H200, fresh process per row; seconds, summed per kind of "
             "convolution (count in brackets)", "",
             "| model | layout | first call s | of it in convolutions | by kind (first call) "
             "| second call s |", "| --- | --- | ---: | ---: | --- | ---: |"]
    for model in models:
        for layout in layouts:
            r = res[f"{model}:{layout}"] = child(_CHILD, out, timeout=240, model=model,
                                                 workload=workload, layout=layout)
            with open(os.path.join(out, "conv_first_call.json"), "w") as f:
                json.dump(res, f, indent=1)
            if "error" in r:
                lines.append(f"| {model} | {layout} | error: {r['error'][-200:]!r} | | | |")
                continue
            convs = r["first"]["convs"]
            by = ", ".join(f"{k} {v[1]:.3f} ({v[0]})" for k, v in
                           sorted(convs.items(), key=lambda kv: -kv[1][1]))
            lines.append(f"| {model} | {layout} | {r['first']['total_s']:.3f} | "
                         f"{sum(v[1] for v in convs.values()):.3f} | {by} | "
                         f"{r['second']['total_s']:.3f} |")
            print(lines[-1], flush=True)
    with open(os.path.join(out, "conv_first_call.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
