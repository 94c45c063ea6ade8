"""PrecompileError and the invariant texts.

The error class itself lives in `runtime/violation.py` because every artifact carries a copy of
it (an artifact must raise the same structured error where precompile_nb is not installed); this
module is the package's door to it plus the capture/load-side helpers. See Note [one driver, two
homes] in emit.py.
"""
from __future__ import annotations

import inspect
import re
import reprlib
import traceback
from types import TracebackType

from ..runtime.violation import _PC_INVARIANTS as INVARIANTS
from ..runtime.violation import PrecompileError

__all__ = ["PrecompileError", "INVARIANTS", "Problems", "fn_name", "option_error",
           "positional_names", "raised_by_user", "user_frame"]

PrecompileError.__module__ = "precompile_nb"


class _OptionError(PrecompileError, ValueError, TypeError):
    """A bad option or argument type: a PrecompileError that `except ValueError` /
    `except TypeError` (what these were before) still catch."""


class _OptionNotImplemented(PrecompileError, NotImplementedError):
    """An option value that names planned, unbuilt work."""


def option_error(call: str, option: str, value: object, expected: str, hint: str, *,
                 what: str | None = None, planned: bool = False,
                 stage: str = "capture") -> PrecompileError:
    """The error for `call(..., option=value)` with a value the call does not take, raised
    before the call does anything. `what` replaces the default first line."""
    cls = _OptionNotImplemented if planned else _OptionError
    shown = _short_repr(value)
    return cls(what or f"{call}: {option}= takes {expected}, not {shown}",
               stage=stage, where=f"{call}(..., {option}=...)", expected=expected,
               actual=f"{shown} ({type(value).__name__})", hint=hint)


def _short_repr(value: object, limit: int = 60) -> str:
    """repr(value) cut to about `limit` characters, never built whole for a long str or
    bytes (a cache passed where the code goes is megabytes)."""
    if isinstance(value, (str, bytes, bytearray)):
        return repr(value[:limit]) + ("..." if len(value) > limit else "")
    if isinstance(value, memoryview):
        return f"<memoryview of {value.nbytes} bytes>"
    short = reprlib.Repr()
    short.maxother = limit
    shown = short.repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


# compiled at its first use (re's own cache): a load imports this module and never uses it
_STACK_FRAME = (
    r'File "(?P<file>[^"]+)", line (?P<line>\d+), in [^\n]*\n?(?P<code>[^\n]*)')
_NOT_USER = ("/torch/", "/precompile_nb/core/", "/precompile_nb/runtime/", "/precompile_nb/tools/",
             "/contextlib.py")


def user_frame(frames: TracebackType | str | None) -> str | None:
    """The innermost frame that is user code (not torch, not precompile_nb), as
    'file:line: source', so an error can point at the line that broke an invariant.
    `frames` is an exception's traceback, or a stack-trace text as FX records it in
    node.meta['stack_trace'].

    >>> user_frame('  File "/a/train.py", line 7, in step\\n    loss.backward()\\n')
    '/a/train.py:7: loss.backward()'
    """
    if frames is None or frames == "":
        return None
    if isinstance(frames, str):
        found = [(m["file"], m["line"], m["code"]) for m in re.finditer(_STACK_FRAME, frames)]
    else:
        found = [(fs.filename, fs.lineno, fs.line) for fs in traceback.extract_tb(frames)]
    for file, line, code in reversed(found):
        if not any(part in file.replace("\\", "/") for part in _NOT_USER):
            return f"{file}:{line}: {(code or '').strip()}"
    return None


class Problems:
    """Where capture reports invariant violations: raised at once (precompile), or all
    collected (the dry-run checker, precompile_nb.check)."""

    def __init__(self, collect: bool = False) -> None:
        self.collect = collect
        self.errors: list[PrecompileError] = []

    def add(self, err: PrecompileError) -> None:
        if not self.collect:
            raise err
        self.errors.append(err)


def fn_name(fn: object) -> str:
    """How an error names the user's fn ("fn" for a lambda)."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "fn" if name == "<lambda>" else name


def positional_names(fn: object) -> list[str] | None:
    """The names of fn's positional parameters, in order (how errors spell fn's calling
    order); None where fn has no signature to read (a builtin)."""
    try:
        params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def raised_by_user(e: BaseException) -> bool:
    """Whether `e` was raised by the user's own code (its innermost frame is neither torch's
    nor precompile_nb's): a `raise ValueError(...)` in fn, not a tracer or compiler failure."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return False
    file = frames[-1].filename.replace("\\", "/")
    return not any(part in file for part in _NOT_USER) and "/precompile_nb/" not in file
