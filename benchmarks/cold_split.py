"""Where a cold compile's time goes, precompile_nb against torch.compile on the same case, by
timing the same Inductor functions in both (no profiler: cProfile and Python 3.12's
sys.monitoring users disagree). One fresh process per (case, tool), empty compiler caches.

usage: python benchmarks/cold_split.py [--zoo MODEL:WORKLOAD:SIZE,...]
                                       [--workloads NAME,...] [--tools nb,tc,...]
                                       [--device cuda|cpu] [--out DIR]

--workloads names benchmark workloads (benchmarks/workloads.py, and warm_load.py's gpt_step)
instead of zoo cases. A tool name with `+nopool` runs with TORCH_WARM_POOL=0: Inductor's compile
workers are not started ahead of the first kernel (Note [compile workers start with the
capture]), for precompile_nb as for torch.compile; with `+prof` it runs under cProfile (inflated
times; the json's `top` lists the 40 functions of most own time and the 60 of most inclusive
time), e.g. `nb+prof`; with `+atprof` only the autotuner's benchmarking runs under cProfile
(`top`'s autotune_own / autotune_inclusive); with `+nowprof` only precompile's one run of what
it compiled (autotune_now: `top`'s now_own / now_inclusive); with `+nogc` Python's cyclic
garbage collector is off for the whole compile (the json's `gc` counts its collections and their
seconds in every run); n.host_copies counts the benchmarks that parked the arguments a kernel
writes in host memory (Inductor's rule where the memory peak leaves no room); with `+isaserial`
precompile_nb runs Inductor's CPU ISA probes one after another, as before Note [ISA probes at
once] (PRECOMPILE_NB_ISA_AT_ONCE=0); with `+gcfreeze` the objects alive before the compile are
frozen out of Python's garbage collector (gc.freeze()); with `+pieces=K` precompile_nb compiles
the graph in K pieces at once (PRECOMPILE_NB_PIECES, Note [a graph compiled in pieces]; plain
`nb` and `nb+pieces=1` compile it in one; n.pieces says how many it took; the Inductor columns
then time only this process, the pieces' own compiles run in their workers).

`nb+gcon` leaves Python's garbage collector on during the build, as before Note [the
collector pauses for a build] (PRECOMPILE_NB_GC_PAUSE=0); the json's `gc` counts the
collections and their seconds in every row, `rss_peak_mb` the process's peak resident memory,
`before_s` the row's seconds before the timed compile (imports, building the case) and
`wall_s` its process from start to exit as the parent saw it (the rest is Python's start,
the steady timing where asked, and the exit: round 21 saw rows take ~50 s of a device call
for totals of 12-25 s).

precompile_nb forks Inductor's compile workers from the compiling process for each build
(Note [compile workers forked for a build]); `nb+sidecar` starts them as Inductor does by
default, from a fresh sidecar interpreter (PRECOMPILE_NB_FORK_WORKERS=0). `+fork` sets
Inductor's own fork start (TORCHINDUCTOR_WORKER_START=fork: workers at its priority, kept for
the process, for precompile_nb as for torch.compile); `+ct=N` sets Inductor's compile threads
(TORCHINDUCTOR_COMPILE_THREADS, the number of workers) to N.

`nb+nosetup` leaves Triton's driver and source hash to the lowering, as before Note [Triton's
set-up while the capture runs] (PRECOMPILE_NB_TRITON_SETUP=0).

precompile_nb compiles the Triton kernels that Inductor would compile one after another in
the compiling process, while its compile workers start, on threads of that process (Note
[kernels on threads while the workers start]); n.kernels_on_threads counts them. `nb+nothreads`
compiles them as Inductor does (PRECOMPILE_NB_KERNEL_THREADS=0); a kernel still waiting for a
thread when the workers become ready goes to them (n.kernels_handed counts those), and
`nb+nohandoff` keeps it on its thread (PRECOMPILE_NB_KERNEL_HANDOFF=0); `tc+threads` gives
torch.compile the same (precompile_nb's kernels_on_threads around its compile and first call).

`nb+early` is an experiment (round 26): a kernel that would go to a thread goes there when
the code generation defines it, as Inductor sends one to its workers once they are ready,
instead of when the module is loaded after the whole code generation (the rows before it: the
first kernel at the end of codegen, all compiles after it); `nb+earlyK` lets at most K threads
compile until the module loads (the threads share the interpreter with the code generation).
n.early_defined / n.early_taken count the kernels sent at their definition and found there
when the module loaded.

`nb+aot` sends every graph through AOTAutograd's two traces, as before Note [one trace between
capture and Inductor] (PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR=0); the json's t.decompose times the
one decomposing trace that replaces them.

With --steady N, each row also times N calls of what it compiled (precompile_nb's loaded
artifact, torch.compile's function) and of eager's fn, in the same process (median ms).

Columns (seconds, inclusive, summed over every call; they nest): total (precompile, or
torch.compile's compile + first call), capture (precompile_nb's make_fx of fn), functionalize
(its re-trace), graphs (Inductor graphs compiled), lowering (GraphLowering.run), scheduler
(Scheduler.__init__: fusion, ordering), codegen (GraphLowering.codegen), module
(compile_to_module less codegen: writing and loading the module, waiting for kernel
compiles), autotune (CachingAutotuner.benchmark_all_configs; the json's n.configs counts the
configurations it benchmarked, `autotuned` each benchmarked kernel's name, configurations
and seconds, n.kernels_to_pool / n.kernels_in_process how many kernel compiles
went to Inductor's compile workers or ran in this process while they were not ready), kernels
(Triton / C++ kernels in the generated code). The json's `marks` say when (s from the start)
the first Triton kernel reached async_compile and when the compile workers said they were
ready. The json's `t` also has, where the torch has them (2.13-2.15), AOTAutograd's metadata
trace (aot_metadata) and graph trace (aot_trace), and Inductor's pre-grad, joint-graph and
post-grad passes.

Precompile hands its compile workers jobs that import what a worker's first Triton compile
imports (Note [compile workers start with the capture]; `n.warm_jobs` counts them);
`nb+coldworkers` hands none, as before round 13 (round 13 measured that as the experiment
`nb+warmworkers`, since adopted).

With --warmup the first case runs once at tiny size with each tool before any measured row
(discarded), so that the first measured row does not pay for compiling Python's bytecode or
reading cold files that later rows find ready: round 12 found that charge on the first row of
each device call (PYTHONPYCACHEPREFIX points at an empty dir on a fresh machine).

With --cache-dir DIR every run keeps its compiler caches in DIR instead of empty ones: run the
same command twice to time a precompile (or torch.compile) that finds what an earlier process
built, e.g. precompile_nb's kept C++ kernels (Note [C++ kernels built once]); `+noreuse` turns
that reuse off (PRECOMPILE_NB_KERNEL_REUSE=0) and the json's `builds` says what was reused.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cold_profile import KERNEL_WATCH, PRELUDE, TOP_FUNCTIONS  # noqa: E402 (children's parts)

_CHILD = "import time as _tm; CHILD_T0 = _tm.perf_counter()\n" + PRELUDE + KERNEL_WATCH + \
    TOP_FUNCTIONS + r"""
case = {case!r}
if case.count(":") == 2:
    from zoo import models
    model, kind, size = case.split(":")
    spec = models.build(model, size, {device!r})
    spec.model.train() if kind == "train" else spec.model.eval()
    fn, args = spec.fns[kind], (spec.model, *spec.args[kind])
elif case == "gpt_step":
    os.environ["WARM_LOAD_DEVICE"] = {device!r}
    import warm_load
    fn, args, inference = warm_load._gpt_step()
    kind = "infer" if inference else "train"
else:
    from workloads import build as build_workload
    w = build_workload(case, {device!r})
    fn, args, kind = w.fn, w.args, "infer" if w.inference else "train"
T, N, SPLIT, BUILDS = {{}}, {{}}, "", {{}}
NOW_PROF, SDPA = None, []
def timed(owner, name, key):
    orig = getattr(owner, name)
    @functools.wraps(orig)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            T[key] = T.get(key, 0.0) + time.perf_counter() - t; N[key] = N.get(key, 0) + 1
    setattr(owner, name, w)
import torch._inductor.graph as g, torch._inductor.scheduler as s
timed(g.GraphLowering, "run", "lowering")
timed(g.GraphLowering, "codegen", "codegen")
timed(g.GraphLowering, "compile_to_module", "module_all")
timed(s.Scheduler, "__init__", "scheduler")
import torch._functorch.aot_autograd as _aa, torch._inductor.compile_fx as _cf
for _owner, _name, _key in (  # AOTAutograd's two traces and Inductor's graph passes (2.13-2.15)
        (_aa, "create_aot_state", "aot_metadata"), (_aa, "aot_stage1_graph_capture", "aot_trace"),
        (_cf, "_recursive_pre_grad_passes", "pre_grad"),
        (_cf, "_recursive_joint_graph_passes", "joint_passes"),
        (_cf, "_recursive_post_grad_passes", "post_grad")):
    if hasattr(_owner, _name):
        timed(_owner, _name, _key)
from torch._inductor.async_compile import AsyncCompile
MARK = {{}}  # perf_counter of the first kernel handed to async_compile, of the pool's readiness
def _first_kernel(self):
    MARK.setdefault("first_kernel", time.perf_counter())
    ready = type(self)._ready_future
    if ready is not None and "pool_watch" not in MARK:
        MARK["pool_watch"] = time.perf_counter()
        ready.add_done_callback(lambda f: MARK.setdefault("pool_ready", time.perf_counter()))
_triton = AsyncCompile.triton
def _triton_marked(self, *a, **k):  # per kernel: sent to the compile workers, or compiled here
    _first_kernel(self)  # (a kernel compiled on a thread first comes here when Inductor waits
    sent = type(self).use_process_pool()  # for it: it counts as in-process then)
    key = "kernels_to_pool" if sent else "kernels_in_process"
    N[key] = N.get(key, 0) + 1
    return _triton(self, *a, **k)
AsyncCompile.triton = _triton_marked
from precompile_nb.core._compat import kernel_threads as _kt  # the kernels on threads
import re, threading
EARLY, DEFINING, GATE_OPEN = {{}}, threading.local(), threading.Event()  # +early (below)
_kt_wrap = _kt._PATCH._wrap  # (Note [kernels on threads while the workers start]): marked
def _kt_marked(inline, patch):  # as they reach it, before the thread takes them
    threaded = _kt_wrap(inline, patch)
    def triton(self, kernel_name, source_code, device_str="cuda"):
        _first_kernel(self)
        early = EARLY.pop(source_code.strip(), None) if patch.on() else None
        if not getattr(DEFINING, "on", False):  # the module is loading: codegen is over
            GATE_OPEN.set()
        if early is not None:  # +early: the module's call takes its definition's future
            N["early_taken"] = N.get("early_taken", 0) + 1
            return early
        return threaded(self, kernel_name, source_code, device_str)
    return triton
_kt._PATCH._wrap = _kt_marked
_early = re.search(r"\+early(\d*)", {tool!r})
if _early:  # experiment: a kernel goes to a thread at its definition in the code generation,
    import torch._inductor.codegen.triton as _cgt  # not when the module loads after it (as
    from torch._inductor.virtualized import V  # Inductor does once its workers are ready);
    _real_ac = _cgt.async_compile  # +earlyK: at most K threads compile until codegen ends
    def _cuda_graph():
        try:
            return V.graph.get_current_device_or_throw().type == "cuda"
        except Exception:
            return False
    class _DefinedEarly:
        def __getattr__(self, name):
            return getattr(_real_ac, name)
        def use_process_pool(self):
            return _real_ac.use_process_pool() or (_kt._PATCH.on() and _cuda_graph())
        def triton(self, kernel_name, source_code, device_str="cuda"):
            if _real_ac.use_process_pool() or not _kt._PATCH.on():
                return _real_ac.triton(kernel_name, source_code, device_str)
            DEFINING.on = True
            try:
                fut = _real_ac.triton(kernel_name, source_code, device_str)
            finally:
                DEFINING.on = False
            EARLY[source_code.strip()] = fut  # (the module's copy: the same, spliced)
            N["early_defined"] = N.get("early_defined", 0) + 1
            return fut
    _cgt.async_compile = _DefinedEarly()
    if _early.group(1):
        _slots, _itc = threading.Semaphore(int(_early.group(1))), _kt._into_triton_cache
        def _gated(*a, **k):
            while not GATE_OPEN.is_set():
                if _slots.acquire(timeout=0.02):
                    try:
                        return _itc(*a, **k)
                    finally:
                        _slots.release()
            return _itc(*a, **k)
        _kt._into_triton_cache = _gated
_kt_before = _kt.kernel_thread_counts()
if {tool!r}.startswith("nb"):
    from precompile_nb.core import _compat  # lower looks these up on _compat at each call
    timed(_compat, "functionalize", "functionalize")
    timed(_compat, "autotune_now", "autotune_now")
    if "+nowprof" in {tool!r}:  # cProfile of the precompile's one run (autotune_now) alone
        NOW_PROF = cProfile.Profile()
        _now = _compat.autotune_now
        def _now_profiled(*a, **k):
            NOW_PROF.enable()
            try:
                return _now(*a, **k)
            finally:
                NOW_PROF.disable()
        _compat.autotune_now = _now_profiled
    from precompile_nb.core._compat import straight_to_inductor as _sti  # the one decomposing
    timed(_sti, "decomposed", "decompose")  # trace (Note [one trace between capture and ...])
if {tool!r}.startswith("nb"):  # the import jobs handed to the workers, or none (+coldworkers)
    from precompile_nb.core._compat import compile_pool as _pool
    if "+coldworkers" in {tool!r}:
        _pool._warmed.append(True)
    _start = _compat.start_compile_workers
    def _start_counted():
        N["warm_jobs"] = N.get("warm_jobs", 0) + _start()
    _compat.start_compile_workers = _start_counted
_to_host = getattr(_th.CachingAutotuner, "copy_args_to_cpu_if_needed", None)
if _to_host is not None:  # benchmarks whose written arguments went to host memory
    def _counted_to_host(self, *a, **k):
        out = _to_host(self, *a, **k)
        if out:
            N["host_copies"] = N.get("host_copies", 0) + 1
        return out
    _th.CachingAutotuner.copy_args_to_cpu_if_needed = _counted_to_host
if "+atprof" in {tool!r}:
    AT_PROF = cProfile.Profile()
import gc
GC = {{"collections": 0, "seconds": 0.0}}
_gc_t = [0.0]
def _gc_watch(phase, info):
    if phase == "start":
        _gc_t[0] = time.perf_counter()
    else:
        GC["collections"] += 1; GC["seconds"] += time.perf_counter() - _gc_t[0]
gc.callbacks.append(_gc_watch)
if "+nogc" in {tool!r}:
    gc.disable()
if "+gcfreeze" in {tool!r}:
    gc.freeze()
sync = torch.cuda.synchronize if {device!r} == "cuda" else (lambda: None)
ctx = torch.no_grad() if kind != "train" else torch.enable_grad()
prof = cProfile.Profile() if {tool!r}.endswith("+prof") else None
t0 = time.perf_counter()
with ctx:
    if prof: prof.enable()
    if {tool!r}.startswith("nb"):
        from precompile_nb.core import build
        art = build(fn, *args)
        code = art.python_code; stages = dict(art.stage_seconds)
        split = art.lowered.split
        BUILDS = dict(art.lowered.builds)
        N["pieces"] = split.count if split else 1
        SPLIT = repr(split)
        from sdpa_choice import sdpa_ops
        SDPA = sorted(sdpa_ops(art.captured.graph))
    else:
        with (_kt.kernels_on_threads() if "+threads" in {tool!r} else contextlib.nullcontext()):
            out = torch.compile(fn)(*args); sync()
        code, stages = "", {{}}
    if prof: prof.disable()
total = time.perf_counter() - t0
_kt_after = _kt.kernel_thread_counts()
N["kernels_on_threads"] = _kt_after["on_threads"] - _kt_before["on_threads"]
N["kernels_handed"] = _kt_after["handed_to_workers"] - _kt_before["handed_to_workers"]
STEADY = {{}}
if {steady!r}:  # steady state: median of N calls of the compiled step, and of eager's
    def median_ms(f):
        with ctx:
            for _ in range(3):
                f(*args)
            sync()
            ts = []
            for _ in range({steady!r}):
                t = time.perf_counter(); f(*args); sync(); ts.append(time.perf_counter() - t)
        return sorted(ts)[len(ts) // 2] * 1e3
    if {tool!r}.startswith("nb"):
        from precompile_nb import precompile
        STEADY["tool_ms"] = median_ms(precompile.load(code, art.cache))
    else:
        STEADY["tool_ms"] = median_ms(torch.compile(fn))
    STEADY["eager_ms"] = median_ms(fn)
if {sources!r}:
    with open({sources!r}, "w") as f:
        f.write(("\n# ---- next module ----\n").join(SOURCES or [code]))
T["module"] = T.pop("module_all", 0.0) - T.get("codegen", 0.0)
top = ({{"own": top_functions(prof, 40), "inclusive": top_functions(prof, 60, True)}}
       if prof else {{}})
if NOW_PROF is not None and N.get("autotune_now"):  # (not run on the CPU: no stats)
    top = {{"now_own": top_functions(NOW_PROF, 40),
           "now_inclusive": top_functions(NOW_PROF, 60, True)}}
if AT_PROF is not None and AUTOTUNED:  # (nothing benchmarked: no stats)
    top = {{"autotune_own": top_functions(AT_PROF, 40),
           "autotune_inclusive": top_functions(AT_PROF, 40, True)}}
gc.callbacks.remove(_gc_watch)
T["autotune"] = sum(a[2] for a in AUTOTUNED)
N["autotune"], N["configs"] = len(AUTOTUNED), sum(a[1] for a in AUTOTUNED)
MARKS = {{k: round(v - t0, 3) for k, v in MARK.items()}}
import resource
RSS = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
print(json.dumps({{"total": total, "marks": MARKS, "stages": stages, "t": T, "n": N,
                  "builds": BUILDS, "autotuned": AUTOTUNED, "top": top, "split": SPLIT,
                  "gc": GC, "steady": STEADY, "sdpa": SDPA, "rss_peak_mb": round(RSS, 1),
                  "before_s": round(t0 - CHILD_T0, 3),
                  "kernels": code.count("async_compile.triton(") + code.count("cpp_pybinding(")}}))
"""


def run(case: str, tool: str, device: str, sources: str = "", steady: int = 0,
        cache_dir: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="cold_split_") as tmp:
        caches = cache_dir or tmp
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(caches, "triton"), TMPDIR=tmp,
                   OMP_NUM_THREADS="1")
        env.pop("PYTHONPATH", None)
        if "+noreuse" in tool:  # no C++ kernel kept from an earlier precompile
            env["PRECOMPILE_NB_KERNEL_REUSE"] = "0"
        if "+nopool" in tool:
            env["TORCH_WARM_POOL"] = "0"
        if "+isaserial" in tool:  # the ISA probes one after another (Note [ISA probes at once])
            env["PRECOMPILE_NB_ISA_AT_ONCE"] = "0"
        if "+aot" in tool:  # every graph through AOTAutograd (Note [one trace between capture
            env["PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR"] = "0"  # and Inductor])
        if "+nothreads" in tool:  # kernels compiled as Inductor does (Note [kernels on
            env["PRECOMPILE_NB_KERNEL_THREADS"] = "0"  # threads while the workers start])
        if "+nohandoff" in tool:  # a kernel sent to a thread stays there (Note [kernels on
            env["PRECOMPILE_NB_KERNEL_HANDOFF"] = "0"  # threads while the workers start])
        if "+nosetup" in tool:  # Triton's set-up left to the lowering (Note [Triton's set-up
            env["PRECOMPILE_NB_TRITON_SETUP"] = "0"  # while the capture runs])
        if "+gcon" in tool:  # automatic collection left on during the build (Note [the
            env["PRECOMPILE_NB_GC_PAUSE"] = "0"  # collector pauses for a build])
        if "+fork" in tool:  # Inductor's own fork start (precompile then leaves it alone)
            env["TORCHINDUCTOR_WORKER_START"] = "fork"
        if "+sidecar" in tool:  # Inductor's sidecar, as before Note [compile workers forked
            env["PRECOMPILE_NB_FORK_WORKERS"] = "0"  # for a build]
        m = re.search(r"\+ct=(\d+)", tool)  # Inductor's compile workers (and threads): N
        if m:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = m.group(1)
        m = re.search(r"\+pieces=(\d+)", tool)
        if m:
            env["PRECOMPILE_NB_PIECES"] = m.group(1)
        src = _CHILD.format(root=ROOT, bench=HERE, case=case, tool=tool, device=device,
                            sources=sources, steady=steady)
        w0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True,
                           timeout=1800)
        wall = round(time.perf_counter() - w0, 3)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:], "wall_s": wall}
    return dict(json.loads(r.stdout.strip().splitlines()[-1]), wall_s=wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default="tv_resnet18:train:real")
    ap.add_argument("--workloads", default=None,
                    help="benchmark workloads (e.g. gpt_step,transformer_train) instead of --zoo")
    ap.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    ap.add_argument("--tools", default="nb,tc")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds; each round runs every tool once, in turn")
    ap.add_argument("--out", default=None)
    ap.add_argument("--steady", type=int, default=0,
                    help="also time N calls of the compiled step and of eager's (median ms)")
    ap.add_argument("--cache-dir", default=None,
                    help="compiler caches in this dir, kept from run to run (default: empty "
                         "ones for each run): a second run finds what the first built")
    ap.add_argument("--warmup", action="store_true",
                    help="first run the first case at tiny size with each tool, unmeasured, so "
                         "that no measured row compiles Python bytecode or reads cold files "
                         "(a fresh machine, or PYTHONPYCACHEPREFIX, would charge the first row)")
    ap.add_argument("--sources", action="store_true",
                    help="keep each run's generated modules in OUT/sources_CASE_TOOL.py")
    args = ap.parse_args()
    cols = ("capture", "functionalize", "lowering", "scheduler", "codegen", "module",
            "autotune")
    lines = ["| case | tool | round | total s | " + " | ".join(cols) + " | graphs | kernels | pieces | step ms | eager ms |",
             "| --- | --- | ---: | ---: |" + " ---: |" * (len(cols) + 5)]
    rows: dict = {}
    tools = args.tools.split(",")
    cases = (args.workloads or args.zoo).split(",")
    if args.warmup:  # unmeasured: Python's bytecode and the OS file cache of both tools' code
        model = cases[0].split(":")
        tiny = ":".join(model[:2] + ["tiny"]) if len(model) == 3 else cases[0]
        for family in sorted({"nb" if t.startswith("nb") else "tc" for t in tools}):
            r = run(tiny, family, args.device)
            print(f"warm-up {tiny} {family}: {r.get('error', 'ok')[-300:]}", flush=True)
    for case in cases:
        for k in range(args.repeats):
            for tool in tools:
                keep = ""
                if args.sources and args.out:
                    os.makedirs(args.out, exist_ok=True)
                    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"sources_{case}_{tool}_{k}.py")
                    keep = os.path.join(os.path.abspath(args.out), name)
                r = run(case, tool, args.device, keep, args.steady, args.cache_dir)
                rows.setdefault(f"{case}:{tool}", []).append(r)
                if "error" in r:
                    lines.append(f"| {case} | {tool} | {k + 1} | error: "
                                 f"{r['error'][-300:]!r} |")
                else:
                    t = dict(r["t"], capture=r["stages"].get("capture", 0.0))
                    lines.append(f"| {case} | {tool} | {k + 1} | {r['total']:.1f} | "
                                 + " | ".join(f"{t.get(c, 0.0):.1f}" for c in cols)
                                 + f" | {r['n'].get('lowering', 0)} | {r['kernels'] or ''} | "
                                 + f"{r['n'].get('pieces', '')} | "
                                 + " | ".join(f"{r['steady'][k]:.2f}" if k in r.get(
                                     "steady", {}) else "" for k in ("tool_ms", "eager_ms"))
                                 + " |")
                print(lines[-1], flush=True)
                if args.out:  # every row as it comes: a run cut short keeps what it measured
                    os.makedirs(args.out, exist_ok=True)
                    json.dump(rows, open(os.path.join(args.out, "cold_split.json"), "w"),
                              indent=1)
    lines += ["", "Total / torch.compile's (min of the rounds each):", "",
              "| case | " + " | ".join(t for t in tools if t != "tc") + " |",
              "| --- |" + " ---: |" * sum(t != "tc" for t in tools)]
    for case in cases:
        best = {t: min((r["total"] for r in rows.get(f"{case}:{t}", []) if "error" not in r),
                       default=None) for t in tools}
        lines.append(f"| {case} | " + " | ".join(
            f"{best[t] / best['tc']:.2f}" if best.get(t) and best.get("tc") else "-"
            for t in tools if t != "tc") + " |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        json.dump(rows, open(os.path.join(args.out, "cold_split.json"), "w"), indent=1)
        open(os.path.join(args.out, "cold_split.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
