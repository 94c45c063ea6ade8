"""What a CUDA first call of a benchmark workload spends on starting libraries, and whether that
start could run beside a load (issue 28: the transformer inference's warm start is eager's first
call plus import and load, ~8 ms on ~93 ms on the H100s of rounds 39-40).

usage: python benchmarks/first_call_parts.py [--workload transformer_infer] [--rounds 5]
                                             [--overlap-ms 8] [--variants a,b] [--out DIR]
                                             [--device cuda|cpu]

Each variant in a fresh process, timed from right after the workload is built on the GPU (CUDA
initialised, as warm_first_call.py does), the variants in turn, --rounds times:

  eager     the first call
  mm_first  a 2x2 matrix product of the workload's dtype first (cuBLAS's start), then the call
  sdpa_first  a tiny scaled_dot_product_attention first, then the call
  sleep     --overlap-ms of sleep (standing for import + load), then the call
  thread    a thread runs mm_first's and sdpa_first's small ops while the main thread sleeps
            --overlap-ms; joined; then the call
  thread_nojoin  the same thread, not joined: the call right after the sleep (what round 41's
            measured tree's load did; not kept, see below)
  nb        import precompile_nb, precompile.load of the workload's pair (made once by a
            process before the rounds, compiler caches as that process left them), the first
            call through the artifact's driver
  nb_split  the same load, then the first call in the driver's pieces, timed one by one:
            flattening the arguments, the first call's checks, the graph (synchronized)

Prints and writes DIR/first_call_parts.json: the medians (ms) of each variant's parts.

Round 41 (H100, benchmarks/results/h100_round41/): the 2x2 product took 52-78 ms and the call
after it 51-75 ms, against eager's first calls of 96-172 ms: cuBLAS's start is about half of
the transformer inference's first call; the attention's is ~2 ms. A load that started cuBLAS
on a thread (not joined) was tried in the same round: in ten alternating runs of run.py
import + load took ~2 ms longer, and load + first call over eager's was 0.90-1.30 (median
1.10) with the thread and 1.04-1.17 (median 1.13) without, within this host's noise, so it
was not kept.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import json, sys, threading, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
import torch.nn.functional as F
DEV = {device!r}
sync = torch.cuda.synchronize if DEV == "cuda" else (lambda: None)
if DEV == "cuda":
    torch.cuda.init(); torch.zeros(1, device="cuda"); sync()
import workloads
w = workloads.build({workload!r}, DEV)
grad = torch.no_grad if w.inference else torch.enable_grad
dtype = next((a.dtype for a in w.args if isinstance(a, torch.Tensor)
              and a.is_floating_point()), torch.float32)

def mm():
    a = torch.ones(2, 2, device=DEV, dtype=dtype)
    torch.mm(a, a)

def sdpa():
    q = torch.ones(1, 1, 8, 16, device=DEV, dtype=dtype)
    F.scaled_dot_product_attention(q, q, q)

def call():
    with grad():
        w.fn(*w.args)
    sync()

V = {variant!r}
parts = {{}}
if V.startswith("nb"):
    with open({pair!r} + ".py") as fh:
        code = fh.read()
    with open({pair!r} + ".cache", "rb") as fh:
        data = fh.read()
t0 = time.perf_counter()
if V == "nb":  # the suite's warm start: import, load, the first call through the driver
    from precompile_nb import precompile
    f = precompile.load(code, data)
    parts["load"] = time.perf_counter() - t0
    import dataclasses
    w = dataclasses.replace(w, fn=f)
elif V == "nb_split":  # the same first call in its driver's pieces, each synchronized
    from precompile_nb import precompile
    f = precompile.load(code, data)
    parts["load"] = time.perf_counter() - t0
    cells = dict(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__)))
    g, p, st = f.__globals__, cells["p"], cells["st"]
    t = time.perf_counter()
    with grad():
        flat = g["_pc_flatten"](p, st, w.args)
        parts["flatten"] = time.perf_counter() - t; t = time.perf_counter()
        g["_pc_check"](p, st, flat)
        parts["check"] = time.perf_counter() - t; t = time.perf_counter()
        g["_pc_run"](p, cells["graph_call"], flat, None)
        sync()
        parts["graph"] = time.perf_counter() - t
    parts["total"] = time.perf_counter() - t0
    print(json.dumps(parts)); sys.exit(0)
if V in ("mm_first", "sdpa_first"):
    (mm if V == "mm_first" else sdpa)(); sync()
    parts["start"] = time.perf_counter() - t0
elif V in ("sleep", "thread", "thread_nojoin"):
    th = None
    if V != "sleep":
        th = threading.Thread(target=lambda: (mm(), sdpa(), sync()))
        th.start()
    time.sleep({overlap_ms} / 1e3)
    if th is not None and V == "thread":
        th.join()
    parts["start"] = time.perf_counter() - t0
t1 = time.perf_counter()
call()
parts["call"] = time.perf_counter() - t1
parts["total"] = time.perf_counter() - t0
print(json.dumps(parts))
"""

_PAIR = r"""
import sys, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
import workloads
from precompile_nb import precompile
w = workloads.build({workload!r}, {device!r})
with (torch.no_grad() if w.inference else torch.enable_grad()):
    code, data = precompile(w.fn, *w.args)
with open({pair!r} + ".py", "w") as fh:
    fh.write(code)
with open({pair!r} + ".cache", "wb") as fh:
    fh.write(data)
"""

VARIANTS = ("eager", "mm_first", "sdpa_first", "sleep", "thread", "thread_nojoin", "nb",
            "nb_split")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="transformer_infer")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--overlap-ms", type=float, default=8.0)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "first_call_parts"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    variants = [v for v in a.variants.split(",") if v]
    if bad := sorted(set(variants) - set(VARIANTS)):
        ap.error(f"--variants: no variant {bad} (there are {', '.join(VARIANTS)})")
    pair = os.path.join(tempfile.mkdtemp(prefix="first_call_parts_"), "pair")
    if any(v.startswith("nb") for v in variants):
        subprocess.run([sys.executable, "-c", _PAIR.format(root=ROOT, bench=HERE, pair=pair,
                                                           workload=a.workload, device=a.device)],
                       check=True, timeout=300)
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for _ in range(a.rounds):
        for v in variants:
            src = _CHILD.format(root=ROOT, bench=HERE, workload=a.workload, variant=v,
                                overlap_ms=a.overlap_ms, pair=pair, device=a.device)
            p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                               timeout=120)
            if p.returncode != 0:
                print(f"{v}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            runs[v].append(json.loads(p.stdout.strip().splitlines()[-1]))
    shutil.rmtree(os.path.dirname(pair), ignore_errors=True)
    med = {v: {k: round(statistics.median(r[k] for r in rs) * 1e3, 2) for k in rs[0]}
           for v, rs in runs.items() if rs}
    res = {"workload": a.workload, "rounds": a.rounds, "overlap_ms": a.overlap_ms,
           "device": _device(), "medians_ms": med, "runs": runs}
    with open(os.path.join(a.out, "first_call_parts.json"), "w") as f:
        json.dump(res, f, indent=1)
    for v, m in med.items():
        print(f"{v:11s} " + "  ".join(f"{k} {x:.1f} ms" for k, x in m.items()))


def _device() -> str:
    p = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name("
                        "0) if torch.cuda.is_available() else 'cpu', torch.__version__)"],
                       capture_output=True, text=True, timeout=60)
    return p.stdout.strip()


if __name__ == "__main__":
    main()
