"""torch internals of reusing Triton kernels compiled by earlier precompiles (Note [Triton
kernels compiled once]): Inductor's hand-over of each kernel (AsyncCompile.triton), the
compile results of the kernel it makes (CachingAutotuner.compile_results, each binary's Triton
cache key: runtime_utils.triton_hash_to_path_key(result.kernel.hash)) and Triton's cache (a dir
per key; a group file naming the dir's files by absolute path). Checked on 2.11, 2.13, 2.15;
a real kernel's compile checked on 2.15 with Triton 3.9 (tests/core/test_triton_store.py)."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

from .kernel_threads import kernels_on_threads
from .scoped_patch import ScopedPatch, switched_off
from .warm import (
    TRITON_BINARIES,
    TRITON_STAGE_TEXTS,
    light_inductor_cache_dir,
    relocate_cache_file,
    triton_binaries_only,
)

# Note [Triton kernels compiled once]
#   A CUDA precompile lowers in a private compile dir (private_compile_cache), so that exactly
#   its own binaries land in the artifact; that also made it compile every Triton kernel
#   afresh, each time: a notebook user who re-runs a cell after a small change waited for
#   every kernel again, where torch.compile finds the unchanged ones in its Triton cache. Now a
#   store beside Inductor's own cache (<its cache dir>/precompile_nb_kernels/triton-<torch and
#   Triton versions>) keeps what each kernel's compile wrote (one Triton cache dir per
#   configuration, named by Triton's key) and an index from the hash of the kernel's source to
#   those keys. While a CUDA precompile lowers, each kernel Inductor is handed is looked up by
#   its source, and the dirs the index names are copied into the private Triton cache before
#   the kernel goes on (to a worker, a thread or the compiling thread), which then finds them
#   there instead of compiling; each copied group file is pointed at its new place (Triton
#   counts a listed file that is not there as a miss). Triton's own key (a hash of the
#   kernel's source, options, target and Triton's build) still decides what is used: a copied
#   dir that no compile asked for is taken out of the private dir before the artifact is
#   packed, so an artifact holds what a compile from nothing would have put there. When the
#   lowering ends, the dirs of each kernel it compiled are kept and indexed, without the
#   compile stages' texts (Note [Triton binaries only]: about a sixth of the bytes stay).
#   Only precompile keeps and reuses; kernels Inductor compiles outside AsyncCompile.triton
#   (autotuning at precompile, a graph compiled in pieces in other processes) are compiled as
#   before.
#   A store under a TORCHINDUCTOR_CACHE_DIR is emptied with it ("empty compiler caches" still
#   means cold). PRECOMPILE_NB_KERNEL_REUSE=0 turns it off, with the C++ store.

_STATE: list[_Keeping | None] = [None]  # the lowering now keeping (one at a time: GLOBAL_LOCK)


def triton_store_dir() -> str | None:
    """Where Triton kernels are kept for this torch and Triton (Note [Triton kernels compiled
    once]), or None where reuse is off or Triton is missing. Call it outside
    private_compile_cache (it names Inductor's own cache dir)."""
    if switched_off("PRECOMPILE_NB_KERNEL_REUSE"):
        return None
    try:
        import torch
        import triton

        identity = "\n".join((torch.__version__, str(torch.version.git_version),
                              str(triton.__version__)))
        root = light_inductor_cache_dir()
    except Exception:  # noqa: BLE001 - no store: every kernel is compiled, as before
        return None
    tag = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return os.path.join(root, "precompile_nb_kernels", f"triton-{tag}")


@contextlib.contextmanager
def keeping_triton_kernels(store: str | None) -> Iterator[dict[str, int]]:
    """While inside (a CUDA lowering in private_compile_cache, which gives Triton's cache dir):
    kernels found in `store` are put in place, and on the way out those compiled are kept
    and copies no compile used are taken out. Yields counts: "triton_reused" (kernels whose
    every binary came from the store), "triton_compiled" (the others Inductor made)."""
    here = os.environ.get("TRITON_CACHE_DIR")
    counts: dict[str, int] = {}
    if store is None or not here or _STATE[0] is not None:
        yield counts
        return
    state = _Keeping(store, here)
    _STATE[0] = state
    try:
        yield counts
    finally:
        _STATE[0] = None
        counts.update(state.finish())


@contextlib.contextmanager
def triton_kernels_handed_over(gpu: bool = True) -> Iterator[None]:
    """While this thread lowers a graph (`gpu`: one with Triton kernels), Inductor's hand-over
    of each Triton kernel: looked up in the store of the lowering that keeps kernels
    (keeping_triton_kernels), then sent to a thread where the compile workers are not ready
    (kernels_on_threads, entered here first so that its wrapper is the inner one: a kernel is
    looked up before a thread compiles it)."""
    with kernels_on_threads(gpu), (_PATCH.active() if gpu and _async_compile() is not None
                                   else contextlib.nullcontext()):
        yield


class _Keeping:
    """One lowering's lookups ("placed": source hash -> keys copied in) and what its kernels'
    compiles used ("used": source hash -> keys)."""

    def __init__(self, store: str, here: str) -> None:
        self.store, self.here = store, here
        self.lock = threading.Lock()
        self.placed: dict[str, list[str]] = {}
        self.used: dict[str, list[str]] = {}

    def fetch(self, source_code: str) -> str:
        sha = hashlib.sha256(source_code.encode()).hexdigest()
        with self.lock:
            if sha in self.placed:
                return sha
            self.placed[sha] = [k for k in _index(self.store, sha)
                                if _copy_dir(os.path.join(self.store, k),
                                             os.path.join(self.here, k))]
        return sha

    def record(self, sha: str, kernel: Any) -> None:
        try:
            from torch._inductor.runtime.runtime_utils import triton_hash_to_path_key

            keys = [triton_hash_to_path_key(r.kernel.hash) for r in kernel.compile_results]
        except Exception:  # noqa: BLE001 - not kept, and its copies stay: as before
            return
        if keys:
            with self.lock:
                self.used[sha] = keys

    def finish(self) -> dict[str, int]:
        with self.lock:
            placed, used = dict(self.placed), dict(self.used)
        counts = {"triton_reused": 0, "triton_compiled": 0}
        for sha, keys in used.items():
            whole = set(keys) <= set(placed.get(sha, ()))
            counts["triton_reused" if whole else "triton_compiled"] += 1
            if not whole and all(os.path.isdir(os.path.join(self.here, k)) for k in keys):
                for k in keys:
                    _copy_dir(os.path.join(self.here, k), os.path.join(self.store, k),
                              binaries_only=True)
                _write_index(self.store, sha, keys)
        in_use = {k for keys in used.values() for k in keys}
        unknown = {k for sha, keys in placed.items() if sha not in used for k in keys}
        for sha in used:  # a copy no compile asked for is not part of this artifact
            for k in set(placed.get(sha, ())) - in_use - unknown:
                shutil.rmtree(os.path.join(self.here, k), ignore_errors=True)
        return {k: v for k, v in counts.items() if v}


def _index(store: str, sha: str) -> list[str]:
    try:
        with open(_index_path(store, sha)) as f:
            keys = json.load(f)["keys"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [k for k in keys if isinstance(k, str) and k and os.sep not in k and k[0] != "."]


def _index_path(store: str, sha: str) -> str:
    return os.path.join(store, "sources", sha[:2], f"{sha}.json")


def _write_index(store: str, sha: str, keys: list[str]) -> None:
    path = _index_path(store, sha)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"keys": keys}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # only a later precompile's head start


def _copy_dir(src: str, dest: str, binaries_only: bool = False) -> bool:
    """A copy of the Triton cache dir `src` at `dest` (absent there), whole or not at all,
    its group files naming the files at `dest`; True if this made it. `binaries_only`: without
    the compile stages' texts that no later compile reads (Note [Triton binaries only])."""
    if not os.path.isdir(src) or os.path.lexists(dest):
        return False
    tmp = f"{dest}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        names = os.listdir(src)
        files = [("triton", f"k/{name}", b"" if binaries_only and _dropped(name, names)
                  else _read(os.path.join(src, name))) for name in names]
        os.makedirs(tmp)
        for _, rel, data in triton_binaries_only(files) if binaries_only else files:
            name = rel[2:]
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(relocate_cache_file("triton", name, data, os.path.join(dest, name)))
        os.rename(tmp, dest)  # fails where a compile made `dest` meanwhile: that one stays
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True


def _dropped(name: str, names: list[str]) -> bool:
    """Whether triton_binaries_only drops `name` from a dir of `names` (not read, then)."""
    return (name.rsplit(".", 1)[-1] in TRITON_STAGE_TEXTS
            and any(n.rsplit(".", 1)[-1] in TRITON_BINARIES for n in names))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _async_compile() -> Any:
    try:
        import torch._inductor.async_compile as ac
    except ImportError:
        return None
    return ac if all(hasattr(ac, n) for n in ("AsyncCompile", "LambdaFuture", "CodeCacheFuture")
                      ) else None


def _looked_up(inline: Any, patch: ScopedPatch) -> Any:
    ac = _async_compile()

    @functools.wraps(inline)
    def triton(self: Any, kernel_name: str, source_code: str, device_str: str = "cuda"):
        state = _STATE[0] if patch.on() else None
        if state is None or device_str != "cuda":
            return inline(self, kernel_name, source_code, device_str)
        sha = state.fetch(source_code)
        out = inline(self, kernel_name, source_code, device_str)
        if not isinstance(out, ac.CodeCacheFuture):
            state.record(sha, out)
            return out

        def result() -> Any:
            kernel = out.result()
            state.record(sha, kernel)
            return kernel

        return ac.LambdaFuture(result, future=getattr(out, "future", None))

    return triton


_PATCH = ScopedPatch(lambda: _async_compile().AsyncCompile.triton,
                     lambda f: setattr(_async_compile().AsyncCompile, "triton", f),
                     _looked_up)
