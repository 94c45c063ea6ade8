"""What precompiling the same computation again costs (a notebook cell run again after a kernel
restart, a script's next process), precompile_nb against torch.compile, on zoo cases, side by
side in one run. Each row is a fresh process; each tool has one compiler cache dir per case,
empty before its first row:

  nb cold        precompile with empty caches
  nb again, kernels only   the next process, with PRECOMPILE_NB_LOWERING_REUSE=0: the C++
                 and Triton kernel stores only (Notes [C++ kernels built once], [Triton
                 kernels compiled once]; before Note [a lowering made once])
  nb again, functionalized   the next process, with PRECOMPILE_NB_CAPTURED_RECORD=0: the
                 whole lowering taken, found by the functional graph's key (before Note [a hit
                 before functionalizing])
  nb again       the next process: the whole lowering taken from the store
  tc cold        torch.compile's compile + first call with empty caches
  tc again       the next process, torch.compile's caches kept (its FX graph and AOTAutograd
                 caches, Triton's)

Times are the compile alone (precompile; torch.compile's compile + first call), in the
process, after the imports and the model's construction (`before_s` in the json, `wall_s` the
whole process as the parent saw it). `same` says whether the row's python_code is the cold
row's, byte for byte.

usage: python benchmarks/precompile_again.py [--cases MODEL:WORKLOAD:SIZE,...]
                                             [--device cpu|cuda] [--repeats N] [--out DIR]
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
CASES = ("gpt2:train:tiny,bert:train:tiny,t5:train:tiny,timm_deit:train:tiny,"
         "timm_resnet:train:tiny,llama:infer:tiny")

_CHILD = r"""
import hashlib, json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import torch
from benchmarks.zoo import models
name, work, size = {case!r}.split(":")
spec = models.REGISTRY[name](size, {device!r})
fn, args = spec.fns[work], spec.args[work]
out = {{"before_s": time.perf_counter() - t0}}
if {tool!r} == "nb":
    from precompile_nb.core import build
    t = time.perf_counter()
    art = build(fn, spec.model, *args)
    out["seconds"] = time.perf_counter() - t
    out["builds"] = dict(art.lowered.builds)
    out["code_sha"] = hashlib.sha256(art.python_code.encode()).hexdigest()
else:
    t = time.perf_counter()
    compiled = torch.compile(fn)
    compiled(spec.model, *args)
    if {device!r} == "cuda":
        torch.cuda.synchronize()
    out["seconds"] = time.perf_counter() - t
print(json.dumps(out))
"""

ROWS = (("nb cold", "nb", {}), ("nb again, kernels only", "nb",
                                {"PRECOMPILE_NB_LOWERING_REUSE": "0"}),
        ("nb again, functionalized", "nb", {"PRECOMPILE_NB_CAPTURED_RECORD": "0"}),
        ("nb again", "nb", {}), ("tc cold", "tc", {}), ("tc again", "tc", {}))


def one(case: str, tool: str, device: str, caches: str, extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PRECOMPILE_NB_LOWERING_REUSE", "PRECOMPILE_NB_CAPTURED_RECORD")}
    env.update(TORCHINDUCTOR_CACHE_DIR=caches, PYTHONPATH=ROOT, **extra)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT, case=case, tool=tool,
                                                             device=device)],
                       env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{case} {tool}: {r.stderr[-3000:]}")
    row = json.loads(r.stdout.strip().splitlines()[-1])
    row["wall_s"] = time.perf_counter() - t
    return row


def case_rows(case: str, device: str) -> dict[str, dict]:
    out = {}
    with tempfile.TemporaryDirectory(prefix="precompile_again_") as tmp:
        for label, tool, extra in ROWS:
            out[label] = one(case, tool, device, os.path.join(tmp, tool), extra)
    cold = out["nb cold"]["code_sha"]
    for label, _, _ in ROWS:
        if "code_sha" in out[label]:
            out[label]["same"] = out[label]["code_sha"] == cold
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    runs = {c: [case_rows(c, args.device) for _ in range(args.repeats)]
            for c in args.cases.split(",")}
    print(f"seconds (median of {args.repeats}), fresh processes; ratios to tc again\n")
    print("| case | " + " | ".join(label for label, _, _ in ROWS)
          + " | nb again / tc again | nb again / nb cold | same artifact |")
    print("| --- |" + " ---: |" * (len(ROWS) + 2) + " --- |")
    for case, reps in runs.items():
        med = {label: statistics.median(r[label]["seconds"] for r in reps)
               for label, _, _ in ROWS}
        same = all(r[label].get("same", True) for r in reps for label, _, _ in ROWS)
        print(f"| {case} | " + " | ".join(f"{med[label]:.2f}" for label, _, _ in ROWS)
              + f" | {med['nb again'] / med['tc again']:.2f}"
              f" | {med['nb again'] / med['nb cold']:.2f} | {'yes' if same else 'NO'} |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "precompile_again.json"), "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
