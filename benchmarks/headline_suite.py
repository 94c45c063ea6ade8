"""Rows of docs/numbers.md read from the benchmark suite's own runs (benchmarks/run.py's
results.json) and from cache_read.py: each run's ratios as measured, one run at a time, where
the older rows of benchmarks/headline.py took the fastest sample of several runs."""
from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _workloads(src: str) -> dict:
    return json.loads((ROOT / src).read_text())["workloads"]


def suite_runs_row(round_: str, srcs: tuple[str, ...], card: str,
                   samples: str = "") -> tuple[str, str, str]:
    """Load with the cache + first call over eager's own first call, every run on its own:
    how many runs had all workloads within 1.1x, and each workload's smallest and largest
    ratio (ms of load + first call and of eager's first call in brackets); `samples` says
    what a run's figure is where it is more than one sample of each."""
    runs = [_workloads(s) for s in srcs]
    names = list(runs[0])
    ratio = {w: [r[w]["ratios"]["load_cache_vs_eager_first"] for r in runs] for w in names}
    ms = {w: ([r[w]["seconds"]["nb_load_first_call_cache"] * 1e3 for r in runs],
              [r[w]["seconds"]["eager_first_call"] * 1e3 for r in runs]) for w in names}
    whole = sum(all(ratio[w][i] <= 1.1 for w in names) for i in range(len(runs)))

    def span(w: str) -> str:
        nb, eager = ms[w]
        if len(runs) == 1:
            return f"{w} {ratio[w][0]:.2f} ({nb[0]:.0f} / {eager[0]:.0f})"
        return (f"{w} {min(ratio[w]):.2f}-{max(ratio[w]):.2f} ({min(nb):.0f}-{max(nb):.0f} / "
                f"{min(eager):.0f}-{max(eager):.0f})")

    return (f"benchmark workloads, round {round_}: load with the cache + first call / eager's "
            f"own first call, fresh processes, each run on its own{samples} ({card}; "
            "cnn_dynamic_infer: batch marked dynamic; "
            f"{'smallest-largest over the runs, ' if len(runs) > 1 else ''}ms in brackets)",
            f"all within 1.1x in {whole} of {len(runs)} runs; " + ", ".join(map(span, names)),
            "`, `".join(srcs))


def suite_every_mode_rows(round_: str, src: str, card: str) -> list[tuple[str, str, str]]:
    """One run of every mode of run.py (no reference torch): cold precompile over
    torch.compile's compile + first call, each with the imports it makes, and the
    steady state over torch.compile's (best round)."""
    w = _workloads(src)
    what = f"benchmark workloads, round {round_}, one run of every mode ({card})"
    return [(f"{what}, cold: precompile / torch.compile compile + first call, its imports "
             "timed with it, fresh processes, empty caches (seconds in brackets)",
             ", ".join(f"{k} {v['ratios']['cold_vs_tc_cold']:.2f} "
                       f"({v['seconds']['nb_precompile']:.1f} / "
                       f"{v['seconds']['tc_cold_first_call']:.1f})" for k, v in w.items()), src),
            (f"{what}, steady: precompile_nb / torch.compile (best round)",
             ", ".join(f"{k} {v['ratios']['steady_vs_tc']:.2f}" for k, v in w.items()), src)]


def cache_read_row(round_: str, src: str, card: str) -> tuple[str, str, str]:
    """cache_read.py: a cache padded to ~100 MB, load's MB/s and the marginal cost per MB."""
    row = json.loads((ROOT / src).read_text())["rows"]["working tree / padded"]
    return (f"cache read, round {round_} ({card}): a {row['mb']:.0f} MB cache in a fresh "
            "process, load's MB/s (medians; marginal ms per MB)",
            f"{row['load_mb_per_s']:.0f} MB/s ({row['marginal_ms_per_mb']:.2f} ms/MB)", src)


_R34 = "benchmarks/results/h100_round34/"  # the suite with its first calls as medians


def round34_rows() -> list[tuple[str, str, str]]:
    """Round 34 (an H100): two runs of gpu_round34.sh suite, eager's first call and the warm
    start five times each in turn (run.py --first-calls 5), the ratio of their medians."""
    return [suite_runs_row("34", (_R34 + "s1/results.json", _R34 + "s2/results.json"), "H100",
                           ", the medians of five first calls of each")]


_R37 = "benchmarks/results/h100_round37/"  # torch compiled from source in every process


def round37_rows() -> list[tuple[str, str, str]]:
    """Round 37 (an H100): three runs of the suite's cold starts, each system's imports timed
    (torch compiled from source in every process on that host), and the
    CNN training step's steady state with the training layout rule on and off."""
    runs = [_workloads(f"{_R37}cold_{k}/results.json") for k in (1, 2, 3)]

    def span(w: str) -> str:
        r = [run[w]["ratios"]["cold_vs_tc_cold"] for run in runs]
        return f"{w} {min(r):.2f}-{max(r):.2f}"

    steady = {v: _workloads(f"{_R37}steady_{v}/results.json")["cnn_bn_train"]["seconds"]
              for v in ("on", "off")}
    return [("benchmark workloads, round 37, cold: precompile / torch.compile compile + first "
             "call, its imports timed with it, three runs, smallest-largest (H100; torch, sympy "
             "and Triton compiled from source in every process on that host)",
             ", ".join(span(w) for w in runs[0]), f"{_R37}cold_*/results.json"),
            ("CNN + BatchNorm training step, round 37, steady step, the training layout rule "
             "(NCHW) / the rule for inference (channels_last), one run each (H100; eager and "
             "torch.compile in the same runs in brackets), µs",
             f"{steady['on']['steady_nb_min'] * 1e6:.0f} / "
             f"{steady['off']['steady_nb_min'] * 1e6:.0f} (eager "
             f"{steady['on']['steady_eager_min'] * 1e6:.0f} / "
             f"{steady['off']['steady_eager_min'] * 1e6:.0f}, torch.compile "
             f"{steady['on']['steady_tc_min'] * 1e6:.0f} / "
             f"{steady['off']['steady_tc_min'] * 1e6:.0f})",
             f"{_R37}steady_on/results.json`, `{_R37}steady_off/results.json")]


_R38 = "benchmarks/results/h100_round38/"  # torch's bytecode compiled once a machine


def round38_rows() -> list[tuple[str, str, str]]:
    """Round 38 (an H100, torch's bytecode): four runs of the suite's cold starts, each
    system's imports timed, and one run of the warm suite (medians of five first calls)."""
    return [_cold_spans_row("38", _R38, 4, "H100; torch's bytecode compiled, as installed"),
            suite_runs_row("38", (f"{_R38}suite_1/results.json",), "H100, torch's bytecode",
                           ", the medians of five first calls of each")]


_WORDS = ("", "one", "two", "three", "four", "five", "six", "seven")


def _cold_spans_row(n: str, src: str, k: int, note: str) -> tuple[str, str, str]:
    """Round n's k runs of the suite's cold starts (src/cold_1..k), each workload's ratios
    smallest-largest and their median."""
    runs = [_workloads(f"{src}cold_{i}/results.json") for i in range(1, k + 1)]

    def span(w: str) -> str:
        r = [run[w]["ratios"]["cold_vs_tc_cold"] for run in runs]
        return f"{w} {min(r):.2f}-{max(r):.2f} (median {statistics.median(r):.2f})"

    return (f"benchmark workloads, round {n}, cold: precompile / torch.compile compile + first "
            f"call, its imports timed with it, {_WORDS[k]} runs, "
            f"smallest-largest ({note})",
            ", ".join(span(w) for w in runs[0]), f"{src}cold_*/results.json")


_R39 = "benchmarks/results/h100_round39/"


def round39_rows() -> list[tuple[str, str, str]]:
    """Round 39 (another H100, torch's bytecode): one whole run of the suite's cold starts and
    four more of the CNN training step's, and one run of the warm suite."""
    one = _workloads(f"{_R39}cold_1/results.json")
    cnn = [one["cnn_bn_train"]] + [_workloads(f"{_R39}cnn_{k}/results.json")["cnn_bn_train"]
                                   for k in (1, 2, 3, 4)]
    r = [w["ratios"]["cold_vs_tc_cold"] for w in cnn]
    cells = [f"{w} {one[w]['ratios']['cold_vs_tc_cold']:.2f}" for w in one if w != "cnn_bn_train"]
    cells.append(f"cnn_bn_train {min(r):.2f}-{max(r):.2f} over {len(r)} runs (median "
                 f"{statistics.median(r):.2f})")
    return [("benchmark workloads, round 39, cold: precompile / torch.compile compile + first "
             "call, its imports timed with it, one run (cnn_bn_train: five), smallest-largest "
             "(H100 slower than round 38's: both cold starts 1.2-1.5x longer; torch's bytecode)",
             ", ".join(cells), f"{_R39}cold_1/results.json`, `{_R39}cnn_*/results.json"),
            suite_runs_row("39", (f"{_R39}suite_1/results.json",), "H100, torch's bytecode",
                           ", the medians of five first calls of each")]


_R40 = "benchmarks/results/h100_round40/"


def round40_rows() -> list[tuple[str, str, str]]:
    """Round 40 (a third H100, torch's bytecode): three runs of the suite's cold starts, one
    of the warm suite."""
    return [_cold_spans_row("40", _R40, 3, "H100; torch's bytecode"),
            suite_runs_row("40", (f"{_R40}suite_1/results.json",), "H100, torch's bytecode",
                           ", the medians of five first calls of each")]


_R41 = "benchmarks/results/h100_round41/"


def round41_rows() -> list[tuple[str, str, str]]:
    """Round 41 (a fourth H100, torch's bytecode): three rounds of cold starts, this tree (its
    CUDA start making its imports old) against the tree before, and one run of the warm suite
    (measured with a change to the load that was then taken out: see the README)."""
    gc_s = {}
    cold = {}
    for k in (1, 2, 3):
        for side in ("new", "base"):
            for w, v in _workloads(f"{_R41}gc/{side}_{k}/results.json").items():
                m = v["measurements"]
                gc_s.setdefault((w, side), []).append(sum(m["nb_cold"]["gc_s"].values()))
                if side == "new":
                    cold.setdefault(w, []).append(v["ratios"]["cold_vs_tc_cold"])

    def span(v: list[float]) -> str:
        lo, hi = f"{min(v):.2f}", f"{max(v):.2f}"
        return lo if lo == hi else f"{lo}-{hi}"

    cells = [f"{w} {span(gc_s[w, 'base'])} → {span(gc_s[w, 'new'])} s; precompile / "
             f"torch.compile {', '.join(f'{r:.2f}' for r in cold[w])}" for w in cold]
    return [("the collector's seconds inside a cold precompile, round 41 (H100, Python 3.12; "
             "three rounds, each this tree's precompile and torch.compile, then the tree before's "
             "precompile), the tree before → a CUDA build's start making its imports old; this "
             "tree's cold ratios", "; ".join(cells), f"{_R41}gc/"),
            suite_runs_row("41", (f"{_R41}suite_1/results.json",),
                           "H100, torch's bytecode, a slower host: eager's first calls 1.1-1.4x "
                           "round 40's; measured with cuBLAS started beside the load, taken out",
                           ", the medians of five first calls of each")]


_R42 = "benchmarks/results/h100_round42/"


def round42_rows() -> list[tuple[str, str, str]]:
    """Round 42 (a fifth H100, torch's bytecode): the transformer inference's first call after
    a load in the driver's pieces, one run of every mode, the warm suite, three cold runs."""
    med = json.loads((ROOT / f"{_R42}parts/first_call_parts.json").read_text())["medians_ms"]
    nb, sp, e = med["nb"], med["nb_split"], med["eager"]
    parts = (f"eager's first call {e['call']:.1f}; import + load {nb['load']:.1f}, then the "
             f"first call {nb['call']:.1f} (in pieces: flatten {sp['flatten']:.1f}, checks "
             f"{sp['check']:.1f}, graph {sp['graph']:.1f})")
    return [("transformer inference (H100), round 42: a fresh process's import + load, then "
             "the first call through the artifact's driver, against eager's first call "
             "(first_call_parts.py, medians of five, ms)", parts, f"{_R42}parts/"),
            *suite_every_mode_rows("42", f"{_R42}full/results.json", "H100, torch's bytecode"),
            suite_runs_row("42", (f"{_R42}suite_1/results.json",), "H100, torch's bytecode",
                           ", the medians of five first calls of each"),
            _cold_spans_row("42", _R42, 3, "H100, torch's bytecode; the same tree's cold starts "
                            "moved 30-70% between this machine's calls")]


_R43 = "benchmarks/results/h100_round43/"


def round43_rows() -> list[tuple[str, str, str]]:
    """Round 43 (a sixth H100, torch's bytecode): which kernels of the two training steps' cold
    precompiles took Triton's own launcher, with Inductor's kernel names and with the names cut
    under Triton's 150 characters, then six runs of the suite's cold starts (names cut)."""
    probes = {side: json.loads((ROOT / f"{_R43}{d}/launcher_probe.json").read_text())
              for side, d in (("long", "launchers_long_names"), ("cut", "launchers"))}

    def cell(w: str) -> str:
        a, b = probes["long"][w], probes["cut"][w]
        return (f"{w} {len(a['triton'])} → {len(b['triton'])} kernel configurations "
                f"({a['cuda_launcher_s']:.2f} → "
                f"{b['cuda_launcher_s']:.2f} s; precompile {a['precompile_s']:.2f} → "
                f"{b['precompile_s']:.2f} s, one run each)")

    return [("kernels a cold CUDA precompile launched through Triton's own launcher (gcc in the "
             "compiling process), round 43 (H100): Inductor's kernel names → names cut under "
             "Triton's 150 characters (launcher_probe.py)",
             ", ".join(cell(w) for w in probes["long"]),
             f"{_R43}launchers_long_names/`, `{_R43}launchers/"),
            _cold_spans_row("43", _R43, 6, "H100, torch's bytecode; kernel names cut under "
                            "Triton's 150 characters")]


_R44 = "benchmarks/results/h100_round44/"


def round44_rows() -> list[tuple[str, str, str]]:
    """Round 44 (an H100, torch's bytecode): seven runs of the suite's cold starts."""
    return [_cold_spans_row("44", _R44, 7, "H100, torch's bytecode; round 43's package")]


_R45 = "benchmarks/results/h100_round45/"


def round45_rows() -> list[tuple[str, str, str]]:
    """Round 45 (an H100, torch's bytecode): the warm suite on the package with round 44's
    fixes (requires_grad checked at a training artifact's boundary among them)."""
    return [suite_runs_row("45", (f"{_R45}suite_1/results.json",), "H100, torch's bytecode",
                           ", the medians of five first calls of each")]


def later_gpu_rows() -> list[tuple[str, str, str]]:
    """The GPU rows of rounds 37 on, in order."""
    return [*round37_rows(), *round38_rows(), *round39_rows(), *round40_rows(),
            *round41_rows(), *round42_rows(), *round43_rows(), *round44_rows(),
            *round45_rows()]


def later_cpu_rows() -> list[tuple[str, str, str]]:
    """The CPU rows of rounds 37 on, in order."""
    return [cpu_bytecode_row(), cpu_gc_row(), cpu_py312_row(),
            cpu_vs_ref_row("benchmarks/results/cpu_round41_vs_ref/",
                           ("suite_cold_vs.json", "hf_resnet_cold_vs.json"),
                           "one thread (hf_resnet: zoo/beyond.py's tiny training step), round 41"),
            cpu_tinf_cold_row(),
            load_paired_row("benchmarks/results/cpu_round41_load_imports/", "76662f4",
                            "round 41, before → after a load stopped importing the lowering's "
                            "torch internals, the switches and the pair store")]


def cpu_tinf_cold_row() -> tuple[str, str, str]:
    """CPU, round 41: the transformer inference's cold precompile against torch.compile's."""
    src = "benchmarks/results/cpu_round41_tinf_cold/"
    r = [_workloads(f"{src}run_{k}/results.json")["transformer_infer"]["ratios"]["cold_vs_tc_cold"]
         for k in (1, 2, 3)]
    return ("transformer inference, cold precompile / torch.compile compile + first call, "
            "imports timed, three runs, round 41", ", ".join(f"{x:.2f}" for x in r), src)


def cpu_vs_ref_row(src: str, files: tuple[str, ...], label: str) -> tuple[str, str, str]:
    """Cold precompile against torch 2.14.1's own, both on torch 2.14.1 (cold_profile.py --vs
    nb,ref): each case's medians' ratio and seconds."""
    cells = [f"{case.split(':')[1] if ':' in case else case} {m['nb'] / m['ref']:.2f} "
             f"({m['nb']:.1f} / {m['ref']:.1f} s)"
             for _, case, _, m in _side_medians(src, files, "rows", "wall_s", ("nb", "ref"))]
    return ("cold precompile on torch 2.14.1, precompile_nb / torch 2.14.1's precompile, "
            f"medians of 3, {label}", ", ".join(cells),
            f"{src}{files[0]}" if len(files) == 1 else src)


def _side_medians(src: str, files: tuple[str, ...], table: str, value: str,
                  sides: tuple[str, ...] = ()) -> Iterator[tuple[dict, str, dict, dict]]:
    """For each case of each paired-runs file under src: (the file's record, the case, its
    entry, {side: the median of `value` over that side's runs}); the sides are the file's
    own ("sides") unless given, its runs under the entry's "runs" where it has them."""
    for f in files:
        d = json.loads((ROOT / src / f).read_text())
        for case, v in d[table].items():
            runs = v.get("runs", v)
            yield d, case, v, {side: statistics.median(r[value] for r in runs[side])
                               for side in (sides or d["sides"])}


def cpu_py312_row() -> tuple[str, str, str]:
    """CPU, round 41, Python 3.12: the end's collection of a cold precompile, the tree before
    (its start's imports left young there) and this tree (moved)."""
    src = "benchmarks/results/cpu_round41_py312/"
    runs = [json.loads(line) for line in (ROOT / src / "probe.jsonl").read_text().splitlines()]
    end = {t: [r["collections"][-2][1] for r in runs if r["tree"] == t]
           for t in ("3890ad4", "this tree")}
    return ("the end's young collection of a cold precompile (CNN training step), Python 3.12, "
            "torch 2.13, round 41: a start whose imports stayed young → moved to the oldest "
            "generation, two fresh processes each, ms",
            f"{', '.join(f'{v:.0f}' for v in end['3890ad4'])} → "
            f"{', '.join(f'{v:.0f}' for v in end['this tree'])}", src)


def load_paired_row(src: str, base: str, what: str) -> tuple[str, str, str]:
    """Import precompile_nb + load with the cache, the tree against `base`, fresh processes
    alternating (load_imports.py --baseline-rev BASE)."""
    cells = []
    for name in ("tiny_mlp", "transformer_infer", "transformer_train", "cnn_bn_train",
                 "cnn_dynamic_infer"):
        trees = json.loads((ROOT / src / f"load_imports_{name}.json").read_text())["trees"]
        ms = {tree: t["median_ms"]["bytecode"] for tree, t in trees.items()}
        cells.append(f"{name} {ms[base]:.1f} → {ms['working tree']:.1f}")
    return (f"import precompile_nb + load with the cache, {what}, paired fresh processes, "
            "medians of 9, ms", ", ".join(cells), src)


def cpu_gc_row() -> tuple[str, str, str]:
    """CPU, round 40: the collector's seconds inside a cold precompile, before and after a
    build's start made its imports old (paired fresh processes)."""
    src = "benchmarks/results/cpu_round40_gc/"
    cells = [f"torch {d['torch'].split('+')[0]} {w} {m[d['sides'][1]]:.2f} → "
             f"{m[d['sides'][0]]:.2f} s (precompile {v['ratio']:.3f} of before)"
             for d, w, v, m in _side_medians(src, ("cpu213.json", "cpu215.json"), "workloads",
                                             "gc_s")]
    return ("the collector's seconds inside a cold precompile, medians of 5 paired fresh "
            "processes, before → after a CPU build's start made its imports old, round 40",
            ", ".join(cells), src)


def cpu_bytecode_row() -> tuple[str, str, str]:
    """CPU, round 37: a cold start with torch's installed bytecode and with torch compiled
    from source in every process (the GPU host's condition)."""
    src = "benchmarks/results/cpu_round37_bytecode/"
    runs = {v: _workloads(f"{src}{v}/results.json") for v in ("installed", "prefix")}
    return ("cold precompile / torch.compile cold first call, imports timed, torch's bytecode "
            "as installed → torch compiled from source in every process, round 37, one run each",
            ", ".join(f"{w} {runs['installed'][w]['ratios']['cold_vs_tc_cold']:.3f} → "
                      f"{runs['prefix'][w]['ratios']['cold_vs_tc_cold']:.3f}"
                      for w in runs["installed"]), src)
