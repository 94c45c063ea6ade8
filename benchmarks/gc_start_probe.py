"""What a first build's start makes old (Note [the collector pauses for a build]): one cold
precompile of a benchmark workload in this process, printing every collection inside it
(generation, ms, objects collected), the young generation's size where young_made_old starts
and ends, and the freeze count there. With --cuda-start-old a CUDA build's start is wrapped in
young_made_old and imports the lowering, as round 40's first tree did on the GPU (trees from
round 41 on do that themselves: leave the flag off for them); a tree without young_made_old
prints the collections alone. Round 41 found with it why round 40's move did nothing on the GPU
host: its Python 3.12 starts with 375 objects frozen (Note [the interpreter's own frozen
objects] in precompile_nb/collector.py).

usage: python benchmarks/gc_start_probe.py [--device cpu|cuda] [--workload W] [--cuda-start-old]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workload", default="cnn_bn_train")
    ap.add_argument("--cuda-start-old", action="store_true")
    a = ap.parse_args()
    import torch

    import precompile_nb
    import precompile_nb.collector as col
    from workloads import build

    marks: list = []
    made_old = getattr(col, "young_made_old", None)
    if made_old is not None:
        import contextlib

        import precompile_nb.core as core

        @contextlib.contextmanager
        def watched():
            marks.append(("start", len(gc.get_objects(0)), gc.get_freeze_count()))
            with made_old():
                yield
                marks.append(("inside, end", len(gc.get_objects(0)), len(gc.get_objects(1))))
            marks.append(("after", len(gc.get_objects(0)), len(gc.get_objects(2))))
        core.young_made_old = watched
        if a.cuda_start_old and a.device == "cuda":
            start = core._start_with_the_capture

            def start_made_old(backend, inputs):
                with watched():
                    start(backend, inputs)
                    if backend == "inductor":
                        core._compat.import_lowering()
            core._start_with_the_capture = start_made_old
    runs: list = []
    t0: list = [0.0]

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            t0[0] = time.perf_counter()
        else:
            runs.append((info["generation"], round((time.perf_counter() - t0[0]) * 1e3, 1),
                         info["collected"]))
    w = build(a.workload, a.device)
    gc.callbacks.append(note)
    t = time.perf_counter()
    with torch.no_grad() if w.inference else torch.enable_grad():
        precompile_nb.precompile(w.fn, *w.args)
    dt = time.perf_counter() - t
    gc.callbacks.remove(note)
    print(json.dumps({"tree": os.path.dirname(os.path.dirname(precompile_nb.__file__)),
                      "precompile_s": round(dt, 2), "collections": runs, "marks": marks}))


if __name__ == "__main__":
    main()
