"""The cyclic collector's pauses inside a timed window (the zoo's and the suite's one-shot
measurements). Imports only the standard library: measure.py runs under torch 2.14.1's venv
too."""
from __future__ import annotations

import gc
import time


class GcClock:
    """The cyclic collector's pauses while open, seconds by generation (gc.callbacks). A
    full collection walks every object of the process (a timm model's process on the CPU:
    ~350k objects, 115-145 ms), and which timed window it lands in is chance: a warm start's
    or eager's first call alike. Round 31 saw 170-230 ms jumps in single stages of three
    warm starts (`import` of timm_deit and timm_swin, timm_vit's cache read), not measured
    then."""

    def __init__(self) -> None:
        self.s: dict[str, float] = {}
        self._t: float | None = None

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        elif self._t is not None:
            g = str(info["generation"])
            self.s[g] = self.s.get(g, 0.0) + time.perf_counter() - self._t
            self._t = None
