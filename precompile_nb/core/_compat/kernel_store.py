"""torch internals of reusing C++ kernels built by earlier precompiles (Note [C++ kernels built
once]): Inductor's C++ build step (cpp_builder.CppBuilder.build, which its callers skip where
the target exists) and its kernels' compiler version (cpp_builder.get_compiler_version_info).
Checked on 2.13 and 2.15; 2.14.1 has the same names.
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

from .inductor import inductor_cache_dir
from .scoped_patch import switched_off

# Note [C++ kernels built once]
#   precompile compiles in a fresh, private cache dir (private_compile_cache), so that exactly
#   its own binaries land in the artifact. That also threw away every C++ kernel the machine
#   had built before: precompiling again after a small change to fn, or in a new process,
#   rebuilt every kernel, where torch.compile finds the unchanged ones in its cache dir. Now
#   each C++ build product (a kernel's object files and library, the ISA probes' libraries
#   and, torch >= 2.14, their loaded markers) is also kept in a store beside Inductor's own
#   cache (<its cache dir>/precompile_nb_kernels/<torch and compiler version>) under its
#   path relative to the private dir, and a later precompile that would build that target
#   copies the kept one in place instead of running the compiler. The path holds the
#   kernel's key, a hash of its source and of its compile command (flags, ISA), so a kept
#   file is only found by the build it came from; the store's name adds the torch build and
#   the compiler's version. Only precompile keeps and reuses (a load builds what it built
#   before). Triton kernels have a store of their own (Note [Triton kernels compiled once]).
#   A store under a TORCHINDUCTOR_CACHE_DIR is emptied with it, so "empty compiler caches"
#   still means cold. PRECOMPILE_NB_KERNEL_REUSE=0 (or off, false, no) turns it off.

def kernel_store_dir() -> str | None:
    """Where C++ build products are kept for this torch and compiler (Note [C++ kernels built
    once]), or None where reuse is off or the compiler's version cannot be read. Call it
    outside private_compile_cache (it names Inductor's own cache dir)."""
    if switched_off("PRECOMPILE_NB_KERNEL_REUSE"):
        return None
    try:
        from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler

        compiler = get_cpp_compiler()
        identity = "\n".join((torch.__version__, str(torch.version.git_version), compiler,
                              str(get_compiler_version_info(compiler))))
    except Exception:  # noqa: BLE001 - no store: every kernel is built, as before
        return None
    tag = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return os.path.join(inductor_cache_dir(), "precompile_nb_kernels", tag)


@contextlib.contextmanager
def reusing_built_kernels(store: str | None, cache_dir: str) -> Iterator[dict[str, int]]:
    """While inside (the private compile of `cache_dir`): a C++ build whose target is in
    `store` puts that in place instead of running the compiler, and a build that ran keeps its
    target there. Yields counts: "reused" (targets taken), "built" (compiler runs kept)."""
    from torch._inductor import cpp_builder

    counts = {"reused": 0, "built": 0}
    cls = cpp_builder.CppBuilder
    original = cls.__dict__.get("build")
    if store is None or original is None:
        yield counts
        return

    def build(self: Any, *args: Any, **kwargs: Any) -> Any:
        target = self.get_target_file_path()
        rel = _relative(target, cache_dir)
        if rel is None or os.path.exists(target):  # not a kernel of this compile (the
            return original(self, *args, **kwargs)  # precompiled header), or a rebuild
        if _fetch(store, cache_dir, rel):
            counts["reused"] += 1
            return None
        result = original(self, *args, **kwargs)
        counts["built"] += 1
        _keep(store, cache_dir, rel)
        return result

    cls.build = build  # under GLOBAL_LOCK, as the whole precompile
    try:
        yield counts
    finally:
        cls.build = original
        _keep_load_markers(store, cache_dir)


def _relative(path: str, root: str) -> str | None:
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    return None if rel.startswith(os.pardir) else rel


def _fetch(store: str, cache_dir: str, rel: str) -> bool:
    """Put a copy of the kept `rel` in place in `cache_dir`; True if there was one."""
    dest = os.path.join(cache_dir, rel)
    src = os.path.join(store, rel)
    if not os.path.isfile(src):
        return False
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _place(src, dest)
        if os.path.isfile(src + _LOADED):
            _place(src + _LOADED, dest + _LOADED)
    except OSError:
        return False
    return True


# torch >= 2.14 marks an ISA probe library that a child process loaded (`<lib>.load_ok`) and
# then does not start that child again: kept and put in place with the library
_LOADED = ".load_ok"


def _keep_load_markers(store: str, cache_dir: str) -> None:
    for root, _, names in os.walk(cache_dir):
        for name in names:
            if name.endswith(_LOADED):
                _keep(store, cache_dir, os.path.relpath(os.path.join(root, name), cache_dir))


def _keep(store: str, cache_dir: str, rel: str) -> None:
    """Keep a freshly built `rel` in the store: whole or absent, for a process beside."""
    src, dest = os.path.join(cache_dir, rel), os.path.join(store, rel)
    if not os.path.isfile(src) or os.path.exists(dest):
        return
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        _place(src, dest)
    except OSError:
        pass  # only a later precompile's head start


def _place(src: str, dest: str) -> None:
    """A copy of `src` at `dest`, whole or not at all (a temporary name, then one rename).
    A copy, not a link: nothing later done to a file in the private dir reaches the store,
    nor the other way round."""
    tmp = f"{dest}.{os.getpid()}.{threading.get_ident()}.tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
