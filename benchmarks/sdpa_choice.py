"""Which scaled-dot-product-attention op each tool's graph holds for a zoo case, and what the
first call of each costs in a fresh process (cuDNN's attention builds its kernels at its first
call). A measurement for issue 28's cold path, not a test.

usage: python benchmarks/sdpa_choice.py MODEL:WORKLOAD:SIZE [--device cuda]
Prints one json line: eager's ops (a dispatch log), torch.compile's (its AOT graphs, traced with
Inductor's decompositions), and precompile_nb's captured graph's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "scaled_dot_product" in str(func):
            self.seen.add(str(func))
        return func(*args, **(kwargs or {}))


def sdpa_ops(gm: torch.fx.GraphModule) -> set[str]:
    """The scaled-dot-product-attention ops of a graph (cold_split.py's `sdpa` field too)."""
    return {str(n.target) for n in gm.graph.nodes if "scaled_dot_product" in str(n.target)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    from zoo import models

    model, kind, size = a.case.split(":")
    spec = models.build(model, size, a.device)
    spec.model.train() if kind == "train" else spec.model.eval()
    fn, args = spec.fns[kind], (spec.model, *spec.args[kind])
    out: dict = {"case": a.case}
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    t = time.perf_counter()
    with _Ops() as ops:
        fn(*args)
    sync()
    out["eager_first_s"] = round(time.perf_counter() - t, 3)
    out["eager"] = sorted(ops.seen)
    t = time.perf_counter()
    fn(*args)
    sync()
    out["eager_second_s"] = round(time.perf_counter() - t, 3)

    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    seen: set[str] = set()

    def keep(gm, _inputs):
        seen.update(sdpa_ops(gm))
        return gm

    torch._dynamo.reset()
    torch.compile(fn, backend=aot_autograd(fw_compiler=keep, bw_compiler=keep,
                                           decompositions=select_decomp_table()))(*args)
    out["torch_compile"] = sorted(seen)
    from precompile_nb.core import build

    art = build(fn, *args)
    out["precompile_nb"] = sorted(sdpa_ops(art.captured.graph))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
