"""Answers a few torch functions give on the thread that capture traces on, and on no other
(Note [answers for the tracing thread]): the compiler flags libraries branch on (checked on
2.11-2.15), and the swap mechanism tracing.py also uses for torch.nn's fused fast paths.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

# Note [tracing as a compiler]
#   Libraries keep a path for compilers: transformers picks its MoE experts' implementation,
#   its attention masks and its cache updates by torch.compiler.is_compiling() /
#   is_exporting(); torch.optim reads step counts without .item() under is_compiling();
#   activation checkpointing traces its recomputation under _is_non_strict_tracing(). A capture
#   is a non-strict make_fx trace, what torch.export's non-strict mode runs, so for the length
#   of the trace those functions answer what export's _compiling_state_context and
#   _non_strict_tracing_context make them answer (2.11-2.15; the non-strict one exists from
#   2.13). Export sets module globals, which every thread reads: a thread running eager code
#   beside a capture (a data loader, a second rank's loader thread, a notebook's background
#   job) would take the compiler's path too, and a precompile started there would be refused
#   as nested. So the functions themselves are swapped (Note [answers for the tracing
#   thread]) and answer True on the tracing thread only; the globals are never written.
#   Callers reach them through the module (`torch.compiler.is_compiling()`, also torch's own
#   `from torch.compiler import ...` inside functions); the one module-level import by name
#   in torch (torch._dynamo.decorators, for mark_static) keeps the real function.
_TRACING_FNS = ("is_compiling", "is_exporting", "_is_non_strict_tracing")

# Note [answers for the tracing thread]
#   While capture traces, a few torch functions answer differently (the compiler flags above,
#   torch.overrides.has_torch_function: Note [fused inference fast paths]). Each is swapped
#   for a function that gives the capture's answer on a thread marked as tracing and the real
#   function's answer on every other thread; the swap is counted under a lock, so captures
#   overlapping in threads install it once and the last one out restores the original.
_SWAPS = threading.Lock()
_swapped: dict[tuple[int, str], list[Any]] = {}  # (id(owner), name) -> [original, count]
_tracing_here = threading.local()  # marks of this thread: name -> depth


def _marked(mark: str) -> bool:
    return getattr(_tracing_here, mark, 0) > 0


@contextlib.contextmanager
def _answering_on_this_thread(owner: Any, name: str, answer: Callable[..., Any],
                              mark: str) -> Iterator[None]:
    """owner.name is `answer` while any thread is inside; this thread carries `mark`
    (Note [answers for the tracing thread]). `answer` checks _marked(mark) itself."""
    key = (id(owner), name)
    with _SWAPS:
        entry = _swapped.setdefault(key, [getattr(owner, name), 0])
        if entry[1] == 0:
            setattr(owner, name, answer)
        entry[1] += 1
    setattr(_tracing_here, mark, getattr(_tracing_here, mark, 0) + 1)
    try:
        yield
    finally:
        setattr(_tracing_here, mark, getattr(_tracing_here, mark) - 1)
        with _SWAPS:
            entry = _swapped[key]
            entry[1] -= 1
            if entry[1] == 0:
                setattr(owner, name, entry[0])
                del _swapped[key]


def _true_when_marked(real: Callable[[], bool], mark: str) -> Callable[[], bool]:
    def answer() -> bool:
        return True if _marked(mark) else real()
    answer.__name__, answer.__qualname__, answer.__doc__ = (
        real.__name__, real.__qualname__, real.__doc__)
    return answer


_REAL_TRACING_FNS = {n: getattr(torch.compiler, n) for n in _TRACING_FNS
                     if callable(getattr(torch.compiler, n, None))}
_TRACING_ANSWERS = {n: _true_when_marked(f, f"compiler_{n}")
                    for n, f in _REAL_TRACING_FNS.items()}


@contextlib.contextmanager
def _compiler_answers(names: Sequence[str]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for n in names:
            if n in _TRACING_ANSWERS:
                stack.enter_context(_answering_on_this_thread(
                    torch.compiler, n, _TRACING_ANSWERS[n], f"compiler_{n}"))
        yield


def tracing_as_a_compiler() -> contextlib.AbstractContextManager[None]:
    """torch.compiler.is_compiling(), is_exporting() and _is_non_strict_tracing() are True on
    this thread while capture traces (Note [tracing as a compiler])."""
    return _compiler_answers(_TRACING_FNS)
