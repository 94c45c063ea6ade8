"""Compile the bytecode of the installed packages a benchmark imports, as pip does when it
installs them, so that every timed process reads .pyc files instead of compiling sources.

usage: python benchmarks/site_bytecode.py [MODULE ...]   (default: torch's compile stack)

The device machine's torch ships without .pyc files and its environment sets
PYTHONDONTWRITEBYTECODE=1, so there every fresh process compiled torch, Triton and sympy from
source: `import torch` and Inductor's compile_fx took 8.7-9.7 s a process on an H100 host
(round 37, benchmarks/results/h100_round37/), against 4.0-5.1 s on the 2-core development
machine whose torch has its bytecode. Both compilers' cold starts carried that, which no user's
installed torch does. The .pyc files go where Python will look for them: PYTHONPYCACHEPREFIX
when it is set (gpu_env.sh sets it), else each package's __pycache__.

Imports MODULEs, takes the top-level package of every module then loaded from a
site-packages folder, and compiles each whole package (its lazily imported submodules too) on
all cores. Prints one line: packages, files, seconds.
"""
from __future__ import annotations

import compileall
import importlib
import os
import sys
import sysconfig
import time

DEFAULT = ("torch", "torch._inductor.compile_fx", "torch._dynamo", "triton")


def site_packages_of(modules: dict) -> list[str]:
    """The folders (or single-file modules) of the top-level packages among `modules` that
    live in a site-packages folder, sorted."""
    sites = {os.path.realpath(p) for p in (sysconfig.get_paths()["purelib"],
                                           sysconfig.get_paths()["platlib"])}
    found = set()
    for name, mod in list(modules.items()):
        path = getattr(mod, "__file__", None)
        if not path or "." in name:
            continue
        real = os.path.realpath(path)
        if os.path.dirname(os.path.dirname(real)) in sites and real.endswith("__init__.py"):
            found.add(os.path.dirname(real))
        elif os.path.dirname(real) in sites and real.endswith(".py"):
            found.add(real)
    return sorted(found)


def compile_packages(paths: list[str]) -> int:
    """Compile every .py under `paths` (quietly: a file that does not compile is skipped, as
    pip skips it); returns how many .py files were looked at."""
    files = 0
    for p in paths:
        if os.path.isdir(p):
            compileall.compile_dir(p, quiet=2, workers=0)
            files += sum(f.endswith(".py") for _, _, fs in os.walk(p) for f in fs)
        else:
            compileall.compile_file(p, quiet=2)
            files += 1
    return files


def main(argv: list[str]) -> None:
    t = time.perf_counter()
    for name in argv or DEFAULT:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a missing package just compiles nothing
            print(f"site_bytecode: {name} not imported ({type(e).__name__}: {e})")
    paths = site_packages_of(sys.modules)
    files = compile_packages(paths)
    print(f"site_bytecode: {len(paths)} packages, {files} files, "
          f"{time.perf_counter() - t:.1f} s (prefix {sys.pycache_prefix or 'none'})")


if __name__ == "__main__":
    main(sys.argv[1:])
