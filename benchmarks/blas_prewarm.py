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

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe  # noqa: E402  (the frame: processes, rows, medians)
MODES = ("eager", "nb", "nb_handle", "nb_gemms")


def _record(fn, args, inference: bool) -> list:
    """The eager call's matrix products and attention, recorded with fake tensors (no GPU
    work) by conv_prewarm.py's recorder."""
    import torch

    from conv_prewarm import _record as record

    aten = torch.ops.aten
    names = ("mm", "addmm", "bmm", "baddbmm", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_transformer_encoder_layer_fwd", "_native_multi_head_attention")
    with probe.grad(inference):
        return record(fn, args[0], args[1:],
                      {getattr(aten, n).default for n in names if hasattr(aten, n)})


def _handle() -> None:
    import torch

    a = torch.ones(64, 64, device="cuda")
    torch.mm(a, a)
    torch.cuda.synchronize()


def child(name: str, mode: str, pair: str) -> dict:
    import threading

    from conv_prewarm import _replay

    fn, args, inference = probe.build_case(name)
    calls = _record(fn, args, inference) if mode == "nb_gemms" else []
    row: dict = {"case": name, "mode": mode, "replayed": len(calls)}
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
    f = fn
    if mode != "eager":
        f = probe.load(pair)
        row["load_ms"] = (time.perf_counter() - t0) * 1e3
        row["path"] = f.__precompile_load__["path"]
    if side is not None:
        side.join()
        row["thread_ms"] = done["ms"]
        row["joined_at_ms"] = (time.perf_counter() - t0) * 1e3
    probe.first_call(f, args, inference, row, t0)
    return row


def main() -> None:
    probe.main(__doc__, __file__, "blas_prewarm", MODES, "transformer_infer", 3, child)


if __name__ == "__main__":
    main()
