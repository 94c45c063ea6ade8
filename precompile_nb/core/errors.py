"""PrecompileError and the invariant texts.

The error class itself lives in `_driver.py` because every artifact carries a copy of it (an
artifact must raise the same structured error where precompile_nb is not installed); this module
is the package's door to it plus the capture/load-side helpers. See Note [one driver, two homes]
in emit.py.
"""
from __future__ import annotations

import traceback

from ._driver import _PC_INVARIANTS as INVARIANTS
from ._driver import PrecompileError

__all__ = ["PrecompileError", "INVARIANTS", "user_frame"]

PrecompileError.__module__ = "precompile_nb"


def user_frame(tb) -> str | None:
    """The innermost traceback frame that is user code (not torch, not precompile_nb), as
    'file:line: source', so an error can point at the line that broke an invariant."""
    best = None
    for fs in traceback.extract_tb(tb):
        f = fs.filename.replace("\\", "/")
        if "/torch/" in f or "/precompile_nb/core/" in f or "/contextlib.py" in f:
            continue
        best = fs
    if best is None:
        return None
    return f"{best.filename}:{best.lineno}: {(best.line or '').strip()}"
