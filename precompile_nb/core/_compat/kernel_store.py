"""torch internals of reusing C++ kernels built by earlier precompiles (Note [C++ kernels built
once]): Inductor's C++ build step (2.11-2.15: codecache._worker_compile_cpp) and its cache
key's compiler version (cpp_builder.get_compiler_version_info). Checked on 2.13 and 2.15 (2.14.1
has the same names).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import torch

# Note [C++ kernels built once]
#   precompile compiles in a fresh, private cache dir (private_compile_cache), so that exactly
#   its own binaries land in the artifact. That also threw away every C++ kernel the machine
#   had built before: precompiling again after a small change to fn, or in a new process,
#   rebuilt every kernel, where torch.compile finds the unchanged ones in its cache dir. Now
#   each C++ build product (object files and the library: the build step's targets) is also
#   kept in a store beside Inductor's own cache (<its cache dir>/precompile_nb_kernels/<torch
#   and compiler version>), under its path relative to the private dir, and a later precompile
#   that needs a target puts the kept one in place before Inductor looks: Inductor then skips
#   that build, as it does for any target that exists. The path is the kernel's key, a hash of
#   its source and of its compile command (flags, ISA), so a kept file is only ever found by
#   the build it came from; the store's name adds the torch build and the compiler's version.
#   Only what precompile builds is kept and reused (a load builds nothing it did not before),
#   and only C++ (Triton kernels: not yet). A store under a TORCHINDUCTOR_CACHE_DIR is emptied
#   with it, so "empty compiler caches" keeps meaning cold. PRECOMPILE_NB_KERNEL_REUSE=0
#   turns it off.


def kernel_store_dir() -> str | None:
    """Where C++ build products are kept for this torch and compiler (Note [C++ kernels built
    once]), or None where reuse is off or the compiler's version cannot be read. Call it
    outside private_compile_cache (it names Inductor's own cache dir)."""
    if os.environ.get("PRECOMPILE_NB_KERNEL_REUSE", "1") == "0":
        return None
    try:
        from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        compiler = get_cpp_compiler()
        identity = "\n".join((torch.__version__, str(torch.version.git_version), compiler,
                              str(get_compiler_version_info(compiler))))
    except Exception:  # noqa: BLE001 - no store: every kernel is built, as before
        return None
    tag = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), "precompile_nb_kernels", tag)


@contextlib.contextmanager
def reusing_built_kernels(store: str | None, cache_dir: str) -> Iterator[dict[str, int]]:
    """While inside (the private compile of `cache_dir`): C++ build targets found in `store`
    are put in place instead of built, and those built are kept there. Yields counts of the
    builds: "reused" (every target found), "built" (the compiler ran)."""
    from torch._inductor import codecache

    counts = {"reused": 0, "built": 0}
    original = codecache.__dict__.get("_worker_compile_cpp")
    if store is None or original is None:
        yield counts
        return

    def build(lock_path: str, cpp_builders: Any, *args: Any, **kwargs: Any) -> Any:
        if all(os.path.exists(b.get_target_file_path()) for b in cpp_builders):
            return original(lock_path, cpp_builders, *args, **kwargs)  # done: in this compile
        rels = [_relative(b.get_target_file_path(), cache_dir) for b in cpp_builders]
        fetched = [rel is not None and _fetch(store, cache_dir, rel) for rel in rels]
        if all(fetched):
            counts["reused"] += 1
            return None
        result = original(lock_path, cpp_builders, *args, **kwargs)
        counts["built"] += 1
        for rel, had in zip(rels, fetched):
            if rel is not None and not had:
                _keep(store, cache_dir, rel)
        return result

    codecache._worker_compile_cpp = build  # under GLOBAL_LOCK, as the whole precompile
    try:
        yield counts
    finally:
        codecache._worker_compile_cpp = original


def _relative(path: str, root: str) -> str | None:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return None if rel.startswith(os.pardir) or os.path.isabs(rel) else rel


def _fetch(store: str, cache_dir: str, rel: str) -> bool:
    """Put a copy of the kept `rel` in place in `cache_dir` (a copy: nothing done in the
    private dir can reach the store); True if it is there now."""
    dest = os.path.join(cache_dir, rel)
    if os.path.exists(dest):
        return True
    src = os.path.join(store, rel)
    if not os.path.isfile(src):
        return False
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _place(src, dest, link=False)
    except OSError:
        return False
    return True


def _keep(store: str, cache_dir: str, rel: str) -> None:
    """Keep a freshly built `rel` in the store: whole or absent, for a process beside."""
    src, dest = os.path.join(cache_dir, rel), os.path.join(store, rel)
    if not os.path.isfile(src) or os.path.exists(dest):
        return
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _place(src, dest, link=True)
    except OSError:
        pass  # only a later precompile's head start


def _place(src: str, dest: str, link: bool) -> None:
    """`src` at `dest`, whole or not at all (a temporary name, then one rename)."""
    tmp = f"{dest}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        if link:
            os.link(src, tmp)
        else:
            shutil.copyfile(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
