"""The headline numbers, from the recorded results: one place the README and docs quote.

usage: python benchmarks/headline.py [--check]

Reads the latest CPU table, benchmarks/results/cpu_round32/results.json (run.py), benchmarks/
results/cuda_warm_load_gpt/results.json (warm_load.py --device cuda) and benchmarks/results/
cpu_call_overhead.txt (driver_overhead.py), and writes docs/numbers.md. With --check it writes
nothing and fails when docs/numbers.md differs from what it would write (after a new run).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # headline_suite, run as a script or not
from headline_suite import (cache_read_row, cpu_vs_ref_row, later_cpu_rows,  # noqa: E402
                            later_gpu_rows, load_paired_row, round34_rows,
                            suite_every_mode_rows, suite_runs_row)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
OUT = ROOT / "docs" / "numbers.md"
CPU_TABLE = "cpu_round32"  # the latest whole CPU run (run.py --device cpu)
WORKLOADS = ["tiny_mlp", "transformer_infer", "transformer_train", "cnn_bn_train"]


def _s(x: float) -> str:
    return f"{x:.3f} s" if x < 1 else f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return _s(lo) if _s(lo) == _s(hi) else f"{_s(lo)[:-2]}–{_s(hi)}"


def cpu_rows() -> tuple[dict, list[tuple[str, str, str]]]:
    data = json.loads((RESULTS / CPU_TABLE / "results.json").read_text())
    w = {k: data["workloads"][k]["measurements"] for k in WORKLOADS}

    def each(mode: str, key: str) -> list[float]:
        return [w[k][mode][key] for k in WORKLOADS]

    def overhead(k: str, mode: str, call: str, graph: str) -> float:
        st = w[k][mode]["steady"]
        return (st[call]["min_s"] - st[graph]["min_s"]) * 1e6

    src = f"benchmarks/results/{CPU_TABLE}/results.json"
    ratio = [w[k]["nb_cold"]["precompile_s"] / w[k]["tc_cold"]["first_call_s"] for k in WORKLOADS]
    steady = [w[k]["steady"]["steady"]["precompile_nb"]["min_s"]
              / w[k]["steady"]["steady"]["torch.compile"]["min_s"] for k in WORKLOADS]
    rows = [
        ("fresh process: load with the cache + first call, precompile_nb",
         _span(each("nb_load_cache", "total_s")), src),
        ("fresh process: load with its cache + first call, torch 2.14.1's precompile",
         _span(each("ref_load", "total_s")), src),
        ("fresh process: torch.compile warm start (load_cache_artifacts + first call)",
         _span(each("tc_warm", "total_s")), src),
        ("cold precompile (Inductor, fresh process, after `import torch`), precompile_nb",
         _span(each("nb_cold", "precompile_s")), src),
        ("cold precompile, torch 2.14.1's precompile", _span(each("ref_cold", "precompile_s")),
         src),
        ("torch.compile cold first call (compile + run)", _span(each("tc_cold", "first_call_s")),
         src),
        ("precompile / torch.compile cold first call", ", ".join(f"{r:.3f}" for r in ratio)
         + " (tiny MLP, transformer inference, transformer training, CNN+BN training)", src),
        ("steady state / torch.compile (best round)", ", ".join(f"{r:.3f}" for r in steady), src),
        ("driver overhead per call, tiny MLP: precompile_nb / torch 2.14.1",
         f"{overhead('tiny_mlp', 'steady', 'precompile_nb', 'precompile_nb graph only'):.1f} µs"
         f" / {overhead('tiny_mlp', 'ref_steady', 'reference', 'reference graph only'):.1f} µs",
         src),
        ("driver overhead per call, 2-layer transformer inference: precompile_nb / torch 2.14.1",
         f"{overhead('transformer_infer', 'steady', 'precompile_nb', 'precompile_nb graph only'):.1f}"
         f" µs / "
         f"{overhead('transformer_infer', 'ref_steady', 'reference', 'reference graph only'):.1f}"
         " µs", src),
        ("`import torch` in a fresh process", _span(each("eager", "import_torch_s")), src),
    ]
    return data["meta"], rows


def call_overhead_row() -> tuple[str, str, str]:
    """The last driver_overhead.py block of cpu_call_overhead.txt (working tree, best)."""
    text = (RESULTS / "cpu_call_overhead.txt").read_text()
    found = re.findall(r"driver \(working tree\).*?overhead best\s+([\d.]+) µs\s+median\s+"
                       r"([\d.]+) µs", text)
    best, median = found[-1]
    return ("driver overhead per call, tiny MLP, driver_overhead.py (best / median round)",
            f"{best} µs / {median} µs", "benchmarks/results/cpu_call_overhead.txt")


def gpu_rows() -> list[tuple[str, str, str]]:
    data = json.loads((RESULTS / "cuda_warm_load_gpt" / "results.json").read_text())
    runs = data["workloads"]["gpt_step"]["runs"]
    med = {k: statistics.median(r["total_s"] for r in v) for k, v in runs.items()
           if v and v[0].get("total_s") is not None}
    src = "benchmarks/results/cuda_warm_load_gpt/results.json"
    return [
        ("GPT step, fresh process: load with the cache + first step, precompile_nb",
         _s(med["nb_warm"]), src),
        ("GPT step, fresh process: torch.compile warm start + first step", _s(med["tc_warm"]),
         src),
        ("GPT step, fresh process: eager's own first step", _s(med["eager"]), src),
        ("GPT step, cold, in that run: precompile_nb precompile (autotuning every kernel)",
         _s(med["nb_cold"]), src),
        ("GPT step, cold, in that run: torch.compile compile + first step", _s(med["tc_cold"]),
         src),
    ] + cold_rows() + zoo_cold_rows() + [zoo_cold_round12_row(), zoo_cold_round14_row(),
                                          effnet_warm_round13_row(), effnet_warm_round14_row(),
                                          convnext_warm_round14_row(), *effnet_round15_rows(),
                                          zoo_cold_row(15, _R15, ("timm_deit", "hf_vit")),
                                          *mobilenet_round16_rows(),
                                          zoo_cold_row(16, _R16, ("bert", "llama", "distilbert",
                                                                  "timm_deit")),
                                          zoo_cold_row(17, _R17, _ZOO_R17),
                                          workload_cold_row(18, _R18 + "cold_workloads.json"),
                                          zoo_cold_row(18, (_R18 + "cold_zoo_vit.json",
                                                            _R18 + "cold_zoo_gpt2.json"),
                                                       ("timm_vit", "hf_vit", "timm_deit",
                                                        "gpt2")),
                                          collector_row(_R18 + "cold_zoo_vit.json"),
                                          zoo_cold_row(19, (_R19 + "cold_sweep_call1.json",
                                                            _R19 + "cold_sweep_call2.json"),
                                                       _ZOO_R19),
                                          workload_cold_row(20, tuple(
                                              _R20 + f for f in ("cold_call1.json",
                                                                 "cold_workloads_call2.json",
                                                                 "cold_workloads_call3.json"))),
                                          zoo_cold_row("20, call 2", _R20 + "cold_zoo_call2.json",
                                                       ("timm_deit", "electra", "distilbert",
                                                        "albert")),
                                          zoo_cold_row("20, call 3", _R20 + "cold_zoo_call3.json",
                                                       ("gpt2", "timm_deit", "electra", "opt")),
                                          workload_cold_row(
                                              "21, call 1", _R21 + "cold_threads_workloads_call1"
                                              ".json", "nb+threads", _THREADS_EXPERIMENT),
                                          zoo_cold_row("21, call 3", _R21 + "cold_zoo_call3.json",
                                                       ("albert", "opt", "gpt2", "timm_deit")),
                                          zoo_cold_row("21, call 4", _R21 + "cold_zoo_call4.json",
                                                       ("opt",)),
                                          zoo_cold_row("23, call 6", _R23 + "cold_zoo_call6.json",
                                                       ("gpt2", "timm_deit", "opt", "electra",
                                                        "distilbert")),
                                          zoo_cold_row("24, call 1",
                                                       _R24 + "cold_handoff_call1.json",
                                                       ("electra", "opt")),
                                          zoo_cold_row("24, call 1, the hand-over off",
                                                       _R24 + "cold_handoff_call1.json",
                                                       ("electra", "opt"), "nb+nohandoff"),
                                          zoo_cold_row("26, call 1", _R26 + "cold_zoo_call1.json",
                                                       ("gpt2", "timm_deit", "opt", "electra",
                                                        "distilbert")),
                                          *early_round26_rows(),
                                          workload_cold_row(
                                              "26, calls 3-4 (transformer_train: torch.compile's"
                                              " row cut by the call's end)", tuple(
                                                  _R26 + f for f in ("cold_workloads_call3.json",
                                                                     "cold_workloads_call4.json"
                                                                     )), bn_straight=False),
                                          *forked_round27_rows(), *round28_rows(),
                                          zoo_warm_row("29", "benchmarks/results/"
                                                       "h100_round29_zoo_warm/results.json",
                                                       "tree af58d35"),
                                          suite_warm_round30_row(),
                                          zoo_warm_row("31", "benchmarks/results/h100_round31/"
                                                       "zoo_train_merged/results.json",
                                                       "round 31's 26 steps over round 29's"),
                                          suite_warm_logged_row(
                                              "31", "benchmarks/results/h100_round31/suite"),
                                          *round32_rows(), *round33_rows(), *round34_rows(),
                                          *later_gpu_rows()]


_R15 = "benchmarks/results/h200_round15/cold_call1.json"
_R16 = "benchmarks/results/h200_round16/cold.json"
_R17 = "benchmarks/results/h200_round17/cold_call2.json"  # Note [one trace between capture...]
_ZOO_R17 = ("gpt2", "timm_deit", "distilbert", "timm_vit", "hf_vit")
_R18 = "benchmarks/results/h200_round18/"  # Note [the collector pauses for a build]
_R19 = "benchmarks/results/h200_round19/"  # eight more zoo training steps
_ZOO_R19 = ("albert", "electra", "opt", "hf_deit", "phi", "roberta", "bart")
_R20 = "benchmarks/results/h200_round20/"  # round 19's changes on a GPU; the pool's start
_R21 = "benchmarks/results/h200_round21/"  # Note [kernels on threads while the workers start]
_R23 = "benchmarks/results/h200_round23/"  # round 21's fix of the threads, five steps in a call
_R24 = "benchmarks/results/h200_round24/"  # the kernel hand-over to the workers
_R26 = "benchmarks/results/h200_round26/"  # issue 28's rows again; kernels at their definition


def early_round26_rows() -> list[tuple[str, str, str]]:
    """Round 26's experiment (cold_split.py nb+early / nb+early2): a Triton kernel sent to a
    thread when the code generation defines it, against the shipped tree, same call."""
    src = _R26 + "cold_early_call2.json"
    return [zoo_cold_row("26, call 2", src, ("opt", "gpt2"), tool, what) for tool, what in (
        ("nb", "precompile"),
        ("nb+early2", "precompile with each kernel sent to a thread at its definition, at "
                      "most 2 threads until the code generation ends (experiment)"),
        ("nb+early", "precompile with each kernel sent to a thread at its definition, 8 "
                     "threads (experiment)"))]
_R27 = "benchmarks/results/h100_round27/"  # Note [compile workers forked for a build]


def forked_round27_rows() -> list[tuple[str, str, str]]:
    """Round 27 (an H100): the compile workers forked before the capture for every CUDA graph
    (the first version of Note [compile workers forked for a build]; the shipped one forks
    at the lowering, for graphs of 32 operations or more)."""
    what = ("precompile with its compile workers forked before the capture (first version, "
            "H100)")
    return [zoo_cold_row("27, calls 1-2", (_R27 + "cold_zoo_call1.json",
                                           _R27 + "cold_zoo_call2.json"),
                         ("gpt2", "timm_deit", "opt", "electra", "distilbert"), "nb", what),
            workload_cold_row("27, call 2", _R27 + "cold_workloads_call2.json", "nb", what,
                              bn_straight=False)]


_R28 = "benchmarks/results/h100_round28/"  # the shipped fork at the lowering, on a GPU


def round28_rows() -> list[tuple[str, str, str]]:
    """Round 28 (an H100): the shipped Note [compile workers forked for a build], the workers
    forked at the lowering for CUDA graphs of 32 operations or more. DistilBERT's two rows
    come from call 3 (call 1's time limit cut its torch.compile row, call 2's too)."""
    what = "precompile, workers forked at the lowering for large graphs (H100)"
    return [zoo_cold_row("28, calls 1 and 3", (_R28 + "cold_zoo_call1.json",
                                               _R28 + "cold_zoo_call3.json"),
                         ("gpt2", "timm_deit", "opt", "electra", "distilbert"), "nb", what),
            workload_cold_row("28, call 2", _R28 + "cold_workloads_call2.json", "nb", what,
                              bn_straight=False)]


def zoo_warm_row(round_: str, src: str, note: str,
                 cases: str = "training steps") -> tuple[str, str, str]:
    """The zoo's training steps (or its inference cases), an H100: a fresh process's load +
    first call over eager's own first call in another fresh process, each measured alone; the
    cases the device time reached."""
    rows = json.loads((ROOT / src).read_text())
    ratio = {r["model"]: r["nb_warm_s"] / r["eager_first_alone_s"] for r in rows
             if r.get("nb_warm_s") and r.get("eager_first_alone_s")}
    over = sorted((m for m, x in ratio.items() if x > 1.1), key=lambda m: -ratio[m])
    said = (f"{sum(x <= 1.1 for x in ratio.values())} of {len(ratio)} within 1.1x, median "
            f"{statistics.median(ratio.values()):.2f}")
    said += ("; over: " + ", ".join(f"{m} {ratio[m]:.{2 if round(ratio[m], 2) > 1.1 else 3}f}"
                                    for m in over) if over
             else f", max {max(ratio.values()):.2f}")
    return (f"zoo {cases} (real size), round {round_}: warm load + first call / eager's "
            f"own first call, fresh processes, each alone, one run each (H100; {note}; "
            f"{len(ratio)} of {len(rows)} {cases.split()[-1]} reached)", said, src)


def suite_warm_round30_row() -> tuple[str, str, str]:
    """Round 30 (an H100): the benchmark suite, its mark_dynamic workload among them, a fresh
    process's load + first call over eager's own first call, three runs merged (each one-shot
    measurement: its fastest sample)."""
    src = "benchmarks/results/h100_round30_suite_warm/merged/results.json"
    w = json.loads((ROOT / src).read_text())["workloads"]
    return ("benchmark workloads, round 30: load with the cache + first call / eager's own first "
            "call, fresh processes, fastest of 2-3 runs each (H100; cnn_dynamic_infer: batch "
            "marked dynamic)",
            ", ".join(f"{k} {v['ratios']['load_cache_vs_eager_first']:.2f}" for k, v in w.items()),
            src)


_R32 = "benchmarks/results/h100_round32/"  # Note [the collector pauses for a build]: a load


def round32_rows() -> list[tuple[str, str, str]]:
    """Round 32 (an H100): the zoo's 39 inference cases, then seven warm starts over 1.1x or
    near it again with the collector paused in the load and the core's import (six of round
    32's warm starts had a full collection in the window); the training steps over round
    31's."""
    return [zoo_warm_row("32", _R32 + "infer_merged/results.json", "the latest sample of "
                         "each; 7 of them after the collector's pause in load", "inference cases"),
            zoo_warm_row("32", _R32 + "train_merged/results.json", "round 31's 39 with round "
                         "31's four over measured again, timm_deit's after the collector's pause")]


_R33 = "benchmarks/results/h100_round33/"  # the suite run by run, after round 32's pause


def round33_rows() -> list[tuple[str, str, str]]:
    """Round 33 (an H100): the suite's four runs of eager, precompile and load (gpu_round33.sh)
    and one of every mode, each run's ratios; six zoo warm starts; a 100 MB cache's read."""
    card = "H100"
    runs = tuple(f"{_R33}suite/s{k}/results.json" for k in (1, 2, 3, 4))
    return [suite_runs_row("33", (*runs, _R33 + "full/results.json"), card),
            *suite_every_mode_rows("33", _R33 + "full/results.json", card),
            zoo_warm_row("33", _R33 + "zoo/results.json", "round 32's six nearest 1.1x, "
                         "the collector paused", "inference cases"),
            cache_read_row("33", _R33 + "cache_read/results.json", card)]


_LOGGED = re.compile(r"\] (\w+): (eager first_call_s|nb_load_cache .*total_s)=([\d.]+) (s|ms|µs)")
_MS = {"s": 1e3, "ms": 1.0, "µs": 1e-3}  # run.py's _fmt_s writes each unit by the size


def suite_warm_logged_row(round_: str, folder: str) -> tuple[str, str, str]:
    """The suite's warm start over eager's first call from run.py's logs (s*.log in `folder`):
    the fastest of every sample a log printed, a run cut by its call's limit included (its
    results.json lacks the workload it was in)."""
    best: dict[str, dict[str, float]] = {}
    for log in sorted((ROOT / folder).glob("s*.log")):
        for w, what, value, unit in _LOGGED.findall(log.read_text()):
            d = best.setdefault(w, {})
            k = "eager" if what.startswith("eager") else "nb"
            d[k] = min(d.get(k, float("inf")), float(value) * _MS[unit])
    runs = len(list((ROOT / folder).glob("s*.log")))
    return (f"benchmark workloads, round {round_}: load with the cache + first call / eager's own "
            f"first call, fresh processes, fastest of the samples of {runs} runs (H100; "
            "cnn_dynamic_infer: batch marked dynamic; ms in brackets)",
            ", ".join(f"{w} {d['nb'] / d['eager']:.2f} ({d['nb']:.0f} / {d['eager']:.0f})"
                      for w, d in best.items() if "nb" in d and "eager" in d), folder)


_THREADS_EXPERIMENT = ("precompile with the kernels met before the compile workers are ready "
                       "compiled on threads (the benchmark-side experiment that preceded Note "
                       "[kernels on threads while the workers start])")


_COLD_NAMES = {"gpt_step": "GPT step", "transformer_train": "transformer training step",
               "cnn_bn_train": "CNN + BatchNorm training step"}


def cold_rows() -> list[tuple[str, str, str]]:
    """Cold precompile / torch.compile's compile + first call, per workload and round
    (benchmarks/cold_split.py, fresh processes one at a time)."""
    rounds = sorted((RESULTS / "h200_round5").glob("cold_split_round*.json"))
    out = []
    for name, label in _COLD_NAMES.items():
        ratios = []
        for f in rounds:
            rows = json.loads(f.read_text())
            nb, tc = rows.get(f"{name}:nb"), rows.get(f"{name}:tc")
            if nb and tc and "error" not in nb[0] and "error" not in tc[0]:
                ratios.append(f"{nb[0]['total'] / tc[0]['total']:.2f}")
        if ratios:
            out.append((f"{label}, cold: precompile / torch.compile compile + first call, "
                        "by round", ", ".join(ratios),
                        "benchmarks/results/h200_round5/cold_split_round*.json"))
    return out


# zoo training steps (real size) of round 10: (case, file with its nb (one piece) and tc rows,
# the name of the one-piece row there)
_ZOO_COLD = (("gpt2", "cold_zoo1_gpt2_llama.json", "nb"),
             ("llama", "cold_zoo1_gpt2_llama.json", "nb"),
             ("timm_vit", "cold_zoo2_vit_bert_t5.json", "nb"),
             ("bert", "cold_zoo2_vit_bert_t5.json", "nb"),
             ("t5", "cold_t5_swin_pieces.json", "nb+pieces=1"),
             ("hf_swin", "cold_t5_swin_pieces.json", "nb+pieces=1"))


def zoo_cold_rows() -> list[tuple[str, str, str]]:
    """Cold precompile (the graph in one piece) and the steady step against torch.compile's on
    zoo training steps, and the two graphs compiled in pieces (benchmarks/cold_split.py,
    h200_round10/)."""
    d = RESULTS / "h200_round10"
    cold, step, names = [], [], []
    for case, fname, tool in _ZOO_COLD:
        rows = json.loads((d / fname).read_text())
        nb, tc = rows[f"{case}:train:real:{tool}"][0], rows[f"{case}:train:real:tc"][0]
        names.append(case)
        cold.append(f"{nb['total'] / tc['total']:.2f}")
        step.append(f"{nb['steady']['tool_ms'] / tc['steady']['tool_ms']:.2f}")
    pieces = json.loads((d / "cold_t5_swin_pieces.json").read_text())
    split = [f"{pieces[f'{c}:train:real:nb'][0]['total']:.1f} s ({n}) vs "
             f"{pieces[f'{c}:train:real:nb+pieces=1'][0]['total']:.1f} s"
             for c, n in (("t5", 4), ("hf_swin", 2))]
    src = "benchmarks/results/h200_round10/"
    return [
        (f"zoo training steps (real size), cold: precompile / torch.compile compile + first "
         f"call, one run each: {', '.join(names)}", ", ".join(cold), src),
        ("the same steps, steady step: precompile / torch.compile", ", ".join(step), src),
        ("t5 / hf_swin training step, cold, compiled in pieces (`PRECOMPILE_NB_PIECES`) "
         "against one piece", "; ".join(split), src + "cold_t5_swin_pieces.json"),
    ]


def zoo_cold_round12_row() -> tuple[str, str, str]:
    """Cold precompile against torch.compile on zoo training steps in round 12's two device
    calls: the lower total of each tool over the calls (`nb+noqueue` is the tree as it stands,
    h200_round12/)."""
    runs = [json.loads((RESULTS / "h200_round12" / run / "cold_split.json").read_text())
            for run in ("cold_queue_run1", "cold_queue_run2")]
    names, ratios = [], []
    for case in ("gpt2", "llama", "bert"):
        best = {tool: min(r[f"{case}:train:real:{tool}"][0]["total"] for r in runs
                          if f"{case}:train:real:{tool}" in r) for tool in ("nb+noqueue", "tc")}
        names.append(case)
        ratios.append(f"{best['nb+noqueue'] / best['tc']:.2f}")
    return (f"zoo training steps (real size), cold, round 12: precompile / torch.compile, the "
            f"lower of up to two runs each: {', '.join(names)}", ", ".join(ratios),
            "benchmarks/results/h200_round12/")


def conv_warm_row(src: str, model: str, layouts: tuple[str, str], what: str,
                  ) -> tuple[str, str, str]:
    """A CNN's training step on the H200 (conv_layout.py): load + first call over eager's own
    first call in NCHW, and the steady step over eager's, for two layouts."""
    r = json.loads((ROOT / src).read_text())[model]
    eager = r["eager_clFalse"]["first_call_s"]

    def warm(layout: str) -> str:
        ld = r[f"load_{layout}"]
        return (f"{(ld['load_s'] + ld['first_call_s']) / eager:.2f} (steady "
                f"{ld['steady_nb_s'] / ld['steady_eager_s']:.2f})")

    return (what, " / ".join(warm(x) for x in layouts), src)


def effnet_warm_round13_row() -> tuple[str, str, str]:
    """Note [depthwise convolutions of a CUDA training step run in NCHW] against every
    convolution in channels_last (h200_round13/)."""
    return conv_warm_row(
        "benchmarks/results/h200_round13/conv_layout_train_effnet.json", "timm_efficientnet",
        ("default", "cl_depthwise"),
        "efficientnet_b0 training step (real size), fresh process: load + first call / eager's "
        "own first call (steady / eager's), depthwise convolutions in NCHW, as now / all "
        "channels_last, as before")


def convnext_warm_round14_row() -> tuple[str, str, str]:
    """The NCHW rule widened to 7x7 kernels, against round 13's 5x5 bound (h200_round14/)."""
    return conv_warm_row(
        "benchmarks/results/h200_round14/conv_layout_train_convnext.json", "timm_convnext",
        ("dw7_nchw", "default"),
        "ConvNeXt tiny training step (real size), fresh process: load + first call / eager's "
        "own first call in NCHW (steady / eager's), 7x7 depthwise convolutions in NCHW, as now "
        "/ in channels_last, as before")


def effnet_warm_round14_row() -> tuple[str, str, str]:
    """warm_first_call.py's ratio for efficientnet_b0's training step, cubins from memory
    (h200_round14/)."""
    src = "benchmarks/results/h200_round14/effnet_train_warm_first_call.json"
    r = json.loads((ROOT / src).read_text())["results"]["timm_efficientnet"]
    loads = ", ".join(f"{w['load_s']:.3f}" for w in r["warm"])
    return ("efficientnet_b0 training step (real size), fresh process, round 14: load + first "
            "call / eager's own first call, medians of 3; load s of the three runs",
            f"{r['ratio']:.2f}; {loads}", src)


def effnet_round15_rows() -> list[tuple[str, str, str]]:
    """efficientnet_b0's training step with its 1x1 convolutions as matrix products and
    without (warm_first_call.py's ratio, steady_pairs.py's step / eager's; h200_round15/)."""
    base = ROOT / "benchmarks" / "results" / "h200_round15"
    out = []
    for label, tag, steady, key in (
            ("as matrix products (this tree)", "on", "steady_effnet_train_on.json", "on"),
            ("all to cuDNN (the switch off)", "off",
             "steady_effnet_train_cl_products_vs_off.json", "off")):
        src = f"benchmarks/results/h200_round15/effnet_train_warm_conv1x1_{tag}.json"
        r = json.loads((ROOT / src).read_text())["results"]["timm_efficientnet"]
        st = json.loads((base / steady).read_text())["median_ms"][f"{key}/eager"]
        out.append((f"efficientnet_b0 training step (real size), fresh process, round 15, 1x1 "
                    f"convolutions {label}: load + first call / eager's own first call, "
                    "medians of 2 (steady step / eager's)", f"{r['ratio']:.2f} (steady {st:.2f})",
                    src))
    return out


def zoo_cold_row(rnd: int | str, src: str | tuple[str, ...], cases: tuple[str, ...],
                 tool: str = "nb", what: str = "precompile") -> tuple[str, str, str]:
    """Cold precompile (cold_split.py's `tool`, named `what`) against torch.compile on zoo
    training steps in the device calls of round `rnd` (one file each; one run each; the cases
    whose two rows the calls' time limits left whole)."""
    srcs = (src,) if isinstance(src, str) else src
    rows = {k: v for f in srcs for k, v in json.loads((ROOT / f).read_text()).items()}
    parts = []
    for case in cases:
        nb, tc = rows[f"{case}:train:real:{tool}"][0], rows[f"{case}:train:real:tc"][0]
        parts.append(f"{case} {nb['total'] / tc['total']:.2f}")
    return (f"zoo training steps (real size), round {rnd}, cold: {what} / torch.compile "
            "compile + first call, one run each", ", ".join(parts), "`, `".join(srcs))


def workload_cold_row(rnd: int | str, src: str | tuple[str, ...], tool: str = "nb",
                      what: str = "precompile", bn_straight: bool = True
                      ) -> tuple[str, str, str]:
    """Cold precompile (cold_split.py's `tool`, named `what`) against torch.compile on the
    benchmark workloads in the device calls of round `rnd` (benchmarks/cold_split.py
    --workloads, one run each; a workload's two rows come from one file). `bn_straight`:
    the CNN's row was measured with cuDNN's BatchNorm handed straight to Inductor (rounds
    18-21), not as the shipped tree does it (round 26)."""
    srcs = (src,) if isinstance(src, str) else src
    files = [json.loads((ROOT / f).read_text()) for f in srcs]
    star = "*" if bn_straight else ""
    parts = [f"{name} {rows[f'{name}:{tool}'][0]['total'] / rows[f'{name}:tc'][0]['total']:.2f}"
             + (star if name == "cnn_bn_train" else "")
             for name in ("tiny_mlp", "transformer_infer", "transformer_train", "cnn_bn_train",
                          "gpt_step") for rows in files
             if f"{name}:{tool}" in rows and f"{name}:tc" in rows]
    note = (" (*: measured with cuDNN's BatchNorm handed straight to Inductor, which the "
            "shipped tree leaves to AOTAutograd)" if bn_straight else "")
    return (f"benchmark workloads, round {rnd}, cold: {what} / torch.compile compile + "
            f"first call, one run each{note}", ", ".join(parts), "`, `".join(srcs))


def collector_row(src: str) -> tuple[str, str, str]:
    """Seconds in Python's garbage collector during a cold precompile, with it paused for the
    build (Note [the collector pauses for a build]) and left on (`nb+gcon`), same call."""
    rows = json.loads((ROOT / src).read_text())
    parts = []
    for key in sorted(k for k in rows if k.endswith(":nb")):
        on = rows.get(key + "+gcon")
        if on:
            parts.append(f"{key.split(':')[0]} {rows[key][0]['gc']['seconds']:.2f} / "
                         f"{on[0]['gc']['seconds']:.2f}")
    return ("zoo training steps (real size), round 18: seconds of garbage collection in a cold "
            "precompile, collector paused for the build / left on", ", ".join(parts), src)


def mobilenet_round16_rows() -> list[tuple[str, str, str]]:
    """mobilenetv3's training step with its 1x1 convolutions as matrix products and without
    (warm_first_call.py's ratio, steady_pairs.py's step / eager's; h200_round16/)."""
    base = "benchmarks/results/h200_round16/"
    steady_log = (ROOT / base / "steady_mobilenetv3_train.log").read_text().splitlines()
    steady = json.loads(next(line for line in steady_log if line.startswith("{")))
    out = []
    for label, tag in (("as matrix products (this tree)", "on"),
                       ("all to cuDNN (the switch off)", "off")):
        src = f"{base}mobilenetv3_train_warm_conv1x1_{tag}.json"
        r = json.loads((ROOT / src).read_text())["results"]["timm_mobilenetv3"]
        out.append((f"mobilenetv3 training step (real size), fresh process, round 16, 1x1 "
                    f"convolutions {label}: load + first call / eager's own first call, "
                    "medians of 2 (steady step / eager's)",
                    f"{r['ratio']:.2f} (steady {steady[f'{tag}/eager']:.2f})", src))
    return out


def zoo_cold_round14_row() -> tuple[str, str, str]:
    """Cold precompile against torch.compile on zoo training steps, round 14's two device
    calls: the ratio of the means of each tool's runs (h200_round14/)."""
    runs = [json.loads((RESULTS / "h200_round14" / f).read_text())
            for f in ("cold_call3.json", "cold_call4.json")]
    names, ratios = [], []
    for case in ("gpt2", "timm_vit", "bert", "llama", "t5"):
        mean = {tool: statistics.mean(x["total"] for r in runs
                                      for x in r.get(f"{case}:train:real:{tool}", ()))
                for tool in ("nb", "tc")}
        names.append(case)
        ratios.append(f"{mean['nb'] / mean['tc']:.2f}")
    return (f"zoo training steps (real size), cold, round 14: precompile / torch.compile, "
            f"means of 1-2 runs each: {', '.join(names)}", ", ".join(ratios),
            "benchmarks/results/h200_round14/")


def cpu_warm_vs_eager_row(src: str, label: str) -> tuple[str, str, str]:
    """A fresh process's load + first call over eager's own first call, with precompile_nb's
    bytecode compiled (run.py does so before it measures), every workload of the run."""
    w = json.loads((ROOT / src).read_text())["workloads"]

    def ms(k: str, mode: str, key: str) -> str:
        return f"{w[k]['measurements'][mode][key] * 1e3:.1f}"
    return (f"load with the cache + first call / eager's own first call, {label} (bytecode "
            "compiled, as installed; fastest of 3 runs each: load + first call ms / eager's ms)",
            ", ".join(f"{k} {w[k]['ratios']['load_cache_vs_eager_first']:.2f} ("
                      f"{ms(k, 'nb_load_cache', 'total_s')} / {ms(k, 'eager', 'first_call_s')})"
                      for k in w), src)


def kernel_reuse_row() -> tuple[str, str, str]:
    """A second process's precompile with the C++ kernels the first kept (Note [C++ kernels
    built once]), without them, and torch.compile's second process (cpu_round11/)."""
    rows = json.loads((RESULTS / "cpu_round11" / "reuse_second_process.json").read_text())
    t = {tool: rows[f"bert:train:real:{tool}"][0]["total"] for tool in ("nb", "nb+noreuse", "tc")}
    return ("bert training step (real size), precompile in a second process whose compiler "
            "caches a first one filled (2-core machine, torch 2.13): with the C++ kernels the "
            "first kept / without them / torch.compile's second process",
            f"{_s(t['nb'])} / {_s(t['nb+noreuse'])} / {_s(t['tc'])}",
            "benchmarks/results/cpu_round11/reuse_second_process.json")


def precompile_again_row(rnd: int) -> tuple[str, str, str]:
    """A second process's precompile of zoo cases, the whole lowering taken (Note [a
    lowering made once]), against torch.compile's second process (cpu_round<rnd>/); where
    the run has them, the rows that found the lowering by the functional graph's key (Note
    [a hit before functionalizing])."""
    src = f"benchmarks/results/cpu_round{rnd}/precompile_again.json"
    runs = json.loads((ROOT / src).read_text())

    def med(reps: list[dict], label: str) -> float:
        return statistics.median(r[label]["seconds"] for r in reps)

    ratios = [med(reps, "nb again") / med(reps, "tc again") for reps in runs.values()]
    nb = [med(reps, "nb again") for reps in runs.values()]
    kernels = [med(reps, "nb again, kernels only") for reps in runs.values()]
    later = "nb again, functionalized"
    if all(later in reps[0] for reps in runs.values()):
        cases = ", ".join(f"{case.split(':')[0]} {med(reps, later):.2f} → "
                          f"{med(reps, 'nb again'):.2f} s" for case, reps in runs.items())
        return (f"precompile in a second process whose compiler caches a first one filled, "
                f"round {rnd}, {len(runs)} zoo training steps (tiny sizes, medians of 3): the "
                "lowering found after making the captured graph functional → found by the "
                "captured graph's record; ratio to torch.compile's second process",
                f"{cases}; {min(ratios):.2f}-{max(ratios):.2f}", src)
    return (f"precompile in a second process whose compiler caches a first one filled, "
            f"{len(runs)} zoo cases (tiny sizes, medians of 3): whole lowering taken / kernel "
            "stores only / ratio to torch.compile's second process",
            f"{_span(nb)} / {_span(kernels)} / {min(ratios):.2f}-{max(ratios):.2f}", src)


def render() -> str:
    meta, cpu = cpu_rows()
    cpu.append(call_overhead_row())
    cpu.append(cpu_warm_vs_eager_row(
        "benchmarks/results/cpu_round29_warm_vs_eager/after_import/results.json", "round 29"))
    cpu.append(cpu_warm_vs_eager_row("benchmarks/results/cpu_round31_load/suite/results.json",
                                     "round 31 (eager's first call moves 2-3x between sessions"
                                     ": compare the paired row below across rounds)"))
    cpu.append(load_paired_row("benchmarks/results/cpu_round31_load/", "03fcb67",
                               "round 30's tree → round 31's (literals from the cache, lighter "
                               "imports)"))
    cpu.append(load_paired_row("benchmarks/results/cpu_round33_load/", "93c4346",
                               "round 33, before → after a load stopped importing the package's "
                               "driver"))
    cpu += [kernel_reuse_row(), precompile_again_row(23), precompile_again_row(25)]
    cpu.append(cpu_vs_ref_row("benchmarks/results/cpu_round13/",
                              ("cold_vs_ref_torch2.14.1.json",), "round 13"))
    cpu.append(cpu_vs_ref_row("benchmarks/results/cpu_round14/", ("cold_vs_torch2.14.1.json",),
                              "round 14 (ISA probes at once)"))
    cpu.extend(later_cpu_rows())
    lines = [
        "# Headline numbers",
        "",
        "Written by `python benchmarks/headline.py` from the files in `benchmarks/results/`; do not",
        "edit by hand. The README and the docs quote these values; each row names its file.",
        "",
        f"## CPU ({meta['machine']}, torch {meta['torch']}, reference torch {meta['ref_torch']}, "
        f"{meta['date']})",
        "",
        "Every measurement in a fresh process with empty compiler caches. Spans are over the",
        "four benchmark workloads (tiny MLP, 2-layer transformer inference and training step,",
        "CNN + BatchNorm training step).",
        "",
        "| measurement | value | from |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | `{c}` |" for a, b, c in cpu]
    lines += [
        "",
        "## CUDA (one H200, torch 2.11; warm starts: medians of a GPT-style training step)",
        "",
        "| measurement | value | from |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | `{c}` |" for a, b, c in gpu_rows()]
    lines += [
        "",
        "## Not in benchmarks/results/",
        "",
        "- How long an eager-backend precompile takes, and how long the first precompile in a",
        "  fresh process takes apart from `import torch`: no recorded run measures them, so the",
        "  docs give no number for them.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text("utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python benchmarks/headline.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
