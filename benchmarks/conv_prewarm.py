"""Does a cuDNN convolution's first-call cost move to another thread? One fresh process per
mode, a zoo training step on CUDA (default timm_efficientnet, real size):

  eager    the step's first call, alone
  thread   every convolution (forward and backward) the step runs, replayed on empty tensors
           of the same shapes, strides, dtypes and arguments on a second thread (joined),
           then the step's first call on the main thread
  same     the replay on the main thread, then the first call
  overlap  the replay on a second thread while the main thread does `--busy` ms of Python
           work that holds the GIL (as a warm load does: compile() calls), then the first call

Each row: replay ms, busy ms, first call ms, total ms (from the start of the replay or the
busy work to the end of the first call). The calls replayed are recorded in the same
process by running the step once under FakeTensorMode with a dispatch mode watching
aten.convolution and aten.convolution_backward (no GPU work, no cuDNN).

usage: python benchmarks/conv_prewarm.py [--model timm_efficientnet] [--repeats 3]
                                         [--busy 300] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("eager", "thread", "same", "overlap")


def _record(fn, model, args, ops=None):
    """[(op, args, kwargs) with tensors as ('T', shape, stride, dtype, device)] of the calls
    of `ops` (default: the convolutions, forward and backward) that fn(model, *args) runs,
    recorded with fake tensors (no GPU work). blas_prewarm.py records its products with it."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = ops or {torch.ops.aten.convolution.default,
                  torch.ops.aten.convolution_backward.default}
    seen: list = []

    def meta(a):
        if isinstance(a, torch.Tensor):
            return ("T", tuple(a.shape), tuple(a.stride()), a.dtype, str(a.device))
        return a

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            if func in ops:
                seen.append((func, [meta(x) for x in a],
                             {k: meta(v) for k, v in (kw or {}).items()}))
            return func(*a, **(kw or {}))

    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake, Watch():
        fake_args = [fake.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        fn(model, *fake_args)
    for p in model.parameters():
        p.grad = None
    return seen


def _replay(calls):
    """Each recorded call again on empty tensors of its shapes, strides and dtypes."""
    import torch

    def real(a):
        if isinstance(a, tuple) and a and a[0] == "T":
            return torch.empty_strided(a[1], a[2], dtype=a[3], device=a[4])
        return a

    with torch.no_grad():
        for func, a, kw in calls:
            func(*[real(x) for x in a], **{k: real(v) for k, v in kw.items()})
    torch.cuda.synchronize()


def _busy(ms: float) -> None:
    src = "\n".join(f"def f{i}(a, b):\n    return a * {i} + b" for i in range(200))
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        compile(src, "<busy>", "exec")


def child(model_name: str, mode: str, busy_ms: float) -> dict:
    import threading

    import torch
    sys.path.insert(0, HERE)
    from zoo import models

    spec = models.REGISTRY[model_name]("real", "cuda")
    fn, args = spec.fns["train"], spec.args["train"]
    torch.cuda.synchronize()
    calls = _record(fn, spec.model, args) if mode != "eager" else []
    row = {"mode": mode, "convs": len(calls), "replay_ms": 0.0, "busy_ms": 0.0}
    t0 = time.perf_counter()
    if mode == "same":
        _replay(calls)
        row["replay_ms"] = (time.perf_counter() - t0) * 1e3
    elif mode in ("thread", "overlap"):
        done = {}

        def side():
            s = time.perf_counter()
            _replay(calls)
            done["ms"] = (time.perf_counter() - s) * 1e3

        th = threading.Thread(target=side)
        th.start()
        if mode == "overlap":
            b = time.perf_counter()
            _busy(busy_ms)
            row["busy_ms"] = (time.perf_counter() - b) * 1e3
        th.join()
        row["replay_ms"] = done["ms"]
    t1 = time.perf_counter()
    fn(spec.model, *args)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    fn(spec.model, *args)
    torch.cuda.synchronize()
    row.update(first_ms=(t2 - t1) * 1e3, total_ms=(t2 - t0) * 1e3,
               second_ms=(time.perf_counter() - t2) * 1e3)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="timm_efficientnet")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--busy", type=float, default=300.0)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="")
    a = ap.parse_args()
    if a.child:
        print("ROW " + json.dumps(child(a.model, a.child, a.busy)))
        return
    rows = []
    for r in range(a.repeats):
        for mode in MODES:
            p = subprocess.run([sys.executable, __file__, "--child", mode, "--model", a.model,
                                "--busy", str(a.busy)], capture_output=True, text=True)
            line = next((x for x in p.stdout.splitlines() if x.startswith("ROW ")), None)
            if line is None:
                print(mode, "failed:", p.stderr[-2000:])
                continue
            row = json.loads(line[4:])
            rows.append(row)
            print(f"{mode:8s} convs {row['convs']:4d} replay {row['replay_ms']:7.1f} busy "
                  f"{row['busy_ms']:6.1f} first {row['first_ms']:7.1f} total "
                  f"{row['total_ms']:7.1f} second {row['second_ms']:6.1f}", flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"conv_prewarm_{a.model}.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
