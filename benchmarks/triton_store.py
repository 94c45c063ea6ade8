"""What the Triton kernel store (Note [Triton kernels compiled once]) saves, kernel by kernel,
on this machine. The Triton kernels of two H200 precompiles (tests/viewers/data/
report_cuda_*.json: a training step's 7 and an inference graph's 1) are compiled as Inductor's
compile workers compile them (the kernel's module loaded, every configuration compiled into
Triton's cache) for the GPU their source names. Triton compiles on the CPU (only a launch
needs the GPU), so this runs without one; it needs a torch with Triton (a CUDA build).

Four ways, each a fresh process with its own caches, side by side in one run:
  off     precompile_nb with PRECOMPILE_NB_KERNEL_REUSE=0: a private Triton cache, nothing kept
          (as before the store; what torch.compile does with empty caches)
  keep    precompile_nb's first precompile: an empty store, the kernels kept as they compile
  reuse   precompile_nb's next precompile (a cell run again, a new process): keep's store,
          each kernel put in place and then found by Triton
  triton  a plain compile with the Triton cache of `off`'s process kept as it is (what
          torch.compile finds in its Triton cache; Inductor's own cache dir is fresh, as in
          the other ways)
Each process first compiles an unrelated small kernel and then finds it in Triton's cache
(Triton's one-time set-up of both paths, the same in every way), then times the kernels with
Python's collector paused, as precompile's build pauses it. Reported: the median of --repeats
runs per way and ratios to `off`.

usage: python benchmarks/triton_store.py [--repeats N] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import json, os, re, sys, time
sys.path.insert(0, {root!r})
import torch._inductor.async_compile as ac
from torch._inductor.runtime import triton_helpers
from precompile_nb.core._compat import triton_store
triton_helpers.set_driver_to_gpu = lambda: None  # no GPU here: Triton compiles for the named one
kernels = []
for name in ("report_cuda_train_step", "report_cuda_inference"):
    code = json.load(open(os.path.join({root!r}, "tests", "viewers", "data", name + ".json")))
    kernels += [(m.group(1), m.group(2).replace("triton_helpers.set_driver_to_gpu()\n", ""))
                for m in re.finditer(r"async_compile\.triton\('(\w+)', '''(.*?)'''",
                                     code["python_code"], re.S)]
def worker_compile(self, kernel_name, source_code, device_str="cuda"):
    kernel = ac._load_triton_kernel_from_source(kernel_name, source_code)
    kernel.precompile(warm_cache_only=True)
    return kernel
ac.AsyncCompile.triton = worker_compile
name, source = kernels[-1]  # Triton's set-up: an unrelated kernel, outside the timing,
from torch._inductor.utils import clear_caches  # compiled and then found in Triton's cache
for _ in range(2):
    worker_compile(None, name + "_setup", source.replace(name, name + "_setup"))
    clear_caches()
way, store = {way!r}, {store!r}
FETCH = [0.0]  # seconds spent looking kernels up and putting them in place
_fetch = triton_store._Keeping.fetch
def timed_fetch(self, source_code):
    t = time.perf_counter()
    try:
        return _fetch(self, source_code)
    finally:
        FETCH[0] += time.perf_counter() - t
triton_store._Keeping.fetch = timed_fetch
KEEP = [0.0]  # seconds spent keeping, when the lowering ends
_finish = triton_store._Keeping.finish
def timed_finish(self):
    t = time.perf_counter()
    try:
        return _finish(self)
    finally:
        KEEP[0] += time.perf_counter() - t
triton_store._Keeping.finish = timed_finish
import gc
gc.collect(); gc.disable()  # as precompile's build does (Note [the collector pauses for a build])
t0 = time.perf_counter()
with triton_store.keeping_triton_kernels(store if way in ("keep", "reuse") else None) as counts, \
        triton_store.triton_kernels_handed_over():
    for name, source in kernels:
        ac.AsyncCompile().triton(name, source, "cuda")
print(json.dumps({{"seconds": time.perf_counter() - t0, "kernels": len(kernels),
                  "counts": counts, "fetch_s": FETCH[0], "keep_s": KEEP[0]}}))
"""


def one(way: str, caches: str, store: str, triton_cache: str = "") -> dict:
    """One fresh process: the kernels compiled `way`, its caches in `caches` (Triton's in
    `triton_cache` where given)."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(caches, "inductor"),
               TRITON_CACHE_DIR=triton_cache or os.path.join(caches, "triton"),
               PYTHONPATH=ROOT, PRECOMPILE_NB_KERNEL_THREADS="0")  # one kernel at a time
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, without its warning
    r = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT, way=way, store=store)],
                       env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"{way}: {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def rounds(repeats: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {w: [] for w in ("off", "keep", "reuse", "triton")}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="triton_store_") as tmp:
            store = os.path.join(tmp, "store")
            out["off"].append(one("off", os.path.join(tmp, "off"), store))
            out["keep"].append(one("keep", os.path.join(tmp, "keep"), store))
            out["reuse"].append(one("reuse", os.path.join(tmp, "reuse"), store))
            out["triton"].append(one("triton", os.path.join(tmp, "triton"), store,  # off's
                                     os.path.join(tmp, "off", "triton")))  # Triton cache
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    runs = rounds(args.repeats)
    med = {w: statistics.median(r["seconds"] for r in rs) for w, rs in runs.items()}
    print(f"{runs['off'][0]['kernels']} kernels, {args.repeats} runs per way (median s):\n")
    print("| way | seconds | / off | of which put in place | of which kept | counts |\n"
          "| --- | ---: | ---: | ---: | ---: | --- |")
    for w, rs in runs.items():
        fetch, keep = (statistics.median(r[k] for r in rs) for k in ("fetch_s", "keep_s"))
        print(f"| {w} | {med[w]:.3f} | {med[w] / med['off']:.3f} | {fetch:.3f} | {keep:.3f} "
              f"| {rs[-1]['counts']} |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "triton_store.json"), "w") as f:
            json.dump({"runs": runs, "median_s": med}, f, indent=1)


if __name__ == "__main__":
    main()
