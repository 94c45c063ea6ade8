"""Where a warm load's time goes, against eager's own first call, for models with many kernels
(issue 28: warm load + first call <= 1.1x eager's first call in a fresh process).

usage: python benchmarks/warm_first_call.py [--device cpu|cuda] [--models a,b] [--size tiny|real]
                                            [--workload infer|train]
                                            [--repeats N] [--out DIR] [--timeout S] [--reuse]

Models are the zoo's (`benchmarks/zoo/models.py`), inference (`infer`) under no_grad or, with
`--workload train`, the training step (forward, loss, backward); default
timm_mobilenetv3 and timm_efficientnet. `suite:NAME` is the benchmark suite's workload NAME
(`benchmarks/workloads.py`, its sizes and grad mode; --size and --workload do not apply).
Per model, each in a fresh process with empty compiler caches (a new TORCHINDUCTOR_CACHE_DIR,
TRITON_CACHE_DIR and TMPDIR):

  cold     precompile(fn, model, x); saves the pair; kernels (C++ / Triton), code and cache size
  eager    the model's first call, then its second (the first pays what any first call does:
           oneDNN / cuDNN / cuBLAS starting, lazily loaded CUDA kernels)
  warm     `import precompile_nb` + precompile.load(code, cache) + first call, then a second
           call; load's own stages (`__precompile_load__["seconds"]`) and the path taken
  profile  the warm process again under cProfile: the time of load + first call split into
           import precompile_nb, load's stages, kernel libraries / cubins loaded (count and
           seconds), the first call itself; and the top functions by own time
  eager_profile  eager's first call under cProfile, its top functions
  warm_no_bytecode  warm, with the cache less python_code's bytecode (Note [bytecode in the
           cache]): load compiles python_code as before that note

eager and warm alternate, --repeats times each; the ratio is median(warm) / median(eager),
both timed from right after the model and input are built on the device (after `import
torch`, and on CUDA after CUDA's initialisation) to the synchronized first result.
Writes DIR/warm_first_call.json and DIR/warm_first_call.md (also printed); the pairs are kept
in DIR/work/MODEL/nb.{py,cache}.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# a child's start: the repository and benchmarks/ first, then the device ready (CUDA started,
# or one CPU thread); also conv_backward_layout.py's
DEVICE_START = r"""
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
DEVICE = {device!r}
if DEVICE == "cuda":
    torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
else:
    torch.set_num_threads(1)
"""

_PRELUDE = DEVICE_START + r"""
if {model!r}.startswith("suite:"):  # a benchmark workload (workloads.py), its own sizes
    import workloads
    w = workloads.build({model!r}[len("suite:"):], DEVICE)
    fn, args = w.fn, w.args
    grad = torch.no_grad if w.inference else torch.enable_grad
else:
    from zoo import models
    spec = models.build({model!r}, {size!r}, DEVICE)
    W = {workload!r}
    spec.model.train() if W == "train" else spec.model.eval()
    fn, args = spec.fns[W], (spec.model, *spec.args[W])
    grad = torch.enable_grad if W == "train" else torch.no_grad
WORK = {work!r}

def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()

def timed(f):
    t = time.perf_counter()
    with grad():
        out = f(*args)
    sync()
    return time.perf_counter() - t, out
"""

_COLD = _PRELUDE + r"""
from precompile_nb import precompile
t = time.perf_counter()
with grad():
    code, cache = precompile(fn, *args)
s = time.perf_counter() - t
open(WORK + "/nb.py", "w").write(code); open(WORK + "/nb.cache", "wb").write(cache)
print(json.dumps({{"precompile_s": s, "code_kb": len(code) / 1e3, "cache_mb": len(cache) / 1e6,
                  "cpp_kernels": code.count("async_compile.cpp_pybinding("),
                  "triton_kernels": code.count("async_compile.triton("),
                  "extern_calls": code.count("extern_kernels.")}}))
"""

_EAGER = _PRELUDE + r"""
prof = None
if {profile}:
    import cProfile
    prof = cProfile.Profile(); prof.enable()
first, _ = timed(fn)
if prof:
    prof.disable()
second, _ = timed(fn)
res = {{"first_call_s": first, "second_call_s": second}}
if prof:
    res["top"] = top(prof)
print(json.dumps(res))
"""

_WARM = _PRELUDE + r"""
code = open(WORK + "/nb.py").read()
# nb_text.cache: the same cache without python_code's bytecode (load compiles python_code)
data = open(WORK + ("/nb_text.cache" if {no_bytecode} else "/nb.cache"), "rb").read()
loaded = {{"libraries": [0, 0.0], "cubins": [0, 0.0]}}
prof = None
if {profile}:
    import cProfile
    prof = cProfile.Profile()
    from precompile_nb.core import _compat as cw  # (imports nothing heavy)
    for name, kind in (("load_cpp_kernel", "libraries"), ("load_cubin", "cubins")):
        def counted(*a, _f=getattr(cw, name), _k=kind, **k):
            t = time.perf_counter()
            try:
                return _f(*a, **k)
            finally:
                loaded[_k][0] += 1; loaded[_k][1] += time.perf_counter() - t
        setattr(cw, name, counted)
    prof.enable()
before = set(sys.modules)
t = time.perf_counter()
from precompile_nb import precompile
t_import = time.perf_counter() - t
f = precompile.load(code, data)
t_load = time.perf_counter() - t
first, out = timed(f)
total = time.perf_counter() - t
if prof:
    prof.disable()
second, _ = timed(f)
with grad():
    ref = fn(*args)
st = f.__precompile_load__
res = {{"import_s": t_import, "load_s": t_load - t_import, "first_call_s": first,
       "total_s": total, "second_call_s": second, "path": st["path"], "reason": st["reason"],
       "stages": st["seconds"], "max_abs_err": max(
           (a - b).abs().max().item() for a, b in zip(torch.utils._pytree.tree_leaves(out),
                                                      torch.utils._pytree.tree_leaves(ref))
           if isinstance(a, torch.Tensor)),
       "new_modules": len(set(sys.modules) - before),
       "heavy": sorted(m for m in set(sys.modules) - before
                       if m in ("torch._inductor", "torch._dynamo", "sympy", "triton"))}}
if prof:
    res["top"] = top(prof)
    res["loaded"] = loaded
print(json.dumps(res))
"""

_TOP = r"""
def top(prof, n=25):
    import pstats
    rows = []
    for (file, line, name), (cc, nc, tt, ct, _) in pstats.Stats(prof).stats.items():
        rows.append((tt, ct, nc, f"{{os.path.basename(file)}}:{{line}}:{{name}}"))
    rows.sort(reverse=True)
    return [[round(tt, 4), round(ct, 4), nc, name] for tt, ct, nc, name in rows[:n]]
"""


def child(template: str, model: str, work: str, args: argparse.Namespace,
          profile: bool = False, no_bytecode: bool = False) -> dict:
    """One fresh process with empty compiler caches; its one line of JSON."""
    with tempfile.TemporaryDirectory(prefix="warm1st_") as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TMPDIR=tmp)
        if args.device == "cpu":
            env["OMP_NUM_THREADS"] = "1"
        env.pop("PYTHONPATH", None)
        # bytecode of the packages cached, as an installed package has its .pyc (python_code
        # itself has none: compiling it is part of load)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(os.path.dirname(work), "pycache")
        prelude_end = template.index("\n", template.index("WORK = ")) + 1
        src = template[:prelude_end] + _TOP + template[prelude_end:]
        src = src.format(root=ROOT, bench=HERE, device=args.device, model=model,
                         size=args.size, work=work, profile=profile, workload=args.workload,
                         no_bytecode=no_bytecode)
        try:
            r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True,
                               text=True, timeout=args.timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {args.timeout} s"}
    if r.returncode != 0:
        return {"error": r.stderr[-2500:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _without_bytecode(work: str) -> None:
    """nb_text.cache: nb.cache less its bytecode entry, made here (not in the timed child,
    which would import precompile_nb before its clock starts)."""
    sys.path.insert(0, ROOT)
    from precompile_nb.core import cache as C

    with open(os.path.join(work, "nb.py")) as f:
        code = f.read()
    with open(os.path.join(work, "nb.cache"), "rb") as f:
        data = f.read()
    tag, header = C.read_tag(data)
    files = tuple((r, p, bytes(d)) for r, p, d in C.read_files(data, header)
                  if r != C.BYTECODE_ROOT)
    with open(os.path.join(work, "nb_text.cache"), "wb") as f:
        f.write(C.pack(code, tag.backend, files))


def measure(model: str, work: str, args: argparse.Namespace) -> dict:
    reuse = args.reuse and os.path.exists(os.path.join(work, "cold.json"))
    if reuse:
        with open(os.path.join(work, "cold.json")) as f:
            res: dict = {"cold": json.load(f)}
    else:
        res = {"cold": child(_COLD, model, work, args)}
        with open(os.path.join(work, "cold.json"), "w") as f:
            json.dump(res["cold"], f)
    print(f"{model} cold{' (reused)' if reuse else ''}: {res['cold']}", flush=True)
    if "error" in res["cold"]:
        return res
    _without_bytecode(work)
    res["eager"], res["warm"], res["warm_no_bytecode"] = [], [], []
    for _ in range(args.repeats):
        res["eager"].append(child(_EAGER, model, work, args))
        res["warm"].append(child(_WARM, model, work, args))
        res["warm_no_bytecode"].append(child(_WARM, model, work, args, no_bytecode=True))
    res["profile"] = child(_WARM, model, work, args, profile=True)
    res["eager_profile"] = child(_EAGER, model, work, args, profile=True)
    eager = [r["first_call_s"] for r in res["eager"] if "first_call_s" in r]
    warm = [r["total_s"] for r in res["warm"] if "total_s" in r]
    if eager and warm:
        res["ratio"] = statistics.median(warm) / statistics.median(eager)
    print(report_model(model, res), flush=True)
    return res


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1e3:.0f} ms"


def report_model(model: str, res: dict) -> str:
    c = res["cold"]
    lines = [f"## {model} ({c.get('cpp_kernels')} C++ / {c.get('triton_kernels')} Triton "
             f"kernels, {c.get('extern_calls')} extern calls, python_code "
             f"{c.get('code_kb', 0):.0f} KB, cache {c.get('cache_mb', 0):.1f} MB, precompile "
             f"{c.get('precompile_s', 0):.1f} s)", ""]
    eager = [r for r in res.get("eager", []) if "first_call_s" in r]
    for r in res.get("eager", []) + res.get("warm", []) + res.get("warm_no_bytecode", []):
        if "error" in r:
            lines.append(f"- error: {r['error'][-600:]}")
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    if eager:
        lines.append(f"- eager first call {_ms(med(eager, 'first_call_s'))} (second "
                     f"{_ms(med(eager, 'second_call_s'))}), medians of {len(eager)}")
    for key, label in (("warm", "warm"), ("warm_no_bytecode", "warm, cache without bytecode")):
        warm = [r for r in res.get(key, []) if "total_s" in r]
        if not (eager and warm):
            continue
        ratio = med(warm, "total_s") / med(eager, "first_call_s")
        lines += [
            f"- {label}: import {_ms(med(warm, 'import_s'))} + load {_ms(med(warm, 'load_s'))} "
            f"+ first call {_ms(med(warm, 'first_call_s'))} = {_ms(med(warm, 'total_s'))} "
            f"(second call {_ms(med(warm, 'second_call_s'))}); path {warm[0]['path']}; heavy "
            f"modules imported {warm[0]['heavy']}; **/ eager first call {ratio:.2f}**",
            "  - load stages (median run): " + ", ".join(
                f"{k} {_ms(v)}" for k, v in sorted(warm[len(warm) // 2]["stages"].items()))]
    p = res.get("profile", {})
    if "loaded" in p:
        lib, cub = p["loaded"]["libraries"], p["loaded"]["cubins"]
        lines.append(f"- under cProfile: total {_ms(p['total_s'])}, {lib[0]} kernel libraries "
                     f"loaded in {_ms(lib[1])}, {cub[0]} cubins in {_ms(cub[1])}, first call "
                     f"{_ms(p['first_call_s'])}")
    for key, title in (("profile", "warm load + first call"),
                       ("eager_profile", "eager first call")):
        if res.get(key, {}).get("top"):
            lines += ["", f"top functions by own time, {title} (s own, s cumulative, calls):",
                      "", "| own s | cum s | calls | function |", "| ---: | ---: | ---: | --- |"]
            lines += [f"| {a} | {b} | {n} | `{name}` |" for a, b, n, name in res[key]["top"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--models", default="timm_mobilenetv3,timm_efficientnet")
    ap.add_argument("--size", default=None, help="tiny (CPU default) or real (CUDA default)")
    ap.add_argument("--workload", default="infer", choices=("infer", "train"),
                    help="the zoo workload: inference under no_grad, or the training step")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default=None)
    ap.add_argument("--reuse", action="store_true",
                    help="keep the pair of an earlier run with the same --out (no cold)")
    args = ap.parse_args()
    args.size = args.size or ("real" if args.device == "cuda" else "tiny")
    t0 = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="warm1st_work_") as tmp_root:
        work_root = os.path.join(args.out, "work") if args.out else tmp_root  # pairs kept
        for model in [m for m in args.models.split(",") if m]:
            work = os.path.join(work_root, model.replace(":", "_"))
            os.makedirs(work, exist_ok=True)
            results[model] = measure(model, work, args)
    text = (f"# warm load + first call vs eager's first call ({args.device}, {args.size}, "
            f"{args.workload}, {time.perf_counter() - t0:.0f} s)\n\n"
            + "\n".join(report_model(m, r) for m, r in results.items()))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "warm_first_call.json"), "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=1)
        with open(os.path.join(args.out, "warm_first_call.md"), "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
