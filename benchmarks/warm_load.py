"""Warm load, side by side: how long a fresh process takes, after `import torch`, to get the
first result of a computation compiled earlier (issue 17).

usage: python benchmarks/warm_load.py [--device cpu|cuda] [--out DIR] [--ref-python PY]
                                     [--repeats N] [--workloads a,b] [--systems s,t]
       python benchmarks/warm_load.py --child MODE WORKLOAD WORKDIR     (one measurement)

Systems (each measurement is its own fresh process with empty compiler caches: a new
TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and TMPDIR; OMP_NUM_THREADS=1):

  nb_cold    precompile_nb: `import precompile_nb` + precompile(fn, *args); saves the pair
  nb_warm    `import precompile_nb` + precompile.load(code, cache) + first call; also records
             the load path and its reason, the heavy modules imported and the processes
             started (subprocess / fork / spawn, counted from before the import)
  tc_cold    torch.compile(fn) + first call; saves torch.compiler.save_cache_artifacts()
  tc_warm    torch.compiler.load_cache_artifacts(blob) + torch.compile(fn) + first call
  ref_cold   torch >= 2.14's torch.compiler.precompile(fn, *args), under --ref-python
  ref_load   torch.compiler.precompile.load(code, cache) + first call, under --ref-python
  eager      fn's first call in eager mode: what any first call pays (CUDA libraries starting,
             lazily loaded kernels), the floor under every system's number

Every time is measured from right after `import torch` (which every system pays alike; on
CUDA also CUDA's initialisation and the model's copy to the GPU) to the first call's result
(synchronized). Workloads: `tiny_mlp`, Sequential(Linear(64,128), GELU, Linear(128,10)) on a
32x64 input under no_grad (for every system), and `train_step`, the same MLP's
`loss = m(x).pow(2).mean(); loss.backward()`; with --device cuda also `gpt_step`: a GPT-style
training step (4 layers, d_model 384, 6 heads, vocab 8192, sequence 256, batch 16, bf16
autocast, embedding tied to the head, cross entropy, backward). Bytecode of precompile_nb is cached under
DIR/work/pycache (PYTHONPYCACHEPREFIX; an installed package has its .pyc), warmed before the
first measurement. Writes DIR/results.json, DIR/results.md and DIR/profile.txt (cProfile and
-X importtime of one nb_warm process: tiny_mlp on CPU, gpt_step on CUDA). Targets: tiny MLP
load + first call <= 0.3 s (CPU); GPT step load + first step <= 0.5 s (CUDA); load + first
call <= 10% of precompile's cold time on every workload.
"""
from __future__ import annotations

import time

T0 = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MARK = "@@WARM@@"
WORKLOADS = {"cpu": ("tiny_mlp", "train_step"), "cuda": ("gpt_step", "tiny_mlp", "train_step")}
DEVICE = os.environ.get("WARM_LOAD_DEVICE", "cpu")
HEAVY = ("torch._inductor", "torch._inductor.codecache", "torch._inductor.compile_fx",
         "torch._inductor.async_compile", "torch._inductor.select_algorithm", "torch._dynamo",
         "sympy", "networkx", "triton", "triton.compiler")


# ---- one measurement (the child process) ------------------------------------------------------


def _count_processes() -> list[str]:
    """Record every child process this process starts from now on."""
    started: list[str] = []
    popen = subprocess.Popen.__init__

    def counting_popen(self, args, *a, **k):
        started.append(str(args)[:160])
        return popen(self, args, *a, **k)

    subprocess.Popen.__init__ = counting_popen
    for name in ("fork", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            def counting(*a, _name=name, _orig=getattr(os, name), **k):
                started.append(_name)
                return _orig(*a, **k)
            setattr(os, name, counting)
    return started


def _workload(name: str):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "gpt_step":
        return _gpt_step()
    m = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10)).to(DEVICE)
    x = torch.randn(32, 64).to(DEVICE)
    if name == "tiny_mlp":
        return (lambda m, x: m(x)), (m, x), True

    def train_step(m, x):
        loss = m(x).pow(2).mean()
        loss.backward()
        return loss

    return train_step, (m, x), False


def _gpt_step():
    import torch
    from torch.nn import functional as F

    if ROOT not in sys.path:  # the GPT of the tests' optimizer steps, at a larger size
        sys.path.insert(0, ROOT)
    from tests.core.models import GPT

    layers, d, heads, vocab, seq, batch = 4, 384, 6, 8192, 256, 16

    def gpt_step(m, idx, targets):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(idx).float().view(-1, vocab), targets.view(-1))
        loss.backward()
        return loss.detach()

    m = GPT(vocab, d, heads, layers, seq).to(DEVICE)
    g = torch.Generator(device=DEVICE).manual_seed(1)
    idx, tg = (torch.randint(0, vocab, (batch, seq), device=DEVICE, generator=g)
               for _ in range(2))
    return gpt_step, (m, idx, tg), False


def child(mode: str, name: str, workdir: str) -> dict:
    import contextlib
    import warnings

    started = _count_processes()
    import torch

    t_torch = time.perf_counter()
    warnings.simplefilter("ignore")
    fn, args, inference = _workload(name)
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # CUDA initialised and the model on the GPU before timing
    grad = torch.no_grad() if inference else contextlib.nullcontext()
    path = lambda f: os.path.join(workdir, f)  # noqa: E731

    def save(stem: str, code: str, cache: bytes) -> None:  # a pair for the *_warm/_load run
        open(path(stem + ".py"), "w").write(code)
        open(path(stem + ".cache"), "wb").write(cache)

    def read(stem: str) -> tuple[str, bytes]:
        return open(path(stem + ".py")).read(), open(path(stem + ".cache"), "rb").read()
    res: dict = {"mode": mode, "torch": torch.__version__,
                 "import_torch_s": t_torch - T0}
    profiler = None
    if os.environ.get("WARM_LOAD_PROFILE"):  # profile the timed region only
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t = time.perf_counter()
    if mode == "nb_cold":
        from precompile_nb import precompile

        with grad:
            code, cache = precompile(fn, *args)
        res["total_s"] = time.perf_counter() - t
        save("nb", code, cache)
    elif mode == "nb_warm":
        from precompile_nb import precompile

        code, cache = read("nb")
        t_import = time.perf_counter()
        f = precompile.load(code, cache)
        t_load = time.perf_counter()
        with grad:
            out = f(*args)
        _sync()
        res["total_s"] = time.perf_counter() - t
        res["import_s"], res["load_s"] = t_import - t, t_load - t_import
        res["first_call_s"] = res["total_s"] - (t_load - t)
        res["load_stages_s"] = f.__precompile_load__.get("seconds")
        res["path"] = f.__precompile_load__.get("path")
        res["reason"] = f.__precompile_load__.get("reason")
        res["heavy_imported"] = [m for m in HEAVY if m in sys.modules]
        res["processes"] = list(started)
        fn2, args2, _ = _workload(name)  # a fresh model: a training step wrote .grad
        with grad:  # bf16 autocast: eager and compiled round differently
            res["matches_eager"] = bool(torch.allclose(
                out, fn2(*args2), atol=1e-5, rtol=1e-2 if name == "gpt_step" else 1.3e-6))
    elif mode in ("tc_cold", "tc_warm"):
        if mode == "tc_warm":
            torch.compiler.load_cache_artifacts(open(path("tc.bin"), "rb").read())
        compiled = torch.compile(fn)
        with grad:
            compiled(*args)
        _sync()
        res["total_s"] = time.perf_counter() - t
        if mode == "tc_cold":
            open(path("tc.bin"), "wb").write(torch.compiler.save_cache_artifacts()[0])
    elif mode == "eager":
        with grad:
            fn(*args)
        _sync()
        res["total_s"] = time.perf_counter() - t
    elif mode in ("ref_cold", "ref_load"):
        pc = getattr(torch.compiler, "precompile", None)
        if pc is None:
            return {"mode": mode, "skipped": f"torch {torch.__version__} has no "
                    "torch.compiler.precompile"}
        if mode == "ref_cold":
            with grad:
                code, cache = pc(fn, *args)
            res["total_s"] = time.perf_counter() - t
            save("ref", code, cache)
        else:
            f = pc.load(*read("ref"))
            with grad:
                f(*args)
            res["total_s"] = time.perf_counter() - t
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(os.environ["WARM_LOAD_PROFILE"])
    return res


def _sync() -> None:
    if DEVICE == "cuda":
        import torch

        torch.cuda.synchronize()


# ---- the orchestrator --------------------------------------------------------------------------


def _env(scratch: str, pycache: str) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(scratch, "inductor"),
               WARM_LOAD_DEVICE=DEVICE,
               TRITON_CACHE_DIR=os.path.join(scratch, "triton"), TMPDIR=scratch,
               OMP_NUM_THREADS="1", PYTHONPYCACHEPREFIX=pycache,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(python: str, mode: str, name: str, workdir: str, pycache: str,
              extra: list[str] = (), env: dict | None = None) -> dict:
    scratch = tempfile.mkdtemp(prefix=f"{mode}_", dir=os.path.join(workdir, "scratch"))
    cmd = [python, *extra, os.path.abspath(__file__), "--child", mode, name, workdir]
    r = subprocess.run(cmd, env={**_env(scratch, pycache), **(env or {})},
                       capture_output=True, text=True, timeout=900)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith(MARK)), None)
    if r.returncode != 0 or line is None:
        return {"mode": mode, "error": (r.stderr or r.stdout)[-1500:]}
    out = json.loads(line[len(MARK):])
    out["stderr"] = r.stderr[-4000:] if extra else ""
    return out


def main(argv: list[str]) -> None:
    global DEVICE
    DEVICE = argv[argv.index("--device") + 1] if "--device" in argv else "cpu"
    out = (argv[argv.index("--out") + 1] if "--out" in argv
           else f"benchmarks/results/{DEVICE}_warm_load")
    ref = argv[argv.index("--ref-python") + 1] if "--ref-python" in argv else None
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 3
    names = (argv[argv.index("--workloads") + 1].split(",") if "--workloads" in argv
             else WORKLOADS[DEVICE])
    systems = (argv[argv.index("--systems") + 1].split(",") if "--systems" in argv else None)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="warm_load_")
    pycache = os.path.join(work, "pycache")
    subprocess.run([sys.executable, "-c", "import precompile_nb.core.load, precompile_nb.core"],
                   env=_env(work, pycache), check=True)  # bytecode, as an installed package
    results: dict = {"python": sys.executable, "ref_python": ref, "repeats": repeats,
                     "command": "python " + " ".join(["benchmarks/warm_load.py", *argv]),
                     "device": DEVICE, "workloads": {}}
    for name in names:
        wd = os.path.join(work, name)
        os.makedirs(os.path.join(wd, "scratch"))
        plan = [("nb_cold", sys.executable, 1), ("tc_cold", sys.executable, 1),
                ("nb_warm", sys.executable, repeats), ("tc_warm", sys.executable, repeats),
                ("eager", sys.executable, repeats)]
        if ref:
            plan += [("ref_cold", ref, 1), ("ref_load", ref, repeats)]
        if systems:  # nb_warm needs nb_cold's pair, tc_warm tc_cold's cache
            plan = [p for p in plan if p[0] in systems]
        rows: dict = {}
        for mode, python, n in plan:
            runs = []
            for i in range(n):
                r = run_child(python, mode, name, wd, pycache)
                print(f"{name:10s} {mode:9s} #{i}: "
                      + (f"{r['total_s']:.3f} s" if "total_s" in r else
                         r.get("skipped") or r.get("error", "?")[-300:]), flush=True)
                runs.append(r)
            rows[mode] = runs
        if ref is None:
            rows["ref_load"] = [{"skipped": "no --ref-python given"}]
        results["workloads"][name] = summarize(rows)
        if name == ("gpt_step" if DEVICE == "cuda" else "tiny_mlp"):
            results["profile"] = profile(wd, name, pycache, os.path.join(out, "profile.txt"))
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(render(results))
    print(render(results))


def summarize(rows: dict) -> dict:
    def times(mode):
        return [r["total_s"] for r in rows.get(mode, []) if "total_s" in r]

    s: dict = {"runs": rows}
    for mode in rows:
        t = times(mode)
        if t:
            s[mode] = {"min": min(t), "median": statistics.median(t)}
    warm = s.get("nb_warm", {}).get("median")
    for other, key in (("tc_warm", "vs_tc_warm"), ("ref_load", "vs_ref_load"),
                       ("nb_cold", "vs_nb_cold")):
        if warm and s.get(other):
            s[key] = warm / s[other]["median"]
    return s


def profile(wd: str, name: str, pycache: str, dest: str) -> str:
    """cProfile of the timed region (after `import torch`) of one nb_warm process, and its
    -X importtime lines after torch's (everything the timed region imported), to `dest`."""
    import io
    import pstats

    prof = os.path.join(wd, "nb_warm.prof")
    r = run_child(sys.executable, "nb_warm", name, wd, pycache, ["-X", "importtime"],
                  env={"WARM_LOAD_PROFILE": prof})
    text = io.StringIO()
    text.write(f"# one nb_warm process of {name} ({r.get('total_s', float('nan')):.3f} s "
               "timed, profiler on): cProfile of the timed region, top 30 by cumulative time\n")
    if os.path.exists(prof):
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
    lines = r.get("stderr", "").splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.endswith("| torch")), len(lines))
    text.write("# -X importtime: every import after `import torch` (microseconds)\n")
    text.write("\n".join(ln for ln in lines[start + 1:] if ln.startswith("import time:")))
    text.write("\n")
    with open(dest, "w") as f:
        f.write(text.getvalue())
    return dest


def render(results: dict) -> str:
    lines = ["# Warm load: fresh process, after `import torch`, to the first result", "",
             f"Command: `{results['command']}` (repeats: {results['repeats']}; medians, "
             "min in brackets; every process with empty compiler caches)", "",
             "| workload | precompile_nb load + first call | torch.compile warm start | "
             "torch 2.14.1 precompile load | precompile_nb cold | torch.compile cold | "
             "eager first call | vs torch.compile warm | vs 2.14.1 load | "
             "load / cold precompile | path |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def cell(s, mode):
        v = s.get(mode)
        if v:
            return f"{v['median']:.3f} s ({v['min']:.3f})"
        run = (s["runs"].get(mode) or [{}])[0]
        return run.get("skipped") or ("failed" if "error" in run else "-")

    def ratio(s, key):
        return f"{s[key]:.3f}" if key in s else "-"

    for name, s in results["workloads"].items():
        warm = next((r for r in s["runs"].get("nb_warm", []) if "path" in r), {})
        lines.append(f"| {name} | {cell(s, 'nb_warm')} | {cell(s, 'tc_warm')} | "
                     f"{cell(s, 'ref_load')} | {cell(s, 'nb_cold')} | {cell(s, 'tc_cold')} | "
                     f"{cell(s, 'eager')} | "
                     f"{ratio(s, 'vs_tc_warm')} | {ratio(s, 'vs_ref_load')} | "
                     f"{ratio(s, 'vs_nb_cold')} | {warm.get('path')} |")
    lines += ["", "Targets: tiny MLP load + first call <= 0.3 s (CPU); GPT step load + first "
              "step <= 0.5 s (CUDA); load + first call <= 10% of precompile's cold time on "
              "every workload.", ""]
    for name, s in results["workloads"].items():
        warm = [r for r in s["runs"].get("nb_warm", []) if "path" in r]
        if not warm:
            continue
        w = warm[0]
        lines.append(f"- {name}: path `{w['path']}` ({w['reason']}); heavy modules imported: "
                     f"{w['heavy_imported'] or 'none'}; processes started: "
                     f"{w['processes'] or 'none'}; matches eager: "
                     f"{all(r['matches_eager'] for r in warm)}; split of the median run: "
                     + ", ".join(f"{k} {statistics.median(r[k] for r in warm):.3f} s"
                                 for k in ("import_s", "load_s", "first_call_s")))
        stages = [r.get("load_stages_s") or {} for r in warm]
        if stages[0]:
            lines.append("  - load stages (medians): " + ", ".join(
                f"{k} {statistics.median(st.get(k, 0.0) for st in stages):.3f} s"
                for k in stages[0]))
        eager = s.get("eager")
        if eager:
            lines.append(f"  - eager's first call in a fresh process: {eager['median']:.3f} s "
                         "(what any first call pays: libraries starting, kernels loading)")
        if name == "tiny_mlp" and results.get("device", "cpu") == "cpu":
            lines.append(f"  - tiny MLP <= 0.3 s: "
                         f"{'met' if s['nb_warm']['median'] <= 0.3 else 'MISSED'}")
        if name == "gpt_step":
            lines.append(f"  - GPT step <= 0.5 s: "
                         f"{'met' if s['nb_warm']['median'] <= 0.5 else 'MISSED'}")
        lines.append(f"  - <= 10% of cold precompile: "
                     f"{'met' if s.get('vs_nb_cold', 1) <= 0.1 else 'MISSED'}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        result = child(*sys.argv[i + 1:i + 4])
        print(MARK + json.dumps(result), flush=True)
    else:
        main(sys.argv[1:])
