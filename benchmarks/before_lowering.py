"""The work precompile does on a graph before Inductor sees it, with and without this round's
notes, alternating in one process (development machine, CPU; the work is device-independent):

  capture        make_fx of the step, node stack traces as torch records them
                 (PRECOMPILE_NB_LAZY_STACK_LINES=0) and with Note [stack lines read when kept]
  functionalize  the functional re-trace of a graph that writes nothing
                 (PRECOMPILE_NB_FUNCTIONAL_COPY=0) and its copy (Note [a functional graph is
                 not traced again])

Each zoo case is built once and captured once unmeasured (imports, first-call set-up); then
each variant runs --repeats times, alternating with the other, each after a gc.collect().
Prints and writes the medians.

usage: python benchmarks/before_lowering.py [--zoo t5:train:real,bert:train:real,...]
                                            [--repeats 6] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]


def _timed(f, env: str, value: str) -> float:
    os.environ[env] = value
    gc.collect()  # each run starts with the previous run's garbage gone
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default="t5:train:real,bert:train:real,llama:train:real")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from precompile_nb.core import _compat
    from precompile_nb.core.capture import capture
    from zoo import models

    torch.set_num_threads(2)
    rows = {}
    for case in a.zoo.split(","):
        name, wl, size = case.split(":")
        spec = models.REGISTRY[name](size, "cpu")
        fn, args = spec.fns[wl], (spec.model, *spec.args[wl])
        c = capture(fn, args)  # unmeasured
        writes = not _compat.tracing._nothing_to_functionalize(c.graph)
        t: dict[str, list[float]] = {k: [] for k in ("capture_torch", "capture_lazy",
                                                     "functionalize_retrace",
                                                     "functionalize_copy")}
        for _ in range(a.repeats):
            t["capture_torch"].append(_timed(lambda: capture(fn, args),
                                             "PRECOMPILE_NB_LAZY_STACK_LINES", "0"))
            t["capture_lazy"].append(_timed(lambda: capture(fn, args),
                                            "PRECOMPILE_NB_LAZY_STACK_LINES", "1"))
            for key, value in (("functionalize_retrace", "0"), ("functionalize_copy", "1")):
                t[key].append(_timed(lambda: _compat.functionalize(c.graph, c.fake_inputs),
                                     "PRECOMPILE_NB_FUNCTIONAL_COPY", value))
        rows[case] = {"nodes": len(c.graph.graph.nodes), "graph_writes": writes,
                      **{k: round(statistics.median(v), 3) for k, v in t.items()},
                      "runs": {k: [round(x, 3) for x in v] for k, v in t.items()}}
        r = rows[case]
        print(f"{case}: {r['nodes']} nodes, writes {writes}; capture {r['capture_torch']} -> "
              f"{r['capture_lazy']} s; functionalize {r['functionalize_retrace']} -> "
              f"{r['functionalize_copy']} s (medians of {a.repeats})", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"torch": torch.__version__, "repeats": a.repeats, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
