"""Where a cold start's wall time goes, precompile_nb against torch.compile, as each is timed
by run.py (imports included): measure.py's nb_cold and tc_cold in fresh processes with empty
compiler caches, under a wall-clock stack sampler (stack_sampler.py, 5 ms).

usage: python benchmarks/cold_timeline.py [--device cpu|cuda] [--workloads a,b]
                                          [--tools nb,tc] [--repeats N] [--out DIR]
       python benchmarks/cold_timeline.py --summarize DIR [--parts]

Each run's main thread is split into phases by the innermost frame that names one (below);
an import is labelled by the package whose module body runs. The other threads are counted
where they are not idle (waiting on a queue or a lock). Writes DIR/<workload>_<tool>_<k>.json
(the samples) and DIR/summary.md; prints the summary. --summarize DIR --parts prints each
precompile run's main-thread seconds by part of the pipeline instead (PARTS: the capture's
trace, the decomposition trace, Inductor's compile and what inside it builds launchers or
imports sympy.physics, the tuning run, the whole lowering).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import ensure_bytecode, run_child  # noqa: E402

MODES = {"nb": "nb_cold", "tc": "tc_cold"}

# innermost first: the first rule whose path fragment is in a frame's "path:function" names
# the phase of a sample (paths as stack_sampler._short writes them)
PHASES = (
    ("triton/compiler/", "triton compile"), ("triton/backends/", "triton compile"),
    ("triton/runtime/build", "triton build (gcc)"), ("triton/runtime/", "triton runtime"),
    ("torch/_inductor/cpp_builder", "c++ build"), ("torch/_inductor/runtime/", "inductor runtime"),
    ("torch/_inductor/select_algorithm", "autotune"), ("torch/_inductor/autotune", "autotune"),
    ("torch/_inductor/codegen/", "inductor codegen"),
    ("torch/_inductor/scheduler", "inductor sched"),
    ("torch/_inductor/codecache", "inductor codecache"),
    ("torch/_inductor/", "inductor lowering"), ("torch/_functorch/", "aot autograd"),
    ("torch/_dynamo/", "dynamo"), ("torch/fx/experimental/proxy_tensor", "make_fx"),
    ("torch/_subclasses/", "fake tensors"), ("torch/fx/", "fx"),
    ("precompile_nb/", "precompile_nb"), ("torch/cuda/", "cuda"),
)
IDLE = ("threading.py:wait", "queue.py:get", "threading.py:_wait_for_tstate_lock",
        "selectors.py:select", "concurrent/futures/thread.py:_worker", "stack_sampler")


def phase(stack: list[str]) -> str:
    """A main-thread sample's phase: an import (by the outermost package being imported that
    is not precompile_nb's), a wait, or a pipeline part."""
    loads = [i for i, n in enumerate(stack) if n.endswith(":_find_and_load")]
    if loads:  # innermost first: loads[-1] is the outermost import statement's
        bodies = [n for n in stack[:loads[-1]] if n.endswith(":<module>")]
        lib = [n for n in bodies if not n.startswith("precompile_nb/")]
        mod = (lib or bodies or ["(loader)"])[-1]
        return "import " + "/".join(mod.split(":")[0].split("/")[:2])
    if stack and stack[0].split(":")[0] in ("threading.py", "queue.py", "selectors.py"):
        inner = next((p for n in stack if (p := phase_of(n))), "?")
        return f"wait ({inner})"
    return next((p for n in stack if (p := phase_of(n))), "other: " + (stack[0] if stack else ""))


def phase_of(name: str) -> str | None:
    return next((label for frag, label in PHASES if frag in name), None)


def summarize_run(path: str) -> dict:
    with open(path) as f:
        rec = json.load(f)
    names = rec["names"]
    main: collections.Counter = collections.Counter()
    others: collections.Counter = collections.Counter()
    segments: list[list] = []  # [phase, start, end]
    for t, tid, ids in rec["samples"]:
        stack = [names[i] for i in ids]
        if tid == 0:
            p = phase(stack)
            main[p] += 1
            if segments and segments[-1][0] == p:
                segments[-1][2] = t
            else:
                segments.append([p, t, t])
        elif stack and not any(stack[0].startswith(x) or x in stack[0] for x in IDLE):
            others[next((q for n in stack if (q := phase_of(n))), stack[0])] += 1
    n = sum(main.values()) or 1
    span = rec["samples"][-1][0] if rec["samples"] else 0.0
    # seconds a sample stands for: the sampler's interval and its waits for the interpreter
    # (8.5-8.9 ms at 5 ms asked, on the H100 host); every thread is sampled each time
    scale = span / n
    return {"span_s": span, "main": {k: round(v * scale, 3) for k, v in main.most_common()},
            "others": {k: round(v * scale, 3) for k, v in others.most_common(8)},
            "segments": [s for s in segments if s[2] - s[1] >= 0.05]}


# parts of a precompile, each by the frames its main-thread samples all hold (--parts)
PARTS = (
    ("the capture's trace", ("core/_compat/tracing.py:make_fx_trace",)),
    ("  of which: the backward", ("core/_compat/tracing.py:tagged_backward",)),
    ("the decomposition trace before Inductor", ("straight_to_inductor.py:decomposed",)),
    ("Inductor's compile of the graph", ("core/_compat/inductor.py:inner",)),
    ("  of which: gcc building Triton's launchers", ("core/_compat/inductor.py:inner",
                                                    "make_launcher", "triton/runtime/build.py")),
    ("  of which: sympy.physics imported", ("core/_compat/inductor.py:inner",
                                           "sympy/physics/__init__.py:<module>")),
    ("the compiled graph run once to tune its kernels", ("autotune.py:autotune_now",)),
    ("all of the lowering", ("precompile_nb/core/lower.py:",)),
)


def parts_of(path: str) -> dict:
    """Main-thread seconds of each of PARTS in one run's samples (a sample counts for every
    part whose frames its stack holds, so the rows overlap where they say "of which")."""
    with open(path) as f:
        rec = json.load(f)
    names = rec["names"]
    main = [[names[i] for i in ids] for _, tid, ids in rec["samples"] if tid == 0]
    scale = (rec["samples"][-1][0] / len(main)) if main else 0.0
    return {label: round(scale * sum(all(any(m in n for n in st) for m in marks)
                                     for st in main), 2) for label, marks in PARTS}


def _merge(rows: list[dict]) -> dict:
    """The mean of each phase's seconds over runs (0 where a run lacks it)."""
    keys = {k for r in rows for k in r["main"]}
    return {k: sum(r["main"].get(k, 0.0) for r in rows) / len(rows) for k in keys}


def report(out: str, results: dict) -> str:
    lines = ["# Cold start, phase by phase (main thread, wall seconds, mean of runs)", ""]
    for workload, by_tool in results.items():
        tools = sorted(by_tool)
        merged = {tool: _merge([r["timeline"] for r in by_tool[tool]]) for tool in tools}
        totals = {tool: sum(r["timed_s"] for r in by_tool[tool]) / len(by_tool[tool])
                  for tool in tools}
        lines += [f"## {workload}", "", "| phase | " + " | ".join(tools) + " |",
                  "| --- |" + " ---: |" * len(tools),
                  "| **timed (s), under the sampler** | "
                  + " | ".join(f"{totals[t]:.2f}" for t in tools) + " |"]
        lines.append("| imports, all | " + " | ".join(
            f"{sum(v for k, v in merged[t].items() if k.startswith('import')):.2f}"
            for t in tools) + " |")
        keys = sorted({k for m in merged.values() for k in m},
                      key=lambda k: -max(m.get(k, 0.0) for m in merged.values()))
        for k in keys:
            if max(m.get(k, 0.0) for m in merged.values()) >= 0.02:
                lines.append(f"| {k} | " + " | ".join(f"{merged[t].get(k, 0.0):.2f}"
                                                      for t in tools) + " |")
        for tool in tools:
            last = by_tool[tool][-1]["timeline"]
            lines += ["", f"{tool}, last run: other threads busy (s): {last['others']}",
                      f"{tool}, last run: segments >= 50 ms: "
                      + "; ".join(f"{p} {a:.2f}-{b:.2f}" for p, a, b in last["segments"])]
        lines.append("")
    text = "\n".join(lines)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workloads", default="tiny_mlp,transformer_infer,cnn_dynamic_infer")
    ap.add_argument("--tools", default="nb,tc")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cold_timeline"))
    ap.add_argument("--summarize", help="a DIR of an earlier run: its summary again")
    ap.add_argument("--parts", action="store_true", help="with --summarize: each precompile "
                    "run's main-thread seconds by part of the pipeline (PARTS)")
    a = ap.parse_args()
    if a.parts and not a.summarize:
        ap.error("--parts reads an earlier run's samples: give its folder with --summarize DIR")
    if a.parts:
        for name in sorted(os.listdir(a.summarize)):
            if name.endswith(".json") and "_nb_" in name:
                print(f"## {name[:-5]}\n\n| part | s |\n| --- | ---: |")
                for label, sec in parts_of(os.path.join(a.summarize, name)).items():
                    print(f"| {label} | {sec:.2f} |")
                print()
        return
    if a.summarize:
        with open(os.path.join(a.summarize, "runs.json")) as f:
            print(report(a.summarize, json.load(f)))
        return
    os.makedirs(a.out, exist_ok=True)
    print(f"torch's bytecode: {ensure_bytecode(sys.executable)}", flush=True)  # as run.py has it
    results: dict = {}
    tmp = tempfile.mkdtemp(prefix="cold_timeline_")
    for k in range(a.repeats):
        for workload in a.workloads.split(","):
            for tool in a.tools.split(","):  # in turn, so drift hits both alike
                path = os.path.join(a.out, f"{workload}_{tool}_{k}.json")
                os.environ["BENCH_STACKS"] = path
                workdir = tempfile.mkdtemp(dir=tmp)
                res = run_child(sys.executable, MODES[tool], workload, a.device, workdir, tmp,
                                None, a.timeout, [])
                if "error" in res:
                    print(f"{workload} {tool}: {res['error']} {res.get('stderr_tail')}")
                    continue
                timed = res.get("precompile_s") or res.get("first_call_s")
                row = {"timed_s": timed, "timeline": summarize_run(path)}
                results.setdefault(workload, {}).setdefault(tool, []).append(row)
                print(f"{workload} {tool} run {k}: {timed:.2f} s", flush=True)
    with open(os.path.join(a.out, "runs.json"), "w") as f:
        json.dump(results, f)
    print(report(a.out, results))


if __name__ == "__main__":
    main()
