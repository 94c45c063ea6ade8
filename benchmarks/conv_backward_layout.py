"""What Note [backward convolutions see channels_last] changes on CNN training steps: the
precompile with the note (`after`) and without it (`before`: the graph's metadata as make_fx
traced it), against torch.compile (`tc`), each in a fresh process with empty compiler caches.

usage: python benchmarks/conv_backward_layout.py OUT [--models tv_resnet18,timm_resnet]
           [--variants before,after,tc] [--steps 30] [--device cuda|cpu] [--size real|tiny]

Per zoo model (`real` size on CUDA by default, `tiny` on CPU; its training step; a name of
benchmarks/workloads.py, e.g. cnn_bn_train, works too) and variant: cold time (precompile, or
torch.compile's compile + first call), the Triton kernels autotuned and the configurations
benchmarked, the 4-D buffers the generated code allocates in NCHW (channels > 1, spatial > 1),
the steady step (median of --steps calls, synchronized) and eager's steady step in the same
process, and the first step's loss against eager's on a copy of the model.
Writes OUT/conv_backward_layout.json and OUT/conv_backward_layout.md (also printed).
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_issue28 import child  # noqa: E402 (the fresh-process runner, empty caches)
from cold_profile import KERNEL_WATCH  # noqa: E402
from warm_first_call import DEVICE_START  # noqa: E402

_CHILD = DEVICE_START + KERNEL_WATCH + r"""
import copy, statistics
from workloads import NAMES, build
if {model!r} in NAMES:
    w = build({model!r}, DEVICE)
    m, args, fn = w.args[0].train(), list(w.args[1:]), w.fn
else:
    from zoo import models
    spec = models.build({model!r}, {size!r}, DEVICE)
    m = spec.model.train()
    args, fn = list(spec.args["train"]), spec.fns["train"]
m_ref = copy.deepcopy(m)
sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
def sync_time(f):
    t = time.perf_counter(); out = f(); sync(); return time.perf_counter() - t, out
def steady(f, n={steps}):
    return statistics.median(sync_time(f)[0] for _ in range(n))
def first_tensor(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out
variant = {variant!r}
t = time.perf_counter()
if variant == "tc":
    f = torch.compile(fn)
    first = f(m, *args); sync()
    cold = time.perf_counter() - t
else:
    from precompile_nb import precompile
    if variant == "before":
        import contextlib
        import precompile_nb.core._compat.inductor as ind
        ind.backward_convolutions_in_channels_last = lambda **k: contextlib.nullcontext()
    code, cache = precompile(fn, m, *args)
    cold = time.perf_counter() - t
    f = precompile.load(code, cache)
    first = f(m, *args); sync()
# the first step against eager's on the copy taken before it; SOURCES: the generated modules
# as Inductor loaded them, for either compiler
ref = first_tensor(fn(m_ref, *args))
err = (first_tensor(first).float() - ref.float()).abs().max().item()
nb_steady = steady(lambda: f(m, *args))
eager_steady = steady(lambda: fn(m_ref, *args))
from cold_profile import buffer_layouts
nchw = buffer_layouts(SOURCES)[0]
print(json.dumps({{"cold_s": cold, "autotuned": len(AUTOTUNED),
                  "configs": sum(a[1] for a in AUTOTUNED),
                  "nchw_buffers": nchw, "steady_ms": nb_steady * 1e3,
                  "eager_steady_ms": eager_steady * 1e3, "first_step_err": err}}))
"""


def main() -> None:
    out = os.path.abspath(sys.argv[1])
    opt = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    names = opt.get("--models", "tv_resnet18,timm_resnet").split(",")
    variants = opt.get("--variants", "before,after,tc").split(",")
    steps = int(opt.get("--steps", "30"))
    device = opt.get("--device", "cuda")
    size = opt.get("--size", "real" if device == "cuda" else "tiny")
    os.makedirs(out, exist_ok=True)
    res: dict = {}
    for name in names:
        for v in variants:
            r = child(_CHILD, out, timeout=1800, model=name, variant=v, steps=steps,
                      device=device, size=size)
            res.setdefault(name, {})[v] = r
            print(name, v, r, flush=True)
            with open(os.path.join(out, "conv_backward_layout.json"), "w") as f:
                json.dump(res, f, indent=1)
    lines = ["| model | variant | cold s | cold / tc | kernels autotuned | configs | NCHW buffers "
             "| steady ms | steady / tc | eager steady ms | first-step max err |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, rows in res.items():
        tc = rows.get("tc", {})
        for v, r in rows.items():
            if "error" in r:
                lines.append(f"| {name} | {v} | error: {r['error'][-200:]!r} |")
                continue
            ratio = (lambda k: f"{r[k] / tc[k]:.2f}" if tc.get(k) else "-")
            lines.append(f"| {name} | {v} | {r['cold_s']:.1f} | {ratio('cold_s')} | "
                         f"{r['autotuned']} | {r['configs']} | {r['nchw_buffers']} | "
                         f"{r['steady_ms']:.2f} | {ratio('steady_ms')} | "
                         f"{r['eager_steady_ms']:.2f} | {r['first_step_err']:.2e} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(out, "conv_backward_layout.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
