"""make_fx's stack traces without reading every frame's source line, while precompile traces
(Note [stack lines read when kept])."""
from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from .scoped_patch import ScopedPatch, switched_off

# Note [stack lines read when kept]
#   make_fx records on each graph node the user's lines that made it (node.meta["stack_trace"],
#   2.11-2.15: TracerBase.create_node with record_stack_traces): it captures the whole Python
#   stack (torch.fx.proxy's CapturedTraceback.extract().summary()), then keeps the frames named
#   `forward` or anchored and formats those. Its summary builds each frame's FrameSummary with
#   the frame's source line, read through linecache, for all 50-100 frames of a Hugging Face
#   model's stack, on every node: t5's training step (2,242 nodes) read 116,000 lines to keep
#   a few per node. Here, while precompile traces, the stack is walked in Python and each
#   FrameSummary is built without its line; the line of a kept frame is read when the trace is
#   formatted (FrameSummary reads it on first use), and for make_fx's tracer, which keeps only
#   `forward` and anchored frames, only those are built, by torch's own test (the filter then
#   finds nothing to drop). Same frames, same line numbers, same text:
#   the output is torch's own, so the replacement serves any thread, including autograd's
#   device threads that run a traced backward. Capture of the zoo's training steps on the
#   development machine (benchmarks/before_lowering.py, medians of 5): t5 3.11 -> 2.59 s, bert
#   0.84 -> 0.72 s, llama 0.71 -> 0.57 s, gpt2 0.85 -> 0.67 s (benchmarks/results/cpu_round15).
#   PRECOMPILE_NB_LAZY_STACK_LINES=0 turns it off.


class _Walked:
    """A captured stack, innermost frame first: (file, line, function) per frame."""

    __slots__ = ("frames",)

    def __init__(self, frames: list[tuple[str, int | None, str]]) -> None:
        self.frames = frames

    def summary(self) -> traceback.StackSummary:
        """Outermost frame first, as torch's own summary; lines not read yet."""
        out = traceback.StackSummary()
        out.extend(traceback.FrameSummary(file, line, name, lookup_line=False)
                   for file, line, name in reversed(self.frames))
        return out


def _walking(original: Any, patch: ScopedPatch) -> Any:
    class Walking(original):  # type: ignore[misc, valid-type]
        @staticmethod
        def extract(*, script: bool = False, cpp: bool = False, skip: int = 0) -> Any:
            if script or cpp:
                return original.extract(script=script, cpp=cpp, skip=skip)
            f = sys._getframe(1 + skip)  # as torch's: the caller of extract first
            keep = _forward_only(f.f_locals.get("self")) if skip == 0 else None
            frames = []
            while f is not None:
                code = f.f_code
                if keep is None or keep(code):
                    frames.append((code.co_filename, f.f_lineno, code.co_name))
                f = f.f_back
            return _Walked(frames)

    return Walking


def _forward_only(tracer: Any) -> Any:
    """For a tracer that keeps only `forward` and anchored frames (make_fx's, 2.11-2.15:
    _record_forward_stack_traces_only, filtered in TracerBase._filter_traceback_frames by
    this same test), the test on a frame's code; None for any other caller (all frames)."""
    anchors = getattr(_proxy(), "_STACK_TRACE_ANCHORS", None)
    if not getattr(tracer, "_record_forward_stack_traces_only", False) or \
            not isinstance(anchors, set):
        return None
    return lambda code: (code.co_name == "forward"
                         or code.co_filename.endswith("torch/__init__.py")
                         or (code.co_filename, code.co_name) in anchors)


def _proxy() -> Any:
    import torch.fx.proxy as proxy

    return proxy


_PATCH = ScopedPatch(lambda: getattr(_proxy(), "CapturedTraceback", None),
                     lambda cls: setattr(_proxy(), "CapturedTraceback", cls), _walking)


@contextlib.contextmanager
def stack_lines_read_when_kept() -> Iterator[None]:
    """Inside: make_fx's node stack traces read only the kept frames' lines (Note [stack
    lines read when kept]); PRECOMPILE_NB_LAZY_STACK_LINES=0 leaves torch's own."""
    if switched_off("PRECOMPILE_NB_LAZY_STACK_LINES"):
        yield
        return
    with _PATCH.active():
        yield
