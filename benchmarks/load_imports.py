"""What a fresh process's `precompile.load` costs in imports, this tree against a git revision.

usage: python benchmarks/load_imports.py [--baseline-rev REV] [--rounds N] [--workload NAME]
                                         [--out FILE.json]

Each tree (the working tree, and REV exported with `git archive` into a temporary folder)
precompiles a benchmark workload once (benchmarks/workloads.py, its CPU size; default
tiny_mlp); then fresh processes, alternating between the trees, import
precompile_nb and load their own pair with its cache, in two settings: without bytecode
(PYTHONDONTWRITEBYTECODE=1 and no .pyc files: every precompile_nb module compiled from its
source, as in a checkout run on a machine that sets that variable) and with bytecode (a
PYTHONPYCACHEPREFIX of the tree's own, filled by a first process that is not counted: as
after `pip install`, which compiles the .pyc files). Prints the median load ms of each and
the precompile_nb modules a load imported (Note [a load imports no stage]), and the median of
each of load's own stages (`__precompile_load__["seconds"]`) with bytecode; --out also writes
them (and every sample) as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from cold_profile import export_rev  # a revision's tree (this folder is on the path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_MAKE = """
import sys, torch
sys.path[:0] = [{tree!r}, {bench!r}]
from precompile_nb import precompile
import workloads
w = workloads.build({workload!r}, "cpu")
with torch.no_grad() if w.inference else torch.enable_grad():
    code, cache = precompile(w.fn, *w.args)
open({out!r} + ".py", "w").write(code)
open({out!r} + ".bin", "wb").write(cache)
"""

_LOAD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
sys.path.insert(0, {tree!r})
t = time.perf_counter()
import precompile_nb
f = precompile_nb.precompile.load(open({out!r} + ".py").read(), open({out!r} + ".bin", "rb").read())
ms = (time.perf_counter() - t) * 1e3
print(json.dumps({{"ms": ms, "stages": f.__precompile_load__["seconds"],
                  "modules": sorted(m for m in sys.modules if m.startswith("precompile_nb"))}}))
"""


def _run(script: str, env: dict[str, str]) -> dict:
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-rev", default="HEAD")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workload", default="tiny_mlp")
    ap.add_argument("--out", help="also write the medians and samples here (JSON)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="load_imports_") as tmp:
        trees = {"working tree": ROOT, args.baseline_rev: export_rev(args.baseline_rev, tmp)}
        base = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
        base["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        settings = {}
        for i, (name, tree) in enumerate(trees.items()):
            out = os.path.join(tmp, f"pair{i}")
            _run(_MAKE.format(tree=tree, out=out, bench=os.path.join(tree, "benchmarks"),
                              workload=args.workload), {**base, "PYTHONDONTWRITEBYTECODE": "1"})
            # an empty prefix: no .pyc is read either (a checkout's __pycache__ folders)
            settings[(name, "no bytecode")] = (tree, out, {
                **base, "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPYCACHEPREFIX": os.path.join(tmp, f"no_pyc{i}")})
            with_pyc = {**base, "PYTHONPYCACHEPREFIX": os.path.join(tmp, f"pyc{i}")}
            settings[(name, "bytecode")] = (tree, out, with_pyc)
            _run(_LOAD.format(tree=tree, out=out), with_pyc)  # fills the bytecode cache
        times: dict[tuple[str, str], list[float]] = {k: [] for k in settings}
        modules: dict[str, list[str]] = {}
        stages: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for key, (tree, out, env) in settings.items():
                r = _run(_LOAD.format(tree=tree, out=out), env)
                times[key].append(r["ms"])
                if key[1] == "bytecode":
                    stages[key[0]].append(r["stages"])
                modules[key[0]] = r["modules"]
    print(f"import precompile_nb + load of {args.workload}, fresh processes, median of "
          f"{args.rounds} (ms)\n")
    print("| tree | no bytecode | bytecode | precompile_nb modules a load imports |")
    print("| --- | ---: | ---: | ---: |")
    for name in trees:
        print(f"| {name} | {statistics.median(times[(name, 'no bytecode')]):.1f} | "
              f"{statistics.median(times[(name, 'bytecode')]):.1f} | {len(modules[name])} |")
    print("\nload's stages with bytecode, medians (ms):\n")
    names = sorted({k for runs in stages.values() for r in runs for k in r})
    print("| tree | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    for name in trees:
        print(f"| {name} | " + " | ".join(
            f"{statistics.median(r.get(k, 0.0) for r in stages[name]) * 1e3:.2f}"
            for k in names) + " |")
    for name in trees:
        print(f"\n{name}: {', '.join(modules[name])}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"workload": args.workload, "rounds": args.rounds, "trees": {
                name: {"median_ms": {setting: statistics.median(times[(name, setting)])
                                     for setting in ("no bytecode", "bytecode")},
                       "samples_ms": {setting: times[(name, setting)]
                                      for setting in ("no bytecode", "bytecode")},
                       "stages_ms": {k: statistics.median(r.get(k, 0.0) for r in stages[name])
                                     * 1e3 for k in names},
                       "modules": modules[name]} for name in trees}}, fh, indent=1)


if __name__ == "__main__":
    main()
