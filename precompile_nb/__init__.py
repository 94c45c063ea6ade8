"""precompile_nb: ahead-of-time compile whole PyTorch computations, and see what the compiler
did, in Jupyter.

    from precompile_nb import precompile, PrecompileError
    python_code, cache = precompile(lambda m, x: m(x), model, x)
    f = precompile.load(python_code, cache)
    out = f(model, x)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the public names, imported lazily: viewers import without torch
    from .core import precompile
    from .core.errors import PrecompileError
    from .tools.check import check
    from .tools.files import MakeFxTracer, PrecompiledRunnable, capture
    from .tools.store import load_pair, save_pair


def __getattr__(name: str) -> Any:
    if name == "precompile":  # built once, then a plain attribute: no pause or import again
        globals()["precompile"] = value = _precompile()
        return value
    if name in ("capture", "MakeFxTracer", "PrecompiledRunnable"):
        from .tools import files

        return getattr(files, name)
    if name == "check":
        from .tools.check import check

        return check
    if name == "PrecompileError":
        from .core.errors import PrecompileError

        return PrecompileError
    if name in ("save_pair", "load_pair"):
        from .tools import store

        return getattr(store, name)
    raise AttributeError(f"module 'precompile_nb' has no attribute {name!r}")

__version__ = "0.1.0"


def _precompile() -> Any:
    """`precompile`, with torch 2.15's file-pair shape beside the seed's: precompile.capture,
    precompile.MakeFxTracer, and precompile.load of (python_code, cache) or of two paths
    (tools/files.py). The first call imports the core: a few thousand objects, allocated
    with the collector paused (Note [the collector pauses for a build] in collector.py)."""
    from .collector import collector_paused

    with collector_paused():
        from .core import precompile
        from .tools import files

    precompile.load = files.load  # type: ignore[attr-defined]
    precompile.capture = files.capture  # type: ignore[attr-defined]
    precompile.MakeFxTracer = files.MakeFxTracer  # type: ignore[attr-defined]
    precompile.PrecompiledRunnable = files.PrecompiledRunnable  # type: ignore[attr-defined]
    return precompile
__all__ = ["precompile", "PrecompileError", "check", "save_pair", "load_pair", "capture",
           "MakeFxTracer", "PrecompiledRunnable",
           "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython):  # pragma: no cover - exercised by tests/test_magics.py
    from .magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover
    from .magics import unload_ipython_extension as _unload

    _unload(ipython)
