"""The cyclic garbage collector paused while precompile_nb allocates in a burst: a build
(capture and lowering), a load, and the import of the package's core that a first
`from precompile_nb import precompile` does. Standard library only, so that the package's own
import can be paused before the core it imports exists."""
from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Iterator

OFF_WORDS = ("0", "false", "off", "no")  # what turns a PRECOMPILE_NB_ switch off


def switched_off(name: str) -> bool:
    """Whether the environment variable `name` turns a behaviour off: 0, false, off or no, in
    any case and with spaces around; unset or anything else leaves it on. (Here, not in
    core/_compat/scoped_patch.py, which re-exports it: the core's import reads it paused.)"""
    return os.environ.get(name, "1").strip().lower() in OFF_WORDS


# Note [the collector pauses for a build]
#   Python's cyclic garbage collector runs every few hundred allocations, and the full
#   collections among those runs walk every live object of the process: torch, transformers,
#   the user's model, and the compiler's own graphs and sympy expressions. A cold compile
#   allocates millions of objects, so on the H200 host 740-970 collections took 0.7-1.5 s of
#   each zoo training step's precompile (benchmarks/results/h200_round17, the json's `gc`),
#   6-9% of it (torch.compile's: 1.1-1.4 s). So capture and lowering run with automatic
#   collection paused, as torch.distributed.checkpoint pauses it around a state dict, and one
#   collection of the youngest generation at the end frees what the compile left in cycles
#   (counted in the precompile, not left to the user's next step). The peak memory this costs
#   is measured beside the time (benchmarks/cold_split.py's `rss_peak_mb`, tool `nb+gcon`).
#   Nested or concurrent builds pause it once; it is restored as the first one found it: a
#   collector the user switched off stays off. PRECOMPILE_NB_GC_PAUSE=0 (or off, false, no)
#   leaves it alone.
#
#   A warm load and the import before it are small (a few thousand objects each) but were
#   not harmless: every few hundred of those allocations ran a young collection, each one
#   moving the older generations' counters on, and in a process whose counters stood near
#   the threshold (one that imported timm, the zoo's GPU runs found) one of those runs became
#   a full collection of the whole process, 170-250 ms of warm starts of 0.46-0.59 s
#   (benchmarks/results/h100_round32; eager's first call, which allocates little, had none).
#   Paused, the load's young objects are examined once, at its end, and the older counters
#   move by one step at most.
_PAUSE = {"depth": 0, "was_enabled": False}
_PAUSE_LOCK = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Inside: no automatic garbage collection (Note [the collector pauses for a build])."""
    if switched_off("PRECOMPILE_NB_GC_PAUSE"):
        yield
        return
    with _PAUSE_LOCK:
        if _PAUSE["depth"] == 0:
            _PAUSE["was_enabled"] = gc.isenabled()
            gc.disable()
        _PAUSE["depth"] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSE["depth"] -= 1
            last = _PAUSE["depth"] == 0 and _PAUSE["was_enabled"]
            if last:
                gc.enable()
        if last:
            gc.collect(0)
