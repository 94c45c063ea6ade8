"""Cost of reading a large cache: `precompile.load(code, cache)` in fresh processes, as MB/s.

usage: python benchmarks/cache_read.py [--mb 40] [--repeats 5] [--baseline-rev REV]
                                       [--device cpu|cuda] [--out DIR]

Precompiles the tiny MLP training step of the benchmarks (inductor) once, then makes a large
cache for it with the real writer (`cache.pack`): its own compiled files plus synthetic
kernel-sized binaries (slices of torch's own shared library, sizes 8-256 KB, as compressible
as compiled code), `--mb` MB in all. load verifies and installs every file of a cache
whether the graph uses it or not, so this measures what a cache of that size costs to read;
the unpadded cache is measured beside it, and the difference per MB is the marginal cost.
A warm load writes only the files it loads (Note [install what is read] in core/load.py):
the synthetic files are verified but not written ("deferred"), so the install cost of a
real cache of that size (file creation, ~0.8 ms a file on the development machine) is not
in the padded row; the baseline revision installs them all.

Each measurement is a fresh process with empty compiler caches (TORCHINDUCTOR_CACHE_DIR,
TRITON_CACHE_DIR, TMPDIR), OMP_NUM_THREADS=1; timed after `import torch` and
`import precompile_nb`: reading the cache file, `load`, and the first call, with load's own
stages (`__precompile_load__["seconds"]`). With `--baseline-rev`, the package at that git
revision (exported with `git archive`, nothing here changed) packs the same files into its
own cache format and loads the same python_code, interleaved with this tree's runs.
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
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

sys.path.insert(0, HERE)
from cold_profile import PRELUDE, export_rev  # noqa: E402 (the children's common start)

# one fresh-process measurement: prints one JSON line
_CHILD = PRELUDE + r"""
from workloads import build
w = build("tiny_mlp", {device!r})
if {device!r} == "cuda":
    torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t0 = time.perf_counter()
from precompile_nb import precompile
t1 = time.perf_counter()
with open({cache!r}, "rb") as f:
    data = f.read()
t2 = time.perf_counter()
f = precompile.load(open({code!r}).read(), data)
t3 = time.perf_counter()
out = f(*w.args)
if {device!r} == "cuda":
    torch.cuda.synchronize()
t4 = time.perf_counter()
st = f.__precompile_load__
print(json.dumps({{"import_s": t1 - t0, "file_read_s": t2 - t1, "load_s": t3 - t2,
                  "first_call_s": t4 - t3, "bytes": len(data), "path": st["path"],
                  "files": st["cache_files"], "written": st["written"],
                  "deferred": st.get("deferred", 0),
                  "stages": st["seconds"]}}))
"""

# pack the same files with the package at another revision: prints nothing, writes the cache
_PACK = r"""
import json, sys
sys.path.insert(0, {root!r})
from precompile_nb.core import cache
files = []
for root, rel in json.load(open({listing!r})):
    with open({files_dir!r} + "/" + root + "/" + rel, "rb") as f:
        files.append((root, rel, f.read()))
with open({out!r}, "wb") as f:
    f.write(cache.pack(open({code!r}).read(), "inductor", tuple(files)))
"""


def synthetic_files(mb: float) -> list[tuple[str, str, bytes]]:
    """`mb` MB of kernel-sized binaries (8-256 KB) cut from torch's largest shared library:
    real machine code, compressing as compiled kernels do (~35% with zlib)."""
    import torch

    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    path = max((os.path.join(lib, n) for n in os.listdir(lib) if ".so" in n),
               key=os.path.getsize)
    sizes = (8 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10)
    out, total, i = [], 0, 0
    with open(path, "rb") as f:
        f.seek(64 << 20)
        while total < mb * (1 << 20):
            data = f.read(sizes[i % len(sizes)])
            out.append(("inductor", f"zz/czzcachereadbench{i:05d}.so", data))
            total += len(data)
            i += 1
    return out


def pack_with(tree: str, code_path: str, files, work: str, name: str) -> str:
    """The cache of `files` for python_code at `code_path`, as the package in `tree` packs
    (the files are written once into `work`, one work dir per set of files)."""
    os.makedirs(work, exist_ok=True)
    files_dir = os.path.join(work, "files")
    listing = os.path.join(work, "files.json")
    if not os.path.exists(listing):
        for root, rel, data in files:
            p = os.path.join(files_dir, root, *rel.split("/"))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        with open(listing, "w") as f:
            json.dump([[r, rel] for r, rel, _ in files], f)
    out = os.path.join(work, name)
    subprocess.run([sys.executable, "-c", _PACK.format(root=tree, listing=listing,
                                                       files_dir=files_dir, out=out,
                                                       code=code_path)],
                   check=True, timeout=600)
    return out


def measure(tree: str, code_path: str, cache_path: str, device: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="cache_read_") as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TMPDIR=tmp,
                   OMP_NUM_THREADS="1")
        env.pop("PYTHONPATH", None)
        src = _CHILD.format(root=tree, bench=os.path.join(tree, "benchmarks"), device=device,
                            cache=cache_path, code=code_path)
        r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True,
                           text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict:
    med = {k: statistics.median(r[k] for r in runs)
           for k in ("file_read_s", "load_s", "first_call_s")}
    stages = {k: statistics.median(r["stages"].get(k, 0.0) for r in runs)
              for k in runs[0]["stages"]}
    mb = runs[0]["bytes"] / 1e6
    return {"mb": mb, "files": runs[0]["files"], "written": runs[0]["written"],
            "deferred": runs[0]["deferred"], "path": runs[0]["path"], **med,
            "load_min_s": min(r["load_s"] for r in runs), "stages": stages,
            "load_mb_per_s": mb / med["load_s"],
            "read_install_mb_per_s": mb / max(stages.get("cache_read", 0.0)
                                              + stages.get("cache_install", 0.0), 1e-9)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=40.0, help="synthetic MB added to the cache")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline-rev", default=None)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--out", default=None, help="write results.json and results.md here")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    sys.path[:0] = [ROOT, HERE]
    import torch

    from precompile_nb import precompile
    from precompile_nb.core import cache as cache_mod
    from workloads import build

    work = tempfile.mkdtemp(prefix="cache_read_work_")
    w = build("tiny_mlp", args.device)
    t = time.perf_counter()
    code, cache = precompile(w.fn, *w.args, backend="inductor")
    print(f"precompiled the tiny MLP step in {time.perf_counter() - t:.1f} s "
          f"({torch.__version__}, {args.device})", flush=True)
    code_path = os.path.join(work, "code.py")
    with open(code_path, "w") as f:
        f.write(code)
    own = [(r, rel, bytes(d)) for r, rel, d in
           cache_mod.read_files(cache, cache_mod.read_tag(cache)[1])]
    padded = own + synthetic_files(args.mb)
    trees = {"working tree": ROOT}
    if args.baseline_rev:
        trees[f"@{args.baseline_rev}"] = export_rev(args.baseline_rev, work)
    caches = {}
    for label, tree in trees.items():
        sub = os.path.join(work, label.replace(" ", "_").replace("@", "rev_"))
        caches[label, "own"] = pack_with(tree, code_path, own, sub + "_own", "own.cache")
        caches[label, "padded"] = pack_with(tree, code_path, padded, sub + "_padded",
                                            "padded.cache")
    runs: dict = {k: [] for k in caches}
    try:
        for i in range(args.repeats):
            for (label, kind), path in caches.items():
                runs[label, kind].append(measure(trees[label], code_path, path, args.device))
            print(f"round {i + 1}/{args.repeats} done", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = {f"{label} / {kind}": summary(r) for (label, kind), r in runs.items()}
    for label in trees:
        own_s, pad = rows[f"{label} / own"], rows[f"{label} / padded"]
        pad["marginal_ms_per_mb"] = ((pad["load_s"] - own_s["load_s"]) * 1e3
                                     / max(pad["mb"] - own_s["mb"], 1e-9))
    report(rows, args, torch.__version__)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump({"args": vars(args), "torch": torch.__version__, "rows": rows,
                       "runs": {f"{a} / {b}": v for (a, b), v in runs.items()}}, f, indent=1)


def report(rows: dict, args, torch_version: str) -> None:
    lines = [f"cache read, fresh processes, torch {torch_version}, {args.device}, "
             f"medians of {args.repeats}",
             "| cache | MB | files (written / deferred) | path | file read s | load s | load MB/s | "
             "read+install MB/s | marginal ms/MB | first call s | load stages (median s) |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, r in rows.items():
        stages = ", ".join(f"{k} {v:.3f}" for k, v in r["stages"].items())
        marg = f"{r['marginal_ms_per_mb']:.2f}" if "marginal_ms_per_mb" in r else ""
        lines.append(f"| {name} | {r['mb']:.1f} | {r['files']} ({r['written']} / {r['deferred']}) | "
                     f"{r['path']} | "
                     f"{r['file_read_s']:.3f} | {r['load_s']:.3f} | {r['load_mb_per_s']:.0f} | "
                     f"{r['read_install_mb_per_s']:.0f} | {marg} | {r['first_call_s']:.3f} | "
                     f"{stages} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.md"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
