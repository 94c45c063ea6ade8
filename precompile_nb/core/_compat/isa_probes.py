"""Inductor's CPU ISA probes run at once, beside the compile, instead of one after another
at its first C++ kernel (Note [ISA probes at once])."""
from __future__ import annotations

import contextlib
import platform
import sys
import threading
from collections.abc import Iterator
from typing import Any

from .scoped_patch import ScopedPatch, switched_off

# Note [ISA probes at once]
#   Before Inductor generates its first C++ kernel in a process it asks which vector ISAs
#   this CPU can use (2.11-2.15: torch._inductor.cpu_vec_isa.valid_vec_isa_list, cached for
#   the process): for each ISA the CPU's flags name (four on an AMX machine: avx512 with
#   vnni and amx_tile, avx512 with vnni, avx512, avx2) it builds a small probe library with
#   g++ and starts a Python process that loads it, one ISA after another: 8.1 s of a cold CPU
#   precompile on a 2-core machine, where the g++ runs leave the second core idle. A first
#   C++ compile of a process (precompile's is: its compile dir is private) pays it whole.
#   Here, when Inductor starts on a CPU graph whose process has not probed yet, each ISA's
#   probe starts on a thread of its own (g++ and the loading child release the GIL), while
#   this thread traces and lowers the graph; valid_vec_isa_list, when Inductor first asks,
#   waits for them and then finds every answer in each ISA's own cache (VecISA.__bool__).
#   The answers are those of the one-by-one probes: the same code, flags and files, in the
#   same compile dir; only the order in time differs. The probes are always waited for
#   before the compile dir goes (a probe whose dir vanished would answer False for the rest
#   of the process). PRECOMPILE_NB_ISA_AT_ONCE=0 turns it off (benchmarks compare the two).


def _isa() -> Any:
    from torch._inductor import cpu_vec_isa

    return cpu_vec_isa


_local = threading.local()  # .pending: the probe threads this thread started


def _waiting_first(original: Any, patch: ScopedPatch) -> Any:
    def valid_vec_isa_list() -> Any:
        pending = getattr(_local, "pending", None) if patch.on() else None
        for t in pending or ():
            t.join()
        return original()

    for name in ("cache_info", "cache_clear"):  # a functools.cache, as torch's is
        if hasattr(original, name):
            setattr(valid_vec_isa_list, name, getattr(original, name))
    return valid_vec_isa_list


_PATCH = ScopedPatch(lambda: getattr(_isa(), "valid_vec_isa_list", None),
                     lambda f: setattr(_isa(), "valid_vec_isa_list", f), _waiting_first)


def _to_probe() -> list[Any]:
    """The ISAs valid_vec_isa_list would probe, in its order; none where this process has
    already probed, the CPU is not x86 Linux, or this torch lacks what the list is made of."""
    m = _isa()
    listed = getattr(m, "valid_vec_isa_list", None)
    info = getattr(listed, "cache_info", None)
    if (info is None or info().currsize or sys.platform != "linux"
            or platform.machine() not in ("x86_64", "AMD64")
            or not hasattr(m, "x86_isa_checker") or not hasattr(m, "supported_vec_isa_list")):
        return []
    flags = m.x86_isa_checker()
    return [isa for isa in m.supported_vec_isa_list
            if all(flag in flags for flag in str(isa).split())]


def _probe(isa: Any) -> None:
    try:
        bool(isa)  # builds and loads the probe; VecISA caches the answer
    except Exception:  # noqa: BLE001 - valid_vec_isa_list asks again, one by one
        pass


@contextlib.contextmanager
def isa_probes_at_once(cpu: bool) -> Iterator[None]:
    """While Inductor compiles a graph (`cpu`: one with C++ kernels): Note [ISA probes at
    once]. Waits for every probe it started before leaving."""
    todo = _to_probe() if cpu and not switched_off("PRECOMPILE_NB_ISA_AT_ONCE") else []
    if not todo:
        yield
        return
    threads = [threading.Thread(target=_probe, args=(isa,), daemon=True,
                                name=f"precompile_nb ISA probe {isa}") for isa in todo]
    for t in threads:
        t.start()
    before, _local.pending = getattr(_local, "pending", None), threads
    try:
        with _PATCH.active():
            yield
    finally:
        _local.pending = before
        for t in threads:
            t.join()
