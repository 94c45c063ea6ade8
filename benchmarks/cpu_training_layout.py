"""Note [CPU training keeps NCHW]: a CNN training step on the CPU, precompile_nb as it is (NCHW),
precompile_nb with Inductor's channels_last forced (`nb_cl`: config.force_layout_optimization,
the behaviour before the note), torch.compile with its default layout (`tc`) and eager, in one
process: every variant compiled first, then steps alternating between them (the order reversed
every other round), medians. Then a torch.profiler pass per variant for the time in
aten::convolution_backward.

usage: python benchmarks/cpu_training_layout.py [--models tv_resnet18,cnn_bn_train]
           [--threads 1] [--rounds 30] [--variants eager,nb,nb_cl,tc] [--out FILE.json]

A model is a zoo model (its `tiny` training step) or a workload of benchmarks/workloads.py.
Prints a table per model: median ms a step (and the 25th-75th percentile), the profiled
convolution_backward ms a step, the NCHW / channels_last 4-D buffers of the generated code,
compile seconds.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]
warnings.simplefilter("ignore")

import torch  # noqa: E402
from cold_profile import KERNEL_WATCH, buffer_layouts  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402

WATCH: dict = {}
exec(KERNEL_WATCH, WATCH)  # noqa: S102 - Inductor's generated modules, in WATCH["SOURCES"]


def _make(model: str):
    from workloads import NAMES, build
    if model in NAMES:
        w = build(model, "cpu")
        return w.args[0].train(), list(w.args[1:]), w.fn
    from zoo import models
    s = models.build(model, "tiny", "cpu")
    return s.model.train(), list(s.args["train"]), s.fns["train"]


def _compiled(variant: str, model: str):
    m, args, fn = _make(model)
    forced = inductor_config.patch(force_layout_optimization=True) if variant == "nb_cl" \
        else contextlib.nullcontext()
    t = time.perf_counter()
    if variant == "eager":
        f = fn
    elif variant == "tc":
        # a code object of its own: Dynamo caches graphs per code object
        fn = types.FunctionType(fn.__code__.replace(co_name=fn.__name__ + "_tc"), fn.__globals__,
                                fn.__name__ + "_tc", fn.__defaults__, fn.__closure__)
        f = torch.compile(fn)
        f(m, *args)  # compiles the forward and the backward
    else:
        from precompile_nb import precompile
        with forced:
            code, cache = precompile(fn, m, *args)
        f = precompile.load(code, cache)
    return f, m, args, time.perf_counter() - t


def run(model: str, variants: list[str], threads: int, rounds: int) -> dict:
    torch.set_num_threads(threads)
    calls, info = {}, {}
    for v in variants:
        n = len(WATCH["SOURCES"])  # the generated modules Inductor loads for this variant
        f, m, args, seconds = _compiled(v, model)
        nchw, cl = buffer_layouts(WATCH["SOURCES"][n:])
        calls[v] = (f, m, args)
        info[v] = {"compile_s": round(seconds, 1), "nchw_buffers": nchw, "cl_buffers": cl}

    def step(v: str) -> float:
        f, m, a = calls[v]
        t = time.perf_counter()
        f(m, *a)
        return time.perf_counter() - t

    for v in variants:
        for _ in range(3):
            step(v)
    times: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            times[v].append(step(v))
    from torch.profiler import ProfilerActivity, profile
    for v in variants:
        x = sorted(times[v])
        info[v].update(median_ms=statistics.median(x) * 1e3, p25_ms=x[len(x) // 4] * 1e3,
                       p75_ms=x[3 * len(x) // 4] * 1e3)
        with profile(activities=[ProfilerActivity.CPU]) as p:
            for _ in range(5):
                step(v)
        own = {e.key: e.self_cpu_time_total for e in p.key_averages()}
        info[v]["conv_backward_ms"] = own.get("aten::convolution_backward", 0) / 5 / 1e3
    return info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tv_resnet18,cnn_bn_train")
    ap.add_argument("--variants", default="eager,nb,nb_cl,tc")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out")
    a = ap.parse_args()
    res = {}
    for model in a.models.split(","):
        res[model] = run(model, a.variants.split(","), a.threads, a.rounds)
        print(f"\n{model}, {a.threads} thread(s), {a.rounds} rounds")
        print("| variant | median ms | p25-p75 ms | convolution_backward ms | NCHW / CL buffers "
              "| compile s |\n| --- | ---: | ---: | ---: | ---: | ---: |")
        for v, d in res[model].items():
            print(f"| {v} | {d['median_ms']:.2f} | {d['p25_ms']:.2f}-{d['p75_ms']:.2f} | "
                  f"{d['conv_backward_ms']:.2f} | {d['nchw_buffers']} / {d['cl_buffers']} | "
                  f"{d['compile_s']} |", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"threads": a.threads, "rounds": a.rounds, "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
