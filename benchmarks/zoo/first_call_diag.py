"""Where a fresh process's first call of a zoo case goes: eager's, or a zoo artifact's load and
first call, timed, with the cache's make-up and optionally a profile.

    python benchmarks/zoo/first_call_diag.py MODEL WORKLOAD eager|nb WORK [--cprofile] [--torch-profile]
        [--device cuda] [--size real]

WORK is a zoo case's work dir (parallel.py's OUT/work/MODEL__WORKLOAD, holding nb.py and
nb.cache). Prints one JSON line (import / load / first / second call seconds, load's own stage
timings, the cache's bytes per root and its largest files), then the profiles asked for:
`--cprofile` the Python functions of load + first call (by own time), `--torch-profile` the
torch ops of the first call (by own CPU time). Run it in a fresh process per measurement.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _cache_makeup(cache: bytes) -> dict:
    from precompile_nb.core import cache as C
    _, header = C.read_tag(cache)
    files = C.read_files(cache, header)
    sizes = sorted(((len(v), root, rel) for root, rel, v in files), reverse=True)
    by_root: dict[str, int] = {}
    for n, root, _ in sizes:
        by_root[root] = by_root.get(root, 0) + n
    return {"cache_files": len(files), "cache_bytes_by_root": by_root,
            "cache_largest": sizes[:8]}


def main() -> None:
    import torch
    from benchmarks.zoo import models as Z
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("workload")
    p.add_argument("mode", choices=["eager", "nb"])
    p.add_argument("work")
    p.add_argument("--cprofile", action="store_true")
    p.add_argument("--torch-profile", action="store_true")
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="real")
    a = p.parse_args()

    def sync() -> None:
        if a.device == "cuda":
            torch.cuda.synchronize()

    spec = Z.build(a.model, a.size, a.device)
    m = spec.model.train() if a.workload == "train" else spec.model.eval()
    args, fn = spec.args[a.workload], spec.fns[a.workload]
    sync()
    out: dict = {"mode": a.mode}
    cp = cProfile.Profile() if a.cprofile and a.mode == "nb" else None
    f = fn
    if a.mode == "nb":
        t = time.perf_counter()
        from precompile_nb import precompile
        out["import_s"] = time.perf_counter() - t
        code = (Path(a.work) / "nb.py").read_text()
        cache = (Path(a.work) / "nb.cache").read_bytes()
        if cp:
            cp.enable()
        t = time.perf_counter()
        f = precompile.load(code, cache)
        out["load_s"] = time.perf_counter() - t
        out["load"] = {k: v for k, v in f.__precompile_load__.items() if k != "reason"}
        out.update(_cache_makeup(cache))
    grad = contextlib.nullcontext() if a.workload == "train" else torch.no_grad()
    tp = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) \
        if a.torch_profile else contextlib.nullcontext()
    with grad, tp:
        t = time.perf_counter()
        f(m, *args)
        sync()
        out["first_s"] = time.perf_counter() - t
    if cp:
        cp.disable()
    with grad:
        t = time.perf_counter()
        f(m, *args)
        sync()
        out["second_s"] = time.perf_counter() - t
    print(json.dumps(out, default=str))
    if cp:
        s = io.StringIO()
        pstats.Stats(cp, stream=s).sort_stats("tottime").print_stats(30)
        print(s.getvalue())
    if a.torch_profile:
        print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


if __name__ == "__main__":
    main()
