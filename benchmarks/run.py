"""Benchmarks: precompile_nb side by side with eager, torch.compile and torch's own
`torch.compiler.precompile` (torch >= 2.14), every measurement in a fresh process with empty
compiler caches.

usage:
  python benchmarks/run.py --device cpu|cuda --out DIR [--quick]
                           [--ref-python /path/to/torch-2.14/python] [--workloads a,b]
                           [--first-calls K]
  python benchmarks/run.py --out DIR --report-only            (re-render DIR/results.*)
  python benchmarks/run.py --out DIR --merge A.json B.json    (combine runs, then render)

Writes DIR/results.json (every measurement and the ratios), DIR/results.md (the ratio table,
absolute times, the targets) and DIR/results.png (needs matplotlib: pip install matplotlib).
See benchmarks/README.md for what each number means.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from workloads import NAMES, SIZES, describe  # noqa: E402

MARK = "@@BENCH@@"

# (mode, which python runs it): the order matters, later modes read what earlier ones saved
MAIN_MODES = ("eager", "tc_cold", "tc_warm", "nb_cold", "nb_load_cache", "nb_load_nocache",
              "steady")
REF_MODES = ("ref_cold", "ref_load", "ref_steady")

# Targets (issue: "hit the performance targets"). Each: key, text, ratio key, bound, where.
TARGETS = (
    ("load_cache_vs_cold", "fresh-process load + first call with the cache <= 10% of cold "
     "precompile (CPU)", 0.10),
    ("load_cache_vs_ref_load", "fresh-process load + first call with the cache <= 1/5 of "
     "torch 2.14.1's own precompile load + first call", 0.20),
    ("steady_vs_tc", "steady state within 3% of torch.compile", 1.03),
    ("cold_vs_tc_cold", "precompile no slower than 1.2x torch.compile's cold first call", 1.20),
    ("load_cache_vs_eager_first", "fresh-process load + first call with the cache <= 1.1x "
     "eager's own first call in a fresh process", 1.10),
)
OVERHEAD_TARGET_US = 10.0
GPU_TRAIN_LOAD_S = 1.0


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_child(python: str, mode: str, workload: str, device: str, workdir: str,
              tmp_base: str, threads: int | None, timeout: float, extra: list[str]) -> dict:
    """One measurement in a fresh process with fresh, empty compiler caches."""
    root = tempfile.mkdtemp(prefix=f"{workload}_{mode}_", dir=tmp_base)
    env = dict(os.environ)
    for var, sub in (("TMPDIR", "tmp"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                     ("TRITON_CACHE_DIR", "triton")):
        env[var] = os.path.join(root, sub)  # TMPDIR too: inductor's precompiled headers live there
        os.makedirs(env[var])
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [python, os.path.join(HERE, "measure.py"), mode, workload, device, workdir, *extra]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"timed out after {timeout:.0f} s"}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - t
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith(MARK)), None)
    if p.returncode != 0 or line is None:
        tail = (p.stderr or p.stdout).strip().splitlines()[-15:]
        return {"mode": mode, "error": f"exit {p.returncode}", "stderr_tail": tail,
                "wall_s": wall}
    res = json.loads(line[len(MARK):])
    res["wall_s"] = wall
    return res


def _get(m: dict, mode: str, key: str) -> float | None:
    v = m.get(mode, {}).get(key)
    return v if isinstance(v, (int, float)) else None


def _first(m: dict, mode: str, key: str) -> float | None:
    """A first call's seconds: the median of its samples where --first-calls took more than
    one (`more`: the later fresh processes' values), else its one sample."""
    v = _get(m, mode, key)
    more = m.get(mode, {}).get("more") or []
    return statistics.median([v, *more]) if v is not None and more else v


def _steady(m: dict, mode: str, system: str, stat: str) -> float | None:
    return m.get(mode, {}).get("steady", {}).get(system, {}).get(stat)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def derive(m: dict) -> tuple[dict, dict]:
    """(times in seconds, ratios) of one workload's measurements."""
    s = {
        "eager_first_call": _first(m, "eager", "first_call_s"),
        "tc_cold_first_call": _get(m, "tc_cold", "first_call_s"),
        "tc_warm_load_first_call": _get(m, "tc_warm", "total_s"),
        "nb_precompile": _get(m, "nb_cold", "precompile_s"),
        "nb_load_first_call_cache": _first(m, "nb_load_cache", "total_s"),
        "nb_load_first_call_nocache": _get(m, "nb_load_nocache", "total_s"),
        "ref_precompile": _get(m, "ref_cold", "precompile_s"),
        "ref_load_first_call": _get(m, "ref_load", "total_s"),
    }
    for stat in ("min_s", "median_s"):
        tag = stat[:-2]
        s[f"steady_eager_{tag}"] = _steady(m, "steady", "eager", stat)
        s[f"steady_tc_{tag}"] = _steady(m, "steady", "torch.compile", stat)
        s[f"steady_nb_{tag}"] = _steady(m, "steady", "precompile_nb", stat)
        s[f"steady_nb_graph_{tag}"] = _steady(m, "steady", "precompile_nb graph only", stat)
        s[f"steady_ref_eager_{tag}"] = _steady(m, "ref_steady", "eager", stat)
        s[f"steady_ref_{tag}"] = _steady(m, "ref_steady", "reference", stat)
        s[f"steady_ref_graph_{tag}"] = _steady(m, "ref_steady", "reference graph only", stat)
        for who in ("nb", "ref"):
            a, b = s[f"steady_{who}_{tag}"], s[f"steady_{who}_graph_{tag}"]
            s[f"driver_overhead_{who}_{tag}"] = a - b if a is not None and b is not None else None
    r = {
        "load_cache_vs_cold": _ratio(s["nb_load_first_call_cache"], s["nb_precompile"]),
        "load_cache_vs_ref_load": _ratio(s["nb_load_first_call_cache"], s["ref_load_first_call"]),
        "load_nocache_vs_cold": _ratio(s["nb_load_first_call_nocache"], s["nb_precompile"]),
        "cold_vs_tc_cold": _ratio(s["nb_precompile"], s["tc_cold_first_call"]),
        "load_cache_vs_tc_warm": _ratio(s["nb_load_first_call_cache"],
                                        s["tc_warm_load_first_call"]),
        "load_cache_vs_eager_first": _ratio(s["nb_load_first_call_cache"],
                                            s["eager_first_call"]),
        "steady_vs_tc": _ratio(s["steady_nb_min"], s["steady_tc_min"]),
        "steady_vs_tc_median": _ratio(s["steady_nb_median"], s["steady_tc_median"]),
        "steady_vs_eager": _ratio(s["steady_nb_min"], s["steady_eager_min"]),
        "tc_steady_vs_eager": _ratio(s["steady_tc_min"], s["steady_eager_min"]),
        "ref_steady_vs_its_eager": _ratio(s["steady_ref_min"], s["steady_ref_eager_min"]),
        "ref_cold_vs_nb_cold": _ratio(s["ref_precompile"], s["nb_precompile"]),
        "ref_load_vs_ref_cold": _ratio(s["ref_load_first_call"], s["ref_precompile"]),
    }
    return s, r


# the time that says how disturbed a sample of each mode was (smaller: less disturbed)
PRIMARY = {"eager": "first_call_s", "tc_cold": "first_call_s", "tc_warm": "total_s",
           "nb_cold": "precompile_s", "nb_load_cache": "total_s", "nb_load_nocache": "total_s",
           "ref_cold": "precompile_s", "ref_load": "total_s"}


def merge(runs: list[dict]) -> dict:
    """Several runs of the same benchmark in one: on a shared machine a sample can only be
    slowed down by other load, never sped up, so each one-shot measurement keeps its fastest
    sample (like timeit's min), and each steady-state system its fastest round over all runs.
    The samples seen are kept under "samples"."""
    out = {"meta": dict(runs[-1]["meta"]), "workloads": {}}
    out["meta"]["merged_runs"] = [r["meta"]["date"] for r in runs]
    out["meta"]["total_s"] = sum(r["meta"].get("total_s", 0) for r in runs)
    names = sorted(dict.fromkeys(n for r in runs for n in r["workloads"]),
                   key=lambda n: NAMES.index(n) if n in NAMES else len(NAMES))
    for n in names:
        wls = [r["workloads"][n] for r in runs if n in r["workloads"]]
        merged = {"description": wls[-1]["description"], "measurements": {}}
        modes = list(dict.fromkeys(m for w in wls for m in w["measurements"]))
        for mode in modes:
            samples = [w["measurements"][mode] for w in wls if mode in w["measurements"]]
            ok = [x for x in samples if "error" not in x and "skipped" not in x]
            if not ok:
                merged["measurements"][mode] = samples[-1]
            elif mode in PRIMARY:
                best = dict(min(ok, key=lambda x: x.get(PRIMARY[mode], float("inf"))))
                best.pop("more", None)  # a run's --first-calls samples: the fastest rules here
                best["samples"] = [x.get(PRIMARY[mode]) for x in ok]
                merged["measurements"][mode] = best
            else:  # steady modes: per system, the fastest round of any run
                best = dict(ok[-1])
                best["steady"] = {}
                for system in dict.fromkeys(k for x in ok for k in x.get("steady", {})):
                    per = [x["steady"][system] for x in ok if system in x.get("steady", {})]
                    best["steady"][system] = {
                        "min_s": min(p["min_s"] for p in per),
                        "median_s": min(p["median_s"] for p in per),
                        "samples_min_s": [p["min_s"] for p in per]}
                merged["measurements"][mode] = best
        out["workloads"][n] = merged
    return out


def verdicts(workloads: dict, device: str) -> list[dict]:
    """Each target: met or not (None: not measured in this run), per workload, with the
    measured value."""
    out = []
    for key, text, bound in TARGETS:
        if key == "load_cache_vs_cold" and device != "cpu":
            continue  # the 10% target is stated for CPU
        rows = {}
        for name, w in workloads.items():
            v = w["ratios"].get(key)
            rows[name] = {"value": v, "met": None if v is None else v <= bound}
        measured = [r["met"] for r in rows.values() if r["met"] is not None]
        out.append({"target": key, "text": text, "bound": bound, "per_workload": rows,
                    "met": all(measured) if measured else None})
    w = workloads.get("tiny_mlp")
    if w and device == "cpu":  # the driver overhead target is stated for CPU
        nb = w["seconds"].get("driver_overhead_nb_min")
        ref = w["seconds"].get("driver_overhead_ref_min")
        out.append({"target": "driver_overhead_us",
                    "text": f"driver overhead <= {OVERHEAD_TARGET_US:g} us per call on the "
                            "tiny MLP (artifact call - its compiled graph's call)",
                    "bound": OVERHEAD_TARGET_US,
                    "per_workload": {"tiny_mlp": {
                        "value": None if nb is None else nb * 1e6,
                        "reference_us": None if ref is None else ref * 1e6,
                        "met": None if nb is None else nb * 1e6 <= OVERHEAD_TARGET_US}},
                    "met": None if nb is None else nb * 1e6 <= OVERHEAD_TARGET_US})
    w = workloads.get("transformer_train")
    if w and device != "cpu":  # stated for the H200, in seconds
        v = w["seconds"].get("nb_load_first_call_cache")
        out.append({"target": "gpu_train_load_s",
                    "text": f"GPU: transformer training step, fresh-process load + first step "
                            f"with the cache <= {GPU_TRAIN_LOAD_S:g} s",
                    "bound": GPU_TRAIN_LOAD_S,
                    "per_workload": {"transformer_train": {
                        "value": v, "met": None if v is None else v <= GPU_TRAIN_LOAD_S}},
                    "met": None if v is None else v <= GPU_TRAIN_LOAD_S})
    return out


# ---------------------------------------------------------------------------------------------
# report


def _fmt_ratio(v: float | None) -> str:
    return "–" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}")


def _fmt_s(v: float | None) -> str:
    if v is None:
        return "–"
    if v >= 1:
        return f"{v:.2f} s"
    if v >= 1e-3:
        return f"{v * 1e3:.2f} ms"
    return f"{v * 1e6:.1f} µs"


RATIO_COLUMNS = (
    ("load_cache_vs_cold", "nb load+1st call (cache) / nb precompile", "≤ 0.10"),
    ("load_cache_vs_ref_load", "nb load+1st call (cache) / ref load+1st call", "≤ 0.20"),
    ("load_nocache_vs_cold", "nb load+1st call (no cache) / nb precompile", ""),
    ("load_cache_vs_tc_warm", "nb load+1st call (cache) / torch.compile warm start", ""),
    ("load_cache_vs_eager_first", "nb load+1st call (cache) / eager's own 1st call", "≤ 1.1"),
    ("cold_vs_tc_cold", "nb precompile / torch.compile cold 1st call", "≤ 1.2"),
    ("ref_cold_vs_nb_cold", "ref precompile / nb precompile", ""),
    ("steady_vs_tc", "nb steady / torch.compile steady (best round)", "≤ 1.03"),
    ("steady_vs_tc_median", "nb steady / torch.compile steady (median round)", ""),
    ("steady_vs_eager", "nb steady / eager steady", ""),
    ("tc_steady_vs_eager", "torch.compile steady / eager steady", ""),
    ("ref_steady_vs_its_eager", "ref steady / eager (torch 2.14.1)", ""),
)
SECONDS_ROWS = (
    ("eager_first_call", "eager: first call"),
    ("tc_cold_first_call", "torch.compile: cold first call (compile + run)"),
    ("tc_warm_load_first_call", "torch.compile: warm start (load_cache_artifacts + first call)"),
    ("nb_precompile", "precompile_nb: precompile (cold)"),
    ("nb_load_first_call_cache", "precompile_nb: load + first call, with cache"),
    ("nb_load_first_call_nocache", "precompile_nb: load + first call, without cache"),
    ("ref_precompile", "torch 2.14.1 precompile (cold)"),
    ("ref_load_first_call", "torch 2.14.1 precompile: load + first call, with cache"),
    ("steady_eager_min", "steady: eager per call"),
    ("steady_tc_min", "steady: torch.compile per call"),
    ("steady_nb_min", "steady: precompile_nb per call"),
    ("steady_nb_graph_min", "steady: precompile_nb compiled graph alone"),
    ("driver_overhead_nb_min", "precompile_nb driver overhead per call"),
    ("steady_ref_eager_min", "steady: eager per call (torch 2.14.1)"),
    ("steady_ref_min", "steady: torch 2.14.1 precompile per call"),
    ("steady_ref_graph_min", "steady: torch 2.14.1 compiled graph alone"),
    ("driver_overhead_ref_min", "torch 2.14.1 driver overhead per call"),
)


def markdown(result: dict) -> str:
    meta, wls = result["meta"], result["workloads"]
    names = list(wls)
    lines = [f"# precompile_nb benchmarks — {meta['device']}", "",
             f"{meta['date']}; {meta['machine']}; torch {meta['torch']} "
             f"(reference: {meta.get('ref_torch') or 'not run'}); threads: {meta['threads']}; "
             f"python {meta['python']}. Every measurement in a fresh process with empty "
             "compiler caches; steady state = best of interleaved rounds."
             + (f" Merged from {len(meta['merged_runs'])} runs ({', '.join(meta['merged_runs'])})"
                ": each one-shot measurement keeps its fastest sample."
                if meta.get("merged_runs") else "")
             + (f" Eager's first call and the load with the cache + first call: medians of "
                f"{meta['first_calls']} fresh processes each, taken in turn."
                if meta.get("first_calls", 1) > 1 else ""), "",
             "## Ratios (lower is better for precompile_nb)", "",
             "| ratio | target | " + " | ".join(names) + " |",
             "| --- | --- | " + " | ".join("---" for _ in names) + " |"]
    for key, text, target in RATIO_COLUMNS:
        lines.append(f"| {text} | {target} | "
                     + " | ".join(_fmt_ratio(wls[n]["ratios"].get(key)) for n in names) + " |")
    lines += ["", "## Absolute times", "", "| measurement | " + " | ".join(names) + " |",
              "| --- | " + " | ".join("---" for _ in names) + " |"]
    for key, text in SECONDS_ROWS:
        vals = [wls[n]["seconds"].get(key) for n in names]
        if all(v is None for v in vals):
            continue
        lines.append(f"| {text} | " + " | ".join(_fmt_s(v) for v in vals) + " |")
    lines += ["", "## Targets", ""]
    for t in result["targets"]:
        status = {True: "met", False: "NOT met", None: "not measured in this run"}[t["met"]]
        micro = t["target"] == "driver_overhead_us"
        show = ((lambda v: _fmt_s(None if v is None else v * 1e-6)) if micro
                else _fmt_s if t["target"] == "gpu_train_load_s" else _fmt_ratio)
        vals = ", ".join(
            f"{n}: {show(v['value'])}"
            + ("" if v["met"] is None else (" ✓" if v["met"] else " ✗"))
            + (f" (reference: {_fmt_s(v['reference_us'] * 1e-6)})"
               if v.get("reference_us") is not None else "")
            for n, v in t["per_workload"].items())
        lines.append(f"- **{status}** — {t['text']}: {vals}")
    lines += ["", "## Workloads", ""]
    for n in names:
        lines.append(f"- `{n}`: {wls[n]['description']}")
    errors = [(n, mode, r) for n in names for mode, r in wls[n]["measurements"].items()
              if "error" in r or "skipped" in r]
    if errors:
        lines += ["", "## Measurements that did not run", ""]
        for n, mode, r in errors:
            why = r.get("skipped") or (r["error"] + ": "
                                       + " / ".join(r.get("stderr_tail", [])[-2:]))
            lines.append(f"- `{n}` `{mode}`: {why}")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot (pip install matplotlib)")
        return False
    wls = result["workloads"]
    names = list(wls)
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5), gridspec_kw={"width_ratios": [3, 2, 1]})
    start = (("eager_first_call", "eager's own 1st call"),
             ("tc_cold_first_call", "torch.compile cold 1st call"),
             ("tc_warm_load_first_call", "torch.compile warm start"),
             ("nb_precompile", "precompile_nb precompile"),
             ("nb_load_first_call_nocache", "precompile_nb load+1st (no cache)"),
             ("nb_load_first_call_cache", "precompile_nb load+1st (cache)"),
             ("ref_precompile", "torch 2.14.1 precompile"),
             ("ref_load_first_call", "torch 2.14.1 load+1st (cache)"))
    # series that no workload measured (e.g. the reference on torch < 2.14) are left out
    start = tuple(kv for kv in start if any(wls[n]["seconds"].get(kv[0]) for n in names))
    width = 0.8 / len(start)
    ax = axes[0]
    shown = [v for n in names for k, _ in start if (v := wls[n]["seconds"].get(k))]
    bottom = min(shown) / 2 if shown else 0.1
    for i, (key, label) in enumerate(start):
        vals = [wls[n]["seconds"].get(key) for n in names]
        xs = [x + i * width for x in range(len(names))]
        ax.bar(xs, [v - bottom if v else 0 for v in vals], width, bottom=bottom, label=label)
        for x, v in zip(xs, vals):
            if v:
                ax.text(x, v * 1.05, f"{v:.1f}" if v >= 1 else f"{v:.2f}", ha="center",
                        fontsize=6, rotation=90)
    ax.set_yscale("log")
    ax.set_ylim(bottom, max(shown) * 3 if shown else 1)
    ax.set_ylabel("seconds (log)")
    ax.set_title("Start-up, fresh process, empty compiler caches")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, fontsize=8)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    ax = axes[1]
    steady = (("tc_steady_vs_eager", "torch.compile"), ("steady_vs_eager", "precompile_nb"),
              ("ref_steady_vs_its_eager", "torch 2.14.1 precompile"))
    steady = tuple(kv for kv in steady if any(wls[n]["ratios"].get(kv[0]) for n in names))
    width = 0.8 / max(len(steady), 1)  # a run without the steady mode: an empty panel
    for i, (key, label) in enumerate(steady):
        vals = [wls[n]["ratios"].get(key) or 0 for n in names]
        xs = [x + i * width for x in range(len(names))]
        ax.bar(xs, vals, width, label=label)
        for x, v in zip(xs, vals):
            if v:
                ax.text(x, v + 0.02, f"{v:.2f}", ha="center", fontsize=6)
    ax.axhline(1.0, color="gray", lw=0.8)
    if not steady:
        ax.text(0.5, 0.5, "not measured in this run", ha="center", transform=ax.transAxes)
    ax.set_ylabel("per-call time / eager")
    ax.set_title("Steady state (best round), relative to eager")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, fontsize=8)
    ax.legend(fontsize=7)
    ax = axes[2]
    w = wls.get("tiny_mlp", {}).get("seconds", {})
    who = [(label, w.get(f"driver_overhead_{k}_min"), c) for k, label, c in
           (("nb", "precompile_nb", "tab:orange"), ("ref", "torch 2.14.1", "tab:green"))]
    who = [(label, v * 1e6, c) for label, v, c in who if v is not None]  # measured only
    ax.bar([label for label, _, _ in who], [v for _, v, _ in who],
           color=[c for _, _, c in who])
    for x, (_, v, _) in enumerate(who):
        ax.text(x, v + 0.3, f"{v:.1f} µs", ha="center", fontsize=8)
    if not who:
        ax.text(0.5, 0.5, "not measured\nin this run", ha="center", transform=ax.transAxes)
    if result["meta"]["device"] == "cpu":  # the target is stated for the CPU
        ax.axhline(OVERHEAD_TARGET_US, color="red", lw=0.8, ls="--", label="target")
        ax.legend(fontsize=7)
    ax.set_ylabel("µs per call")
    ax.set_title("Driver overhead, tiny MLP")
    fig.suptitle(f"precompile_nb benchmarks ({result['meta']['device']}, torch "
                 f"{result['meta']['torch']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------------------------------------


def _python_info(python: str) -> dict | None:
    code = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'precompile': "
            "hasattr(torch.compiler, 'precompile'), 'cuda': torch.cuda.is_available(), "
            "'threads': torch.get_num_threads()}))")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


_STACK_BYTECODE = ("import importlib.util as u, os, torch._inductor.compile_fx as c; "
                   "print(os.path.exists(u.cache_from_source(c.__file__)))")


def ensure_bytecode(python: str) -> str:
    """Bytecode as installed packages have it (pip writes it at install), so that no timed
    child compiles sources: precompile_nb's (a checkout, PYTHONDONTWRITEBYTECODE: ~50 ms of
    every CPU load, cpu_round25), and torch's where it has none and none may be written (round
    37's GPU host: import torch + Inductor 8.7-9.7 s a process, in every cold start). Returns
    what the run had, for its meta."""
    if subprocess.run([python, "-m", "compileall", "-q", os.path.join(ROOT, "precompile_nb")],
                      cwd=ROOT).returncode:
        log("could not compile precompile_nb's bytecode (a read-only checkout?): its loads "
            "below include compiling its sources")

    def present() -> bool:
        p = subprocess.run([python, "-c", _STACK_BYTECODE], capture_output=True, text=True)
        return p.stdout.strip().endswith("True")

    if present():
        return "installed"
    log("torch's bytecode is missing where this Python reads it, and importing did not write "
        "it: compiling it as an install would (benchmarks/site_bytecode.py)")
    subprocess.run([python, os.path.join(HERE, "site_bytecode.py")], cwd=ROOT)
    if present():
        return "compiled by run.py (site_bytecode.py)"
    log("torch's bytecode is still missing: every child compiles torch from source, and each "
        "cold start below includes it")
    return "none: compiled from source in every process"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"))
    ap.add_argument("--out", required=True, help="folder for results.json/.md/.png")
    ap.add_argument("--quick", action="store_true", help="only the tiny MLP (smoke test)")
    ap.add_argument("--workloads", help=f"comma-separated subset of {','.join(NAMES)}")
    ap.add_argument("--python", default=sys.executable,
                    help="python with precompile_nb's torch (default: this one)")
    ap.add_argument("--ref-python", help="python whose torch has torch.compiler.precompile "
                    "(torch >= 2.14), e.g. /work/venv214/bin/python; default: --python if "
                    "its torch has it, else the reference is skipped")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS for every measuring process (default: 1 on cpu, "
                    "unset on cuda); the same for all systems")
    ap.add_argument("--modes", help=f"comma-separated subset of {','.join(MAIN_MODES)}, in "
                    "that order (e.g. nb_cold,steady: the steady state alone)")
    ap.add_argument("--rounds", type=int, default=30, help="steady-state rounds")
    ap.add_argument("--first-calls", type=int, default=1, metavar="K",
                    help="measure eager's first call and the load with the cache + first call "
                    "K times each, in turn, fresh processes; their ratio is of the medians")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per measurement")
    ap.add_argument("--keep-artifacts", action="store_true",
                    help="keep what the measurements saved (python_code, caches) in OUT/work")
    ap.add_argument("--report-only", action="store_true",
                    help="re-render results.md/.png (and the targets) from OUT/results.json")
    ap.add_argument("--merge", nargs="+", metavar="RESULTS_JSON",
                    help="combine the results.json of several runs (same device and torch) "
                    "into OUT: each measurement keeps its least disturbed sample")
    args = ap.parse_args(argv)
    if args.merge:
        os.makedirs(args.out, exist_ok=True)
        runs = []
        for f in args.merge:
            with open(f) as fh:
                runs.append(json.load(fh))
        with open(os.path.join(args.out, "results.json"), "w") as fh:
            json.dump(merge(runs), fh, indent=1)
        return _report(args.out)
    if args.report_only:
        return _report(args.out)
    if args.device is None:
        ap.error("--device is required")
    if args.first_calls < 1:
        ap.error(f"--first-calls takes a count of 1 or more (got {args.first_calls}): 1 measures "
                 "each first call once, 5 takes the medians of five")

    names = ["tiny_mlp"] if args.quick else (args.workloads.split(",") if args.workloads
                                             else list(NAMES))
    for n in names:
        if n not in SIZES:
            ap.error(f"unknown workload {n!r}; known: {', '.join(NAMES)}")
    threads = args.threads if args.threads is not None else (1 if args.device == "cpu" else None)
    main_info = _python_info(args.python)
    if main_info is None:
        ap.error(f"{args.python} cannot import torch")
    if args.device == "cuda" and not main_info["cuda"]:
        ap.error("--device cuda, but torch.cuda.is_available() is False")
    ref_python = args.ref_python or (args.python if main_info["precompile"] else None)
    ref_info = _python_info(ref_python) if ref_python else None
    if ref_python and not (ref_info and ref_info["precompile"]):
        log(f"{ref_python}: torch {ref_info and ref_info['torch']} has no "
            "torch.compiler.precompile; the reference is skipped")
        ref_python, ref_info = None, None
    os.makedirs(args.out, exist_ok=True)
    tmp_base = tempfile.mkdtemp(prefix="precompile_nb_bench_")
    bytecode = ensure_bytecode(args.python)
    log(f"device {args.device}, torch {main_info['torch']}, reference: "
        f"{ref_info['torch'] if ref_info else 'none'}; threads {threads or 'default'}; "
        f"workloads {', '.join(names)}")
    result: dict[str, Any] = {
        "meta": {"device": args.device, "torch": main_info["torch"],
                 "ref_torch": ref_info["torch"] if ref_info else None,
                 "python": platform.python_version(), "threads": threads or "default",
                 "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                 "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                 "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
                 "rounds": args.rounds, "first_calls": args.first_calls,
                 "torch_bytecode": bytecode},
        "workloads": {},
    }
    t_all = time.perf_counter()
    try:
        for n in names:
            workdir = os.path.join(args.out if args.keep_artifacts else tmp_base, "work", n)
            os.makedirs(workdir, exist_ok=True)
            wl = {"description": describe(n, args.device), "measurements": {}}
            plan = [(m, args.python) for m in MAIN_MODES
                    if not args.modes or m in args.modes.split(",")]
            if ref_python:
                plan += [(m, ref_python) for m in REF_MODES]
            for mode, python in plan:
                log(f"{n}: {mode} ...")
                r = run_child(python, mode, n, args.device, workdir, tmp_base, threads,
                              args.timeout, ["--rounds", str(args.rounds)])
                wl["measurements"][mode] = r
                log(f"{n}: {mode} {_summary(r)}")
            for _ in range(args.first_calls - 1):
                _first_call_again(n, wl["measurements"], lambda mode: run_child(
                    args.python, mode, n, args.device, workdir, tmp_base, threads,
                    args.timeout, []))
            result["workloads"][n] = wl
            with open(os.path.join(args.out, "results.json"), "w") as fh:
                json.dump(result, fh, indent=1)  # partial results survive an interruption
            if not args.keep_artifacts:
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp_base, ignore_errors=True)
    result["meta"]["total_s"] = time.perf_counter() - t_all
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    log(f"measured in {result['meta']['total_s']:.0f} s")
    return _report(args.out)


_AGAIN = (("eager", "first_call_s"), ("nb_load_cache", "total_s"))


def _first_call_again(name: str, measured: dict, run: Any) -> None:
    """One more sample of eager's first call and of the load with the cache + first call, in
    turn (--first-calls), where the plan measured both and neither failed: each value goes
    to its mode's `more` list (derive takes the median)."""
    if not all(isinstance(measured.get(mode, {}).get(key), (int, float)) for mode, key in _AGAIN):
        return
    for mode, key in _AGAIN:
        r = run(mode)
        log(f"{name}: {mode} again {_summary(r)}")
        if isinstance(r.get(key), (int, float)):
            measured[mode].setdefault("more", []).append(r[key])


def _report(out: str) -> int:
    """Derive ratios and targets from OUT/results.json; write results.md/.png next to it."""
    with open(os.path.join(out, "results.json")) as fh:
        result = json.load(fh)
    for wl in result["workloads"].values():
        wl["seconds"], wl["ratios"] = derive(wl["measurements"])
    result["targets"] = verdicts(result["workloads"], result["meta"]["device"])
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    md = markdown(result)
    with open(os.path.join(out, "results.md"), "w") as fh:
        fh.write(md)
    plotted = plot(result, os.path.join(out, "results.png"))
    print(md)
    log(f"wrote {out}/results.json, results.md" + (", results.png" if plotted else ""))
    return 0


def _summary(r: dict) -> str:
    if "error" in r:
        return f"FAILED ({r['error']}): " + " | ".join(r.get("stderr_tail", [])[-3:])
    if "skipped" in r:
        return f"skipped ({r['skipped']})"
    parts = [f"{k}={_fmt_s(r[k])}" for k in ("precompile_s", "load_s", "first_call_s",
                                              "total_s") if k in r]
    for k, v in r.get("steady", {}).items():
        parts.append(f"{k}={_fmt_s(v['min_s'])}")
    if r.get("gc_s", {}).get("2"):  # a full collection inside the timed window (GcClock)
        parts.append(f"full collection in it {_fmt_s(r['gc_s']['2'])}")
    return ", ".join(parts) + f" (process {r.get('wall_s', 0):.1f} s)"


if __name__ == "__main__":
    sys.exit(main())
