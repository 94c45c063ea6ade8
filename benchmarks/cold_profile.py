"""Where a cold precompile's time goes: one fresh process per workload, empty compiler caches,
`precompile(fn, *args)` under cProfile, its time split into the pipeline's phases.

usage: python benchmarks/cold_profile.py [--workloads a,b] [--device cpu|cuda] [--out DIR]
                                         [--zoo MODEL:WORKLOAD:SIZE,...]
                                         [--beyond MODEL:WORKLOAD,...] (with --vs)
                                         [--compare-env K=V --repeats N]
                                         [--vs nb,ref,nb@REV --python PY --repeats N]

With --compare-env, no profile: each case's unprofiled wall time with and without the
environment setting (e.g. TORCHINDUCTOR_COMPILE_THREADS=1), alternating, N times each.
With --vs, no profile either: the cold precompile of each case by each system in turn, in
fresh processes of the same python (--python, default this one), N rounds: `nb` is this
tree's precompile_nb, `nb@REV` the package at git revision REV, `ref` torch's own
torch.compiler.precompile (torch >= 2.14). Each row: wall time, C++ kernels in python_code,
Inductor graph compiles (compile_fx_inner calls), cache bytes.

Workloads are the benchmarks' (`workloads.py`) and, with --zoo, zoo cases
(`benchmarks/zoo/models.py`, e.g. hf_gpt2:train:tiny). Each row: wall time without the
profiler (a second fresh process), then the profiled split, as cumulative times of the
functions that bound each phase (they nest: lower holds AOTAutograd, which holds Inductor,
which holds the C++ / Triton compile):
  import     torch._inductor and the compiler modules, imported by the first precompile
  capture    make_fx of fn (precompile_nb.core.capture.capture)
  function.  the functional re-trace before lowering (_compat.functionalize)
  aot        AOTAutograd inside compile_fx, less compile_fx_inner
  inductor   compile_fx_inner less the kernel compiles: lowering, scheduling, codegen
  cpp/triton the C++ compiler / Triton compile calls (in this process or waited on)
  emit+pack  python_code and the cache envelope
"""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# the start of a child's source: the repository and benchmarks/ first, one torch thread
PRELUDE = r"""
import contextlib, cProfile, functools, json, os, pstats, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
torch.set_num_threads(1)
"""

# What a child watches of Inductor (cold_split.py, conv_backward_layout.py): AUTOTUNED, one
# [kernel, configurations benchmarked, seconds] per kernel the autotuner benchmarked, and
# SOURCES, the generated wrapper modules as Inductor loads them. No braces: it goes into
# templates that are str.format-ed.
KERNEL_WATCH = r"""
import time as _time
from torch._inductor.runtime import triton_heuristics as _th
from torch._inductor.codecache import PyCodeCache as _PyCodeCache
AUTOTUNED, SOURCES = [], []
AT_PROF = None  # a cProfile.Profile to run inside each benchmark_all_configs (cold_split +atprof)
_benchmark_all = _th.CachingAutotuner.benchmark_all_configs
def _benchmark_counted(self, *a, **k):
    t = _time.perf_counter()
    if AT_PROF is not None:
        AT_PROF.enable()
    try:
        return _benchmark_all(self, *a, **k)
    finally:
        if AT_PROF is not None:
            AT_PROF.disable()
        AUTOTUNED.append([getattr(self.fn, "__name__", "?"),
                          len(getattr(self, "launchers", None) or ()),
                          round(_time.perf_counter() - t, 4)])
_th.CachingAutotuner.benchmark_all_configs = _benchmark_counted
_load_by_key_path = _PyCodeCache.load_by_key_path.__func__
def _keeping_source(cls, key, path, *a, **k):
    try:
        with open(path) as f:
            text = f.read()
        if "def call(" in text:
            SOURCES.append(text)
    except OSError:
        pass
    return _load_by_key_path(cls, key, path, *a, **k)
_PyCodeCache.load_by_key_path = classmethod(_keeping_source)
"""

_BUFFER_4D = re.compile(r"empty_strided_\w+\(\((\d+), (\d+), (\d+), (\d+)\), "
                        r"\((\d+), (\d+), (\d+), (\d+)\)")


def buffer_layouts(sources: list[str]) -> tuple[int, int]:
    """(NCHW, channels_last) 4-D buffers (channels and spatial size > 1) that generated
    modules allocate (conv_backward_layout.py's children, cpu_training_layout.py)."""
    nchw = cl = 0
    for src in sources:
        for g in _BUFFER_4D.finditer(src):
            if int(g.group(2)) > 1 and int(g.group(3)) * int(g.group(4)) > 1:
                cl += g.group(6) == "1"
                nchw += g.group(6) != "1"
    return nchw, cl


# top_functions(prof, n, inclusive): a cProfile's n functions of most own (or inclusive) time,
# each [file:line:name, calls, seconds] (cold_split.py, gpu_issue28.py; no braces, as above)
TOP_FUNCTIONS = r"""
def top_functions(prof, n, inclusive=False):
    import os as _os, pstats as _pstats
    rows = [("%s:%d:%s" % (_os.path.basename(f), ln, name), nc, ct if inclusive else tt)
            for (f, ln, name), (cc, nc, tt, ct, _) in _pstats.Stats(prof).stats.items()]
    return [[r[0], r[1], round(r[2], 4)] for r in sorted(rows, key=lambda r: -r[2])[:n]]
"""

_CHILD = PRELUDE + r"""
case = {case!r}
if case.startswith("zoo:"):
    from zoo import models
    _, model, kind, size = case.split(":")
    spec = models.build(model, size, {device!r})
    if kind == "train":
        spec.model.train()
    else:
        spec.model.eval()
    fn, args, inference = spec.fns[kind], (spec.model, *spec.args[kind]), kind != "train"
else:
    from workloads import build
    w = build(case, {device!r})
    fn, args, inference = w.fn, w.args, w.inference
prof = cProfile.Profile() if {profile!r} else None
t0 = time.perf_counter()
ctx = torch.no_grad() if inference else torch.enable_grad()
with ctx:
    if prof: prof.enable()
    from precompile_nb.core import build
    t_import = time.perf_counter() - t0
    art = build(fn, *args)
    if prof: prof.disable()
wall = time.perf_counter() - t0
code, cache = art.python_code, art.cache
out = {{"wall_s": wall, "cache_bytes": len(cache), "stages": dict(art.stage_seconds,
        import_precompile_nb=t_import),
       "kernels": code.count("async_compile.cpp_pybinding(") + code.count("async_compile.triton(")}}
if prof:
    st = pstats.Stats(prof)
    cum = {{}}
    for (file, line, name), (cc, nc, tt, ct, callers) in st.stats.items():
        cum.setdefault((os.path.basename(file), name), 0.0)
        cum[(os.path.basename(file), name)] = max(cum[(os.path.basename(file), name)], ct)
    def c(file, name):
        return cum.get((file, name), 0.0)
    out["split"] = {{
        "capture": c("__init__.py", "capture"),
        "functionalize": c("tracing.py", "functionalize"),
        "compile_fx": c("compile_fx.py", "compile_fx"),
        "compile_fx_inner": c("compile_fx.py", "compile_fx_inner"),
        "cpp_build": c("cpp_builder.py", "build"),
        "triton_compile": c("compiler.py", "compile"),
        "async_wait": c("async_compile.py", "wait"),
        "emit": c("emit.py", "emit"),
        "pack": c("cache.py", "pack"),
        "import": c("<frozen importlib._bootstrap>", "_find_and_load"),
        "profiled_total": c("__init__.py", "build"),
    }}
print(json.dumps(out))
"""


_VS_CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
torch.set_num_threads(1)
import torch._inductor.compile_fx as cfx
graphs = []
_inner = cfx.compile_fx_inner
def counting_inner(*a, **k):
    graphs.append(1)
    return _inner(*a, **k)
cfx.compile_fx_inner = counting_inner
case = {case!r}
if case.startswith("zoo:"):  # a zoo case, MODEL:WORKLOAD:SIZE
    from zoo import models
    _, model, kind, size = case.split(":")
    spec = models.build(model, size, {device!r})
    spec.model.train() if kind == "train" else spec.model.eval()
    fn, args, inference = spec.fns[kind], (spec.model, *spec.args[kind]), kind != "train"
elif case.startswith("beyond:"):  # a beyond.py case (tiny), MODEL:WORKLOAD
    from zoo import beyond
    _, model, kind = case.split(":")
    m, m_kind = beyond.CASES[model]()
    m.train() if kind == "train" else m.eval()
    fn, rest = beyond._example(m, m_kind)[kind]
    args, inference = (m, *rest), kind != "train"
else:
    from workloads import build
    w = build(case, {device!r})
    fn, args, inference = w.fn, w.args, w.inference
t0 = time.perf_counter()
with torch.no_grad() if inference else torch.enable_grad():
    if {system!r} == "ref":
        code, cache = torch.compiler.precompile(fn, *args)
    else:
        from precompile_nb import precompile
        code, cache = precompile(fn, *args)
print(json.dumps({{"wall_s": time.perf_counter() - t0, "torch": torch.__version__,
                  "kernels": code.count("cpp_pybinding(") + code.count("async_compile.triton("),
                  "graphs": len(graphs), "cache_bytes": len(cache or b"")}}))
"""


def run(case: str, device: str, profile: bool, extra_env: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="cold_profile_") as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TMPDIR=tmp,
                   OMP_NUM_THREADS="1", **(extra_env or {}))
        env.pop("PYTHONPATH", None)
        src = _CHILD.format(root=ROOT, bench=HERE, case=case,
                            device=device, profile=profile)
        r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True,
                           text=True, timeout=3600)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def phases(s: dict) -> dict:
    kernel = max(s["cpp_build"], s["triton_compile"], s["async_wait"])
    return {"import": s["import"], "capture": s["capture"],
            "functionalize": s["functionalize"],
            "aot": max(0.0, s["compile_fx"] - s["compile_fx_inner"]),
            "inductor": max(0.0, s["compile_fx_inner"] - kernel), "cpp/triton": kernel,
            "emit+pack": s["emit"] + s["pack"], "profiled": s["profiled_total"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="tiny_mlp,transformer_infer,transformer_train,"
                                           "cnn_bn_train")
    ap.add_argument("--zoo", default="", help="comma-separated MODEL:WORKLOAD:SIZE")
    ap.add_argument("--beyond", default="", help="comma-separated MODEL:WORKLOAD of zoo/beyond.py "
                    "(tiny; --vs only)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--compare-env", default=None, help="K=V: wall times with and without it")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--vs", default=None, help="systems to compare: nb, ref, nb@REV")
    ap.add_argument("--python", default=sys.executable, help="the python --vs runs")
    args = ap.parse_args()
    cases = [w for w in args.workloads.split(",") if w]
    cases += [f"zoo:{z}" for z in args.zoo.split(",") if z]
    cases += [f"beyond:{b}" for b in args.beyond.split(",") if b]
    if args.vs:
        versus(cases, args)
        return
    if args.compare_env:
        compare(cases, args)
        return
    rows = {}
    for case in cases:
        plain = run(case, args.device, profile=False)
        prof = run(case, args.device, profile=True)
        rows[case] = {"plain": plain, "profiled": prof}
        if "error" in plain or "error" in prof:
            print(f"{case}: failed\n{plain.get('error') or prof.get('error')}", flush=True)
            continue
        p = phases(prof["split"])
        print(f"{case}: wall {plain['wall_s']:.1f} s, {plain['kernels']} kernels, stages "
              + ", ".join(f"{k} {v:.1f}" for k, v in plain["stages"].items()) + "; profiled "
              + ", ".join(f"{k} {v:.1f}" for k, v in p.items()), flush=True)
        rows[case]["phases"] = p
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "cold_profile.json"), "w") as f:
            json.dump(rows, f, indent=1)


def compare(cases: list[str], args: argparse.Namespace) -> None:
    key, _, value = args.compare_env.partition("=")
    rows = {}
    for case in cases:
        walls: dict[str, list[float]] = {"default": [], args.compare_env: []}
        for _ in range(args.repeats):
            for label, extra in (("default", None), (args.compare_env, {key: value})):
                r = run(case, args.device, profile=False, extra_env=extra)
                walls[label].append(r.get("wall_s", float("nan")))
        rows[case] = walls
        print(f"{case}: " + ", ".join(f"{k} min {min(v):.1f} s (all {[round(x, 1) for x in v]})"
                                      for k, v in walls.items()), flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "compare_env.json"), "w") as f:
            json.dump({"env": args.compare_env, "rows": rows}, f, indent=1)


def export_rev(rev: str, into: str) -> str:
    """The repository at git revision `rev`, extracted under `into` (one folder a revision)."""
    tar = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True,
                         check=True).stdout
    tree = os.path.join(into, rev)
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(tree, filter="data")
    return tree


def _run_vs(system: str, root: str, case: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="cold_vs_") as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TMPDIR=tmp,
                   OMP_NUM_THREADS="1")
        env.pop("PYTHONPATH", None)
        src = _VS_CHILD.format(root=root, bench=HERE, case=case, device=args.device,
                               system=system)
        r = subprocess.run([args.python, "-c", src], env=env, capture_output=True, text=True,
                           timeout=3600, cwd=tmp)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def versus(cases: list[str], args: argparse.Namespace) -> None:
    """Each system's cold precompile of each case, fresh processes, the systems in turn."""
    with tempfile.TemporaryDirectory(prefix="cold_vs_trees_") as trees:
        roots = {s: (export_rev(s.split("@", 1)[1], trees) if "@" in s else ROOT)
                 for s in args.vs.split(",")}
        rows: dict = {}
        for case in cases:
            rows[case] = {s: [] for s in roots}
            for _ in range(args.repeats):
                for s, root in roots.items():
                    r = _run_vs("ref" if s == "ref" else "nb", root, case, args)
                    rows[case][s].append(r)
                    print(f"{case} {s}: " + (f"{r['wall_s']:.1f} s, {r['kernels']} kernels, "
                          f"{r['graphs']} graph compiles, cache {r['cache_bytes']} B"
                          if "error" not in r else "failed\n" + r["error"]), flush=True)
            for s, rs in rows[case].items():
                walls = [r["wall_s"] for r in rs if "wall_s" in r]
                if walls:
                    print(f"{case} {s}: min {min(walls):.1f} s, all "
                          f"{[round(x, 1) for x in walls]}", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "cold_vs.json"), "w") as f:
            json.dump({"python": args.python, "systems": args.vs, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
