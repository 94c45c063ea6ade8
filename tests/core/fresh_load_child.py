"""Run in a fresh process by the tests: load a saved (python_code, cache) pair with empty
compiler caches, call it once, and report how much got compiled.

usage: python fresh_load_child.py DIR {cache|nocache}
DIR holds art.py, art.cache and ref.pt = {"model": module, "args": tuple, "ref": result}.
Prints one line of JSON: {"cpp_builds", "new_triton_files", "triton_writes", "processes"
(command lines of the child processes started), "match", "seconds", "load"}.
"""
import json
import os
import sys
import time
import warnings

t0 = time.perf_counter()
warnings.simplefilter("ignore")
import torch  # noqa: E402
from torch._inductor import cpp_builder  # noqa: E402

builds = []
_orig_build = cpp_builder.CppBuilder.build


def _counting_build(self):  # count every C++ compiler run (kernels, headers, ISA probes)
    builds.append(self.get_target_file_path())
    return _orig_build(self)


cpp_builder.CppBuilder.build = _counting_build

# every child process started (Inductor's ISA probes, compile workers, a compiler)
import subprocess  # noqa: E402

processes = []
_orig_popen_init = subprocess.Popen.__init__


def _counting_popen_init(self, args, *a, **k):
    processes.append(str(args)[:200])
    return _orig_popen_init(self, args, *a, **k)


subprocess.Popen.__init__ = _counting_popen_init

# every Triton compile in this process (a kernel, or Triton's own driver module) ends in its
# cache manager's put(); a cache hit writes nothing. New files also catch worker processes.
triton_writes = []
try:
    from triton.runtime import cache as _triton_cache
except ImportError:  # no triton (CPU-only torch)
    _triton_cache = None
if _triton_cache is not None:
    _orig_put = _triton_cache.FileCacheManager.put

    def _counting_put(self, data, filename, binary=True):
        triton_writes.append(filename)
        return _orig_put(self, data, filename, binary)

    _triton_cache.FileCacheManager.put = _counting_put


# every benchmarking of a multi-config Triton kernel (its autotuning); a kernel whose choice
# the cache shipped (.best_config) runs its one config without benchmarking
autotune_runs = []
try:
    from torch._inductor.runtime import triton_heuristics as _heuristics
except ImportError:  # no triton
    _heuristics = None
if _heuristics is not None:
    _orig_bench = _heuristics.CachingAutotuner.benchmark_all_configs

    def _counting_bench(self, *a, **k):
        autotune_runs.append(getattr(self.fn, "__name__", "?"))
        return _orig_bench(self, *a, **k)

    _heuristics.CachingAutotuner.benchmark_all_configs = _counting_bench


def triton_files():
    root = os.environ.get("TRITON_CACHE_DIR")
    if not root or not os.path.isdir(root):
        return set()
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


from precompile_nb import precompile  # noqa: E402
from precompile_nb.core import cache as cache_mod  # noqa: E402

d, mode = sys.argv[1], sys.argv[2]
ref = torch.load(os.path.join(d, "ref.pt"), weights_only=False)
code = open(os.path.join(d, "art.py")).read()
cache = open(os.path.join(d, "art.cache"), "rb").read() if mode == "cache" else None
shipped = set()  # triton files the cache itself brings: not compiled here
if cache:
    _, header = cache_mod.read_tag(cache)
    shipped = {os.path.normpath(os.path.join(os.environ.get("TRITON_CACHE_DIR", ""), rel))
               for root, rel, _, _ in header["files"] if root == "triton"}
before = triton_files()  # anything already there (nothing: the dir starts empty)
f = precompile.load(code, cache)  # Triton kernels compile during load when not cached
out = f(ref["model"], *ref["args"])
if torch.cuda.is_available():
    torch.cuda.synchronize()
new = {p for p in triton_files() - before if os.path.normpath(p) not in shipped}
match = torch.allclose(out, ref["ref"], atol=1e-4, rtol=1e-4)
print(json.dumps({"cpp_builds": len(builds), "new_triton_files": len(new),
                  "triton_writes": len(triton_writes), "processes": processes,
                  "autotune_runs": autotune_runs,
                  "match": bool(match), "seconds": time.perf_counter() - t0,
                  "load": f.__precompile_load__}))
