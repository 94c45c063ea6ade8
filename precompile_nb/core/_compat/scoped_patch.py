"""How _compat changes torch's behaviour for precompile alone: a torch function replaced while
some thread needs it (the one way _compat patches a torch function that other threads may call
at the same time), and the environment switches that turn such a change off."""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ...collector import OFF_WORDS as _OFF
from ...collector import switched_off  # noqa: F401 - the switches' one reader, re-exported

_ON = ("1", "true", "on", "yes", "")
# every switch precompile_nb reads (docs/api.md's table lists each; a test keeps the three the
# same); PRECOMPILE_NB_PIECES takes a number, PRECOMPILE_NB_TUNE_TOGETHER seconds or off, the
# others on or off
SWITCHES = ("PRECOMPILE_NB_KERNEL_REUSE", "PRECOMPILE_NB_LOWERING_REUSE",
            "PRECOMPILE_NB_CAPTURED_RECORD",
            "PRECOMPILE_NB_TRITON_SETUP", "PRECOMPILE_NB_KERNEL_THREADS",
            "PRECOMPILE_NB_KERNEL_HANDOFF", "PRECOMPILE_NB_FORK_WORKERS",
            "PRECOMPILE_NB_END_UNREADY_SIDECAR",
            "PRECOMPILE_NB_FEWER_RUNS", "PRECOMPILE_NB_ISA_AT_ONCE",
            "PRECOMPILE_NB_LAZY_STACK_LINES", "PRECOMPILE_NB_FUNCTIONAL_COPY",
            "PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR", "PRECOMPILE_NB_GC_PAUSE",
            "PRECOMPILE_NB_CONV1X1_AS_MM", "PRECOMPILE_NB_DEPTHWISE_NCHW", "PRECOMPILE_NB_PIECES",
            "PRECOMPILE_NB_TUNE_TOGETHER", "PRECOMPILE_NB_TRAINING_LAYOUT",
            "PRECOMPILE_NB_SHORT_KERNEL_NAMES")
_PREFIX = "PRECOMPILE_NB_"


def switch_seconds(name: str, default: float) -> float:
    """The seconds the switch `name` sets: `default` unset, on or not a number (which
    switch_mistakes names), 0 for off, else the number (negative: 0)."""
    value = os.environ.get(name, "").strip().lower()
    if value in _OFF:
        return 0.0
    try:
        return max(float(value), 0.0)
    except ValueError:
        return default


def switch_mistakes(environ: Mapping[str, str]) -> list[str]:
    """What looks wrong among the switches set in `environ`: a name close to a switch's that
    no switch has (a misspelling, which would be ignored), an on/off switch set to a word that
    is neither (which leaves it on), a number of pieces that is no number. One sentence
    each."""
    import difflib

    out = []
    suffixes = [n[len(_PREFIX):] for n in SWITCHES]
    for name, value in sorted(environ.items()):
        if not name.startswith(_PREFIX):
            continue
        if name not in SWITCHES:
            close = difflib.get_close_matches(name[len(_PREFIX):], suffixes, n=1, cutoff=0.8)
            if close:
                out.append(f"{name} is not a switch precompile_nb reads, so it changes "
                           f"nothing: did you mean {_PREFIX}{close[0]}?")
        elif name == "PRECOMPILE_NB_PIECES":
            if value.strip() and not _reads_as(int, value):
                out.append(f"{name}={value!r} is not a number of pieces, so every graph is "
                           "compiled in one: set a whole number (e.g. 4), or unset it")
        elif name == "PRECOMPILE_NB_TUNE_TOGETHER":
            if value.strip().lower() not in _OFF + _ON and not _reads_as(float, value):
                out.append(f"{name}={value!r} is neither seconds nor off, so precompile waits "
                           "the default 60 s: set seconds (e.g. 120), or 0 to never wait")
        elif value.strip().lower() not in _OFF + _ON:
            out.append(f"{name}={value!r} is neither off (0, false, off, no) nor on (1, true, "
                       "on, yes), so the behaviour stays on")
    return out


def _reads_as(kind: type, text: str) -> bool:
    """Whether `kind(text)` (int, float) reads `text` without an error."""
    try:
        kind(text)
    except ValueError:
        return False
    return True


class ScopedPatch:
    """Replaces a torch function, read by `get()` and written by `put(value)`, with
    `wrap(original, patch)` while at least one thread is inside `patch.active()`, and puts the
    original back when the last one leaves; where `get()` finds none (None) it is left alone.
    The replacement must ask `patch.on()`, which is True only on a thread inside, and
    otherwise do what the original does: other threads (a user's torch.compile beside a
    precompile) see torch's own behaviour. (A replacement whose results are the original's,
    only cheaper, may serve every thread: stack_frames.py's.)"""

    def __init__(self, get: Callable[[], Any], put: Callable[[Any], None],
                 wrap: Callable[[Any, ScopedPatch], Any]) -> None:
        self._get, self._put, self._wrap = get, put, wrap
        self._lock = threading.Lock()
        self._users = 0
        self._original: Any = None
        self._local = threading.local()

    def on(self) -> bool:
        """Whether the calling thread is inside active()."""
        return getattr(self._local, "on", False)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._original = self._get()
                if self._original is not None:
                    self._put(self._wrap(self._original, self))
            self._users += 1
        before = self.on()
        self._local.on = True
        try:
            yield
        finally:
            self._local.on = before
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._original is not None:
                    self._put(self._original)
                    self._original = None
