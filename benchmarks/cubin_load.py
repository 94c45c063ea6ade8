"""Where a warm load's ~0.5 ms a Triton kernel goes; could the cubins load behind the first call?

usage: python benchmarks/cubin_load.py [--cases cnn_bn_train,zoo:tv_resnet18:train]
                                       [--repeats 2] [--out DIR]

A question for the GPU, before anything is built into load (round 31, an H100: the zoo's
convolution nets spent 88-131 ms of their warm start in load's `execute`, ~0.5 ms a Triton
kernel; tv_resnet18's and tv_deeplabv3's warm starts were 1.17-1.19x eager's first call).
One precompile per case (a benchmarks/workloads.py name, or zoo:MODEL:WORKLOAD at real
size), then fresh processes, modes alternating, each timed from the built model on the GPU
to the synchronized first result, as the suite times a warm start:

  eager      eager's first call
  nb         import precompile_nb + precompile.load + first call, as shipped; the time in
             each kernel's cubin load (an anonymous memory file handed to torch's static
             launcher) and in its launcher's generation is summed (cubin_ms, launcher_ms)
  nb_bytes   the same, each cubin handed to the CUDA driver from memory (cuModuleLoadData
             through ctypes): what the memory file and torch's loader add
  nb_behind  the cubins loaded on a second thread in the module's order (ctypes releases
             the GIL while the driver works), each launcher made at its kernel's first
             launch, waiting for its cubin if the thread is behind (wait_ms): do the loads
             hide behind the first call's cuDNN / cuBLAS start?

Prints a row per process and the medians; writes DIR/cubin_load.json after every row. Not
used by precompile_nb.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe  # noqa: E402  (the frame: processes, rows, medians)

MODES = ("eager", "nb", "nb_bytes", "nb_behind")


class _Driver:
    """The CUDA driver calls a cubin's load needs, through ctypes (the GIL released while
    each runs); the steps torch's static launcher takes for a file, from memory."""

    def __init__(self) -> None:
        self.cu = ctypes.CDLL("libcuda.so.1")
        ctx = ctypes.c_void_p()
        self._check(self.cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        self.ctx = ctx  # the primary context torch made current on this thread

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def on_this_thread(self) -> None:
        self._check(self.cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def load(self, data: bytes, function: str, shared: int, device: int) -> int:
        cu, mod, fn = self.cu, ctypes.c_void_p(), ctypes.c_void_p()
        self._check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data)),
                    "cuModuleLoadData")
        self._check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, function.encode()),
                    "cuModuleGetFunction")
        if shared > 49152:  # over 48 KB: opt in to the rest, as torch's loader does
            optin, total, static = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
            self._check(cu.cuDeviceGetAttribute(ctypes.byref(optin), 97, device), "optin")
            self._check(cu.cuDeviceGetAttribute(ctypes.byref(total), 81, device), "per SM")
            self._check(cu.cuFuncSetCacheConfig(fn, 1), "cuFuncSetCacheConfig")
            self._check(cu.cuFuncGetAttribute(ctypes.byref(static), 1, fn), "static shared")
            self._check(cu.cuFuncSetAttribute(fn, 8, optin.value - static.value),
                        "cuFuncSetAttribute")
        return fn.value


def _cubin_bytes(rec: dict, path: str, cubins: dict) -> bytes:
    data = cubins.get(rec["cubin"])
    if data is not None:
        return bytes(data)
    with open(path, "rb") as fh:
        return fh.read()


def _patch(mode: str, row: dict):
    """Patches precompile_nb's warm path for `mode`; returns a function that ends the mode's
    side work (the loader thread) and fills its numbers into row."""
    from precompile_nb.core import warm

    row.update(cubin_ms=0.0, launcher_ms=0.0, kernels=0, wait_ms=0.0)
    if mode == "nb":
        load0, launcher0 = warm._load_cubin, warm.launcher

        def timed(key, f):
            def g(*a, **k):
                row["kernels"] += key == "cubin_ms"
                t = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    row[key] += (time.perf_counter() - t) * 1e3
            return g

        warm._load_cubin, warm.launcher = timed("cubin_ms", load0), timed("launcher_ms",
                                                                           launcher0)
        return lambda: None
    drv = _Driver()
    if mode == "nb_bytes":
        def load_bytes(rec, path, cubins):
            t = time.perf_counter()
            fn = drv.load(_cubin_bytes(rec, path, cubins), rec["function"], rec["shared"],
                          rec["device"])
            row["cubin_ms"] += (time.perf_counter() - t) * 1e3
            row["kernels"] += 1
            return fn
        warm._load_cubin = load_bytes
        return lambda: None
    pool = concurrent.futures.ThreadPoolExecutor(1, initializer=drv.on_this_thread)
    init0 = warm._WarmTritonKernel.__init__

    def init(self, rec, path, cubins):
        if "by_size" in rec:
            return init0(self, rec, path, cubins)
        self.name = rec["function"]
        fut = pool.submit(drv.load, _cubin_bytes(rec, path, cubins), rec["function"],
                          rec["shared"], rec["device"])
        row["kernels"] += 1

        def first(*a, **k):
            t = time.perf_counter()
            fn = fut.result()
            row["wait_ms"] += (time.perf_counter() - t) * 1e3
            self.run = warm.launcher(rec, fn)
            return self.run(*a, **k)
        self.run = first

    warm._WarmTritonKernel.__init__ = init
    t0 = time.perf_counter()

    def end() -> None:
        pool.shutdown(wait=True)
        row["thread_done_ms"] = (time.perf_counter() - t0) * 1e3
    return end


def child(case: str, mode: str, pair: str) -> dict:
    fn, args, inference = probe.build_case(case)
    row: dict = {"case": case, "mode": mode}
    t0 = time.perf_counter()
    f, end = fn, None
    if mode != "eager":
        end = _patch(mode, row)
        f = probe.load(pair)
        row["load_ms"] = (time.perf_counter() - t0) * 1e3
        row["path"] = f.__precompile_load__["path"]
    probe.first_call(f, args, inference, row, t0)
    if end is not None:
        end()
    return row


def main() -> None:
    probe.main(__doc__, __file__, "cubin_load", MODES, "cnn_bn_train,zoo:tv_resnet18:train", 2,
               child)


if __name__ == "__main__":
    main()
