"""What a cold start imports that the other tool's does not: measure.py's nb_cold and tc_cold
(run.py's cold starts) in fresh processes under `python -X importtime`, the two module sets
compared. A module only one side imports is charged to the outermost module of its import
chain that is also only on that side (the root that pulled it in), with the root's
cumulative import time.

usage: python benchmarks/import_diff.py [--device cuda|cpu] [--workloads tiny_mlp,...]
                                        [--out DIR]

Writes DIR/<workload>_<tool>.importtime (the children's stderr) and DIR/import_diff.json;
prints, per workload, each side's seconds of imports in all and its only-here roots (>= 5 ms).
-X importtime inflates every import a little; the comparison is of what is imported, and the
seconds are for ranking. It times only imports made by import statements (the C import), so the
children route importlib.import_module's absolute imports through __import__.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fresh_child import run_fresh, save  # noqa: E402

_CHILD = """
import importlib, json, sys
def _through_import(name, package=None):  # importlib.import_module's imports are not timed
    if package or name.startswith("."):
        return _import_module(name, package)
    __import__(name)
    return sys.modules[name]
_import_module, importlib.import_module = importlib.import_module, _through_import
sys.path.insert(0, {bench!r}); sys.path.insert(0, {root!r})
import measure
out = measure.main([{mode!r}, {workload!r}, {device!r}, {workdir!r}])
print(json.dumps({{k: v for k, v in out.items() if isinstance(v, (int, float, str))}}))
"""
MODES = {"nb": "nb_cold", "tc": "tc_cold"}


def parse(text: str) -> dict[str, dict]:
    """{module: {"self_us", "cum_us", "parent"}} from -X importtime's lines. Lines come
    children first; a module's parent is the next line with less indentation."""
    mods: dict[str, dict] = {}
    waiting: dict[int, list[str]] = {}  # depth -> modules still looking for their parent
    for line in text.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        self_us = int(line.split(":", 1)[1].split("|")[0])
        cum_us = int(line.split("|")[1])
        name_part = line.split("|", 2)[2]
        depth = (len(name_part) - len(name_part.lstrip(" "))) // 2
        name = name_part.strip()
        mods[name] = {"self_us": self_us, "cum_us": cum_us, "parent": None}
        for child in waiting.pop(depth + 1, []):
            mods[child]["parent"] = name
        waiting.setdefault(depth, []).append(name)
    return mods


def only_roots(mine: dict[str, dict], other: dict[str, dict]) -> list[dict]:
    """The outermost modules of `mine` that `other` never imported, by cumulative time."""
    roots = [{"module": m, "cum_ms": round(v["cum_us"] / 1e3, 1), "parent": v["parent"]}
             for m, v in mine.items()
             if m not in other and (v["parent"] is None or v["parent"] in other)]
    return sorted(roots, key=lambda r: -r["cum_ms"])


def one(workload: str, device: str, out: str) -> dict:
    res: dict = {}
    with tempfile.TemporaryDirectory() as workdir:
        for tool, mode in MODES.items():
            log = os.path.join(out, f"{workload}_{tool}.importtime")
            r = run_fresh(_CHILD.format(bench=HERE, root=os.path.dirname(HERE), mode=mode,
                                        workload=workload, device=device, workdir=workdir),
                          prefix=f"impdiff_{tool}_", flags=("-X", "importtime"), stderr_to=log)
            with open(log) as f:
                res[tool] = {"result": r, "modules": parse(f.read())}
    nb, tc = res["nb"]["modules"], res["tc"]["modules"]
    return {tool: {"result": res[tool]["result"],
                   "imports_s": round(sum(v["self_us"] for v in mods.values()) / 1e6, 3),
                   "only_here": only_roots(mods, other)}
            for tool, mods, other in (("nb", nb, tc), ("tc", tc, nb))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workloads", default="tiny_mlp")
    ap.add_argument("--out", default="import_diff_out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = {w: one(w, a.device, a.out) for w in a.workloads.split(",")}
    save(a.out, "import_diff.json", res)
    for w, sides in res.items():
        for tool, r in sides.items():
            t = r["result"].get("precompile_s", r["result"].get("first_call_s"))
            print(f"{w} {tool}: timed {t} s, imports {r['imports_s']} s in all; only here:")
            for root in r["only_here"]:
                if root["cum_ms"] >= 5:
                    print(f"  {root['cum_ms']:8.1f} ms  {root['module']}  (from {root['parent']})")


if __name__ == "__main__":
    main()
