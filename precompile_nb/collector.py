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
#
#   That one collection walks every object the build left young, and a process's first build
#   leaves it the objects of the ~1,400 modules Inductor's import brings (functions, classes,
#   their dicts: ~200-340k objects, which live as long as the process), beside the
#   capture's and lowering's own (CPU, the CNN training step: 597k young objects, 137k of them
#   garbage, 208-273 ms). So a build's start imports Inductor where the lowering will need it
#   (no earlier precompile kept a lowering it could take whole; young_made_old): it first
#   collects the young generations (the few hundred or thousand objects the user left there),
#   then imports (a CUDA build also starts Triton's set-up and the compile workers there),
#   then moves what that made to the oldest generation without walking it (gc.freeze +
#   gc.unfreeze, two list splices): the end's collection then walks 256k objects (CPU) in
#   70-160 ms and frees the same garbage less the ~2.6k objects the import left in cycles,
#   which wait for the next full collection as they would have in a process that imported
#   Inductor itself. Nor do the import's survivors pass through the middle generation, whose
#   walk, and the full collection that then follows, came inside precompile in some processes
#   (torch 2.13, paired fresh processes: the collector's time inside precompile 0.78-1.06 s ->
#   0.08-0.29 s; benchmarks/results/cpu_round40_gc/). On an H100 (torch 2.11, Python 3.12;
#   benchmarks/results/h100_round41/) the CUDA start moves ~306k objects, the end's
#   collection takes 108-115 ms instead of 218-234 ms, and the collector's seconds inside a
#   cold precompile went 0.12-0.18 -> 0.02 s (tiny MLP), 0.27-0.46 -> 0.13-0.21 s
#   (transformer training step), 0.22-0.24 -> 0.08-0.12 s (CNN training step), three
#   rounds against the tree before. Nothing the capture or the lowering allocates is moved
#   unexamined, and where the user has frozen objects of their own nothing is moved
#   (gc.unfreeze would thaw theirs too).
#
# Note [the interpreter's own frozen objects]
#   Python 3.12 starts with objects of its own in the permanent generation (3.12.1: 375
#   tuples, the bases and MROs of its static types; 3.11 and 3.13: none), so "nothing is
#   frozen" cannot be read as get_freeze_count() == 0: on the GPU host's Python 3.12 that test
#   kept young_made_old from ever running (round 40 measured the move on CUDA builds and found
#   nothing, because nothing moved; round 41's probe showed 375 frozen at the start). The count
#   this module finds at its import is taken as the interpreter's own when it is small (under
#   _OWN_FROZEN_MAX: a process that has imported torch and froze objects itself holds 10^5 or
#   more); the move runs only while the count is that one or 0, and thaws the interpreter's
#   tuples with the rest (they join the oldest generation, where a full collection walks them
#   as any other tuple; 3.12's gc.unfreeze does the same for any caller). A larger count at
#   the import is a user's freeze: the move never runs in that process.
_OWN_FROZEN_MAX = 4096
_OWN_FROZEN = gc.get_freeze_count()  # the interpreter's own frozen objects
if _OWN_FROZEN >= _OWN_FROZEN_MAX:
    _OWN_FROZEN = -1  # a user's freeze before this import: never thaw it
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


@contextlib.contextmanager
def young_made_old() -> Iterator[None]:
    """Inside a pause that ends with a collection: the young generations collected first, and
    what is allocated inside moved to the oldest generation at the end, unexamined (Note [the
    collector pauses for a build]: for imports, whose objects live as long as the process).
    Elsewhere (no pause, the pause switched off, a collector the user switched off) it does
    nothing, and where the user froze objects (gc.freeze) too: gc.unfreeze would thaw theirs
    (Note [the interpreter's own frozen objects])."""
    with _PAUSE_LOCK:
        active = (_PAUSE["depth"] > 0 and _PAUSE["was_enabled"]
                  and gc.get_freeze_count() in (0, _OWN_FROZEN))
    if active:
        gc.collect(1)
    try:
        yield
    finally:
        if active:
            gc.freeze()
            gc.unfreeze()
