"""Inductor's CPU ISA probes run at once instead of one after another, at its first C++
kernel (Note [ISA probes at once])."""
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
#   Here, when Inductor first asks on a thread compiling a CPU graph, each ISA's probe runs
#   on a thread of its own (g++ and the loading child release the GIL), all at once, and
#   valid_vec_isa_list then finds every answer in each ISA's own cache (VecISA.__bool__):
#   4.6-4.8 s instead of 8.1-8.4 on that machine. The answers are those of the one-by-one
#   probes: the same code, flags and files, in the same compile dir, all done before the
#   question returns. A graph that makes no C++ kernel never asks, and probes nothing, as
#   before. (Starting the probes with the compile instead overlapped them with the trace too,
#   but made such a graph wait for probes it never needed: a lone nn.Linear 1.8 -> 5.9 s.)
#   PRECOMPILE_NB_ISA_AT_ONCE=0 turns it off (benchmarks compare the two).


def _isa() -> Any:
    from torch._inductor import cpu_vec_isa

    return cpu_vec_isa


def _at_once_first(original: Any, patch: ScopedPatch) -> Any:
    def valid_vec_isa_list() -> Any:
        if patch.on():
            threads = [threading.Thread(target=_probe, args=(isa,), daemon=True,
                                        name=f"precompile_nb ISA probe {isa}")
                       for isa in _to_probe(original)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        return original()

    for name in ("cache_info", "cache_clear"):  # a functools.cache, as torch's is
        if hasattr(original, name):
            setattr(valid_vec_isa_list, name, getattr(original, name))
    return valid_vec_isa_list


_PATCH = ScopedPatch(lambda: getattr(_isa(), "valid_vec_isa_list", None),
                     lambda f: setattr(_isa(), "valid_vec_isa_list", f), _at_once_first)


def _to_probe(listed: Any) -> list[Any]:
    """The ISAs `listed` (torch's valid_vec_isa_list) would probe, in its order; none where
    it has answered already, the CPU is not x86 Linux, or this torch lacks what the list is
    made of."""
    m = _isa()
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
    """While this thread compiles a graph (`cpu`: one whose kernels would be C++): Note [ISA
    probes at once]."""
    if not cpu or switched_off("PRECOMPILE_NB_ISA_AT_ONCE"):
        yield
        return
    with _PATCH.active():
        yield
