"""Can cuBLAS start on a second thread while a warm load runs, so the first call finds it ready?
(issue 28: load + first call <= 1.1x eager's first call; round 30's transformer inference was
1.15x with a 16 ms load beside a 93 ms first call, most of it CUDA's libraries starting).

usage: python benchmarks/blas_prewarm.py [--workloads transformer_infer,transformer_train]
                                         [--repeats 3] [--out DIR]

A question for the GPU, answered before anything is built into load: one precompile per
workload (benchmarks/workloads.py, CUDA sizes), then fresh processes, modes alternating, each
timed from right after the model and input are on the GPU (CUDA initialised) to the
synchronized first result:

  eager      the workload's first eager call
  nb         import precompile_nb + precompile.load(code, cache) + first call
  nb_handle  the same, with a thread started first that runs one small matrix product on the
             GPU (cuBLAS's handle and workspace; torch's ops release the GIL, the thread's
             handle returns to torch's pool when it ends), joined before the first call
  nb_gemms   the same, the thread replaying every matrix product and attention the eager
             call runs (recorded under FakeTensorMode: shapes, strides, dtypes) on empty
             tensors, so the first call also finds those kernels loaded

Prints a row per process and the medians; writes DIR/blas_prewarm.json. Not used by
precompile_nb: conv_prewarm.py asked the same of cuDNN (round 15: it moved only in part).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODES = ("eager", "nb", "nb_handle", "nb_gemms")


def _workload(name: str):
    import torch

    sys.path[:0] = [ROOT, HERE]
    import workloads

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return workloads.build(name, "cuda")


def _grad(w):
    import torch

    return torch.no_grad() if w.inference else torch.enable_grad()


def _record(w) -> list:
    """The eager call's matrix products and attention, recorded with fake tensors (no GPU
    work) by conv_prewarm.py's recorder."""
    import torch

    from conv_prewarm import _record as record

    aten = torch.ops.aten
    names = ("mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_transformer_encoder_layer_fwd", "_native_multi_head_attention")
    with _grad(w):
        return record(w.fn, w.args[0], w.args[1:],
                      {getattr(aten, n).default for n in names if hasattr(aten, n)})


def _handle() -> None:
    import torch

    a = torch.ones(64, 64, device="cuda")
    torch.mm(a, a)
    torch.cuda.synchronize()


def child(name: str, mode: str, pair: str) -> dict:
    import threading

    import torch

    from conv_prewarm import _replay

    w = _workload(name)
    calls = _record(w) if mode == "nb_gemms" else []
    row: dict = {"workload": name, "mode": mode, "replayed": len(calls)}
    t0 = time.perf_counter()
    side = None
    if mode in ("nb_handle", "nb_gemms"):
        done: dict = {}

        def run() -> None:
            s = time.perf_counter()
            _handle() if mode == "nb_handle" else _replay(calls)
            done["ms"] = (time.perf_counter() - s) * 1e3

        side = threading.Thread(target=run)
        side.start()
    f = w.fn
    if mode != "eager":
        import precompile_nb

        with open(pair + ".py") as fh, open(pair + ".cache", "rb") as fc:
            f = precompile_nb.precompile.load(fh.read(), fc.read())
        row["load_ms"] = (time.perf_counter() - t0) * 1e3
        row["path"] = f.__precompile_load__["path"]
    if side is not None:
        side.join()
        row["thread_ms"] = done["ms"]
        row["joined_at_ms"] = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    with _grad(w):
        f(*w.args)
    torch.cuda.synchronize()
    row["first_ms"] = (time.perf_counter() - t1) * 1e3
    row["total_ms"] = (time.perf_counter() - t0) * 1e3
    return row


def _make(name: str, pair: str) -> None:
    w = _workload(name)
    from precompile_nb import precompile

    with _grad(w):
        code, cache = precompile(w.fn, *w.args)
    with open(pair + ".py", "w") as fh:
        fh.write(code)
    with open(pair + ".cache", "wb") as fh:
        fh.write(cache)


def _run(args: list[str], tmp: str) -> str:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(dir=tmp),
               TRITON_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                       env=env, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    return p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="transformer_infer")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", nargs=3, metavar=("WORKLOAD", "MODE", "PAIR"))
    ap.add_argument("--make", nargs=2, metavar=("WORKLOAD", "PAIR"))
    a = ap.parse_args()
    if a.make:
        return _make(*a.make)
    if a.child:
        print("ROW " + json.dumps(child(*a.child)))
        return None
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="blas_prewarm_") as tmp:
        for name in [n for n in a.workloads.split(",") if n]:
            pair = os.path.join(tmp, name)
            _run(["--make", name, pair], tmp)
            for _ in range(a.repeats):
                for mode in MODES:
                    out = _run(["--child", name, mode, pair], tmp)
                    row = json.loads(next(x for x in out.splitlines()
                                          if x.startswith("ROW "))[4:])
                    rows.append(row)
                    print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in row.items()), flush=True)
    for name in {r["workload"] for r in rows}:
        for mode in MODES:
            got = [r["total_ms"] for r in rows if r["workload"] == name and r["mode"] == mode]
            if got:
                print(f"{name} {mode}: total median {statistics.median(got):.1f} ms of {got}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "blas_prewarm.json"), "w") as fh:
            json.dump(rows, fh, indent=1)
    return None


if __name__ == "__main__":
    main()
