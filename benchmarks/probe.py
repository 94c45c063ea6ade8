"""The frame of a GPU question asked in fresh processes (blas_prewarm.py, cubin_load.py): one
precompile per case, then a process per (repeat, mode), modes alternating, each printing one
`ROW {json}` line; rows printed as they come, written to OUT/NAME.json after each, medians of
`total_ms` at the end."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build_case(case: str) -> tuple[Callable, tuple, bool]:
    """(fn, args, inference) of a case built on the GPU after CUDA's start: a workload of
    benchmarks/workloads.py (its CUDA size), or zoo:MODEL:WORKLOAD at real size."""
    import torch

    sys.path[:0] = [ROOT, HERE]
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    if case.startswith("zoo:"):
        from benchmarks.zoo import models as Z

        _, model, workload = case.split(":")
        spec = Z.build(model, "real", "cuda")
        m = spec.model
        m.train() if workload == "train" else m.eval()
        return spec.fns[workload], (m, *spec.args[workload]), workload != "train"
    import workloads

    w = workloads.build(case, "cuda")
    return w.fn, tuple(w.args), w.inference


def grad(inference: bool):
    import torch

    return torch.no_grad() if inference else torch.enable_grad()


def make(case: str, pair: str) -> None:
    """The case precompiled (in the grad mode it is called in), as PAIR.py and PAIR.cache."""
    fn, args, inference = build_case(case)
    from precompile_nb import precompile

    with grad(inference):
        code, cache = precompile(fn, *args)
    with open(pair + ".py", "w") as fh:
        fh.write(code)
    with open(pair + ".cache", "wb") as fh:
        fh.write(cache)


def load(pair: str) -> Callable:
    """import precompile_nb + precompile.load of the pair `make` saved."""
    import precompile_nb

    with open(pair + ".py") as fh, open(pair + ".cache", "rb") as fc:
        return precompile_nb.precompile.load(fh.read(), fc.read())


def run_child(script: str, args: list[str], tmp: str) -> str:
    """`script ARGS` in a fresh process with empty compiler caches under tmp; its stdout."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(dir=tmp),
               TRITON_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                       env=env, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr[-3000:]}")
    return p.stdout


def first_call(f: Callable, args: tuple, inference: bool, row: dict, t0: float) -> dict:
    """The first call, synchronized: row's first_ms, and total_ms since t0 (the clock's start
    right after the case was built)."""
    import torch

    t1 = time.perf_counter()
    with grad(inference):
        f(*args)
    torch.cuda.synchronize()
    row["first_ms"] = (time.perf_counter() - t1) * 1e3
    row["total_ms"] = (time.perf_counter() - t0) * 1e3
    return row


def _measure(script: str, cases: list[str], modes: tuple[str, ...], repeats: int,
             out_file: str | None) -> list[dict]:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="probe_") as tmp:
        for case in cases:
            pair = os.path.join(tmp, case.replace(":", "_"))
            try:
                run_child(script, ["--make", case, pair], tmp)
            except (RuntimeError, subprocess.TimeoutExpired) as e:  # the next case still runs
                rows.append({"case": case, "mode": "make", "error": str(e)[-1500:]})
                print(f"case={case} make failed: {str(e)[-300:]}", flush=True)
                continue
            for _ in range(repeats):
                for mode in modes:
                    try:
                        got = run_child(script, ["--child", case, mode, pair], tmp)
                        row = json.loads(next(x for x in got.splitlines()
                                              if x.startswith("ROW "))[4:])
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        row = {"case": case, "mode": mode, "error": str(e)[-1500:]}
                    rows.append(row)
                    print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                   for k, v in row.items()), flush=True)
                    if out_file:
                        with open(out_file, "w") as fh:
                            json.dump(rows, fh, indent=1)
    return rows


def main(doc: str, script: str, name: str, modes: tuple[str, ...], cases: str, repeats: int,
         child: Callable[[str, str, str], dict]) -> None:
    """The command line of a probe: --cases, --repeats, --out DIR (DIR/NAME.json); --child
    and --make are the processes it starts."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--cases", "--workloads", dest="cases", default=cases)
    ap.add_argument("--repeats", type=int, default=repeats)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", nargs=3, metavar=("CASE", "MODE", "PAIR"))
    ap.add_argument("--make", nargs=2, metavar=("CASE", "PAIR"))
    a = ap.parse_args()
    if a.make:
        return make(*a.make)
    if a.child:
        print("ROW " + json.dumps(child(*a.child)))
        return None
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    out_file = os.path.join(a.out, name + ".json") if a.out else None
    rows = _measure(script, [c for c in a.cases.split(",") if c], modes, a.repeats, out_file)
    for case in dict.fromkeys(r["case"] for r in rows):
        for mode in modes:
            got = [r["total_ms"] for r in rows
                   if r["case"] == case and r["mode"] == mode and "total_ms" in r]
            if got:
                print(f"{case} {mode}: total median {statistics.median(got):.1f} ms of {got}")
    return None
