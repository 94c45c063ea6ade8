"""The file-pair shape of the API (what torch 2.15's `torch.compiler.precompile` offers), beside
the seed's `precompile(fn, *inputs) -> (python_code, cache)` / `precompile.load(code, cache)`:

    from precompile_nb import precompile
    with precompile.capture(step, artifact_path="step.py", cache_path="step.cache") as cap:
        loss = cap(model, x)              # the one call: traced, compiled, run on these inputs
    # the block exited cleanly: step.py and step.cache now hold the pair
    with precompile.load("step.py", "step.cache") as f:
        loss = f(model, x)

How `load` tells its two shapes apart (Note [load of files or of text]): python_code is always
many lines (it opens with its header comment), a path never holds a newline. An `os.PathLike`
is the artifact's path; so is a `str` without a newline whose partner is a path too (or that
names an existing file); its partner is the cache's path (or None). Any other `str` is
python_code, and its partner is the cache's bytes (or None). A mix (python_code with a cache
path, an artifact path with cache bytes) is a PrecompileError that says which shape to use.

A capture takes exactly one call (a make_fx trace records one execution), runs the freshly
loaded artifact on that call's real inputs and returns its result, and writes the pair when its
block exits cleanly; a block that raised writes nothing. Both files are written to temporary
files beside their targets first, then moved into place, the cache (the commit record: its tag
names the python_code it belongs to) first; a failure before the moves, or of the second move
(the previous cache is put back), keeps the previous pair whole, and a pair torn by a crash
between the two moves is refused by load's code_hash check (invariant 7).
In one directory as NAME.py + NAME.cache the pair goes through save_pair, which also completes a
torn save (see store.py).
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core import build
from ..core import cache as _cache
from ..core.errors import PrecompileError, option_error
from ..core.load import load as load_text

__all__ = ["MakeFxTracer", "Capture", "PrecompiledRunnable", "capture", "load"]

PathLike = str | os.PathLike


class MakeFxTracer:
    """The make_fx front end (the only tracer): one non-strict trace of one call of fn.
    `decompositions` is handed to make_fx. Immutable, equal by its decompositions. (Written
    out rather than a dataclass: making one costs ~0.7 ms, and every load imports this
    module.)"""

    __slots__ = ("decompositions",)

    def __init__(self, decompositions: dict | None = None) -> None:
        object.__setattr__(self, "decompositions", decompositions)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"MakeFxTracer is immutable: cannot assign {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"MakeFxTracer is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not MakeFxTracer:
            return NotImplemented
        return self.decompositions == other.decompositions  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((MakeFxTracer, self.decompositions))  # a dict: TypeError, as a dataclass

    def __repr__(self) -> str:
        return f"MakeFxTracer(decompositions={self.decompositions!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle
        return MakeFxTracer, (self.decompositions,)


def _fail(msg: str, *, where: str, expected: str, actual: str, hint: str,
          stage: str = "capture") -> PrecompileError:
    return PrecompileError(msg, invariant=None, stage=stage, where=where, expected=expected,
                           actual=actual, hint=hint)


class Capture:
    """`with capture(fn, artifact_path=..., cache_path=...) as cap: out = cap(*args)`: see the
    module docstring. Single use: a spent capture cannot be entered again."""

    def __init__(self, fn: Callable, artifact_path: PathLike, cache_path: PathLike, *,
                 backend: str, decompositions: dict | None) -> None:
        self._fn, self._backend, self._decompositions = fn, backend, decompositions
        self._paths = (Path(artifact_path), Path(cache_path))
        self._state = "new"  # new -> open -> spent
        self._pair: tuple[str, bytes] | None = None
        self.artifact = None  # the Artifact of the call (for report_data and the viewers)

    def __enter__(self) -> Capture:
        if self._state != "new":
            raise _fail("this capture was already used", where="capture(...)",
                        expected="a fresh capture per `with` block", actual=self._state,
                        hint="call precompile.capture(...) again for a new capture")
        self._state = "open"
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        was_open, self._state = self._state == "open", "spent"
        if exc_type is not None or not was_open:
            return  # a block that raised writes nothing
        self._write()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._state != "open":
            raise _fail("the capture is called outside its `with` block",
                        where="cap(...)", expected="a call inside `with capture(...) as cap:`",
                        actual=self._state, hint="call it inside the block")
        if self._pair is not None:
            raise _fail("a capture takes exactly one call", where="cap(...), second call",
                        expected="one call (a make_fx trace records one execution)",
                        actual="a second call", hint="call the loaded artifact for further "
                        "calls (precompile.load(artifact_path, cache_path)), or capture again")
        if kwargs:
            raise _fail("the captured call takes positional arguments only",
                        where=f"cap(..., {', '.join(kwargs)}=...)",
                        expected="positional arguments", actual=f"keywords {sorted(kwargs)}",
                        hint="pass them positionally, in fn's order")
        art = build(self._fn, *args, backend=self._backend,
                    decompositions=self._decompositions)
        self.artifact, self._pair = art, (art.python_code, art.cache)
        return load_text(art.python_code, art.cache)(*args)

    def save(self) -> None:
        """Write the captured pair now (the block's clean exit writes the same files)."""
        if self._state != "open":
            raise _fail("save() outside the capture's `with` block", where="cap.save()",
                        expected="inside the block", actual=self._state,
                        hint="call save() inside `with capture(...) as cap:`")
        self._write()

    def _write(self) -> None:
        if self._pair is None:
            raise _fail("nothing was captured: the block made no call", where="capture(...)",
                        expected="one call of the capture inside the block",
                        actual="no call", hint="call cap(*example_inputs) inside the block")
        write_pair(*self._paths, *self._pair)


def write_pair(artifact_path: Path, cache_path: Path, python_code: str, cache: bytes) -> None:
    """The pair into two files, the cache first (the module docstring says why)."""
    name = artifact_path.name[:-3] if artifact_path.name.endswith(".py") else None
    if name and cache_path == artifact_path.with_name(f"{name}.cache"):
        from .store import save_pair  # a load from a string imports no store

        save_pair(artifact_path.parent, name, python_code, cache)
        return
    temps = []
    try:
        for path, data in ((cache_path, bytes(cache)), (artifact_path, python_code.encode())):
            path.parent.mkdir(parents=True, exist_ok=True)
            temps.append(_cache.write_temp(path.parent, f".{path.name}.", data, fsync=True))
        previous = _cache.write_temp(cache_path.parent, f".{cache_path.name}.old.",
                                     cache_path.read_bytes()) if cache_path.exists() else None
        os.replace(temps[0], cache_path)  # the commit point
        try:
            os.replace(temps[1], artifact_path)
        except OSError:  # the previous pair back whole: its cache again beside its code
            if previous is not None:
                os.replace(previous, cache_path)
                previous = None
            raise
        finally:
            if previous is not None:
                os.unlink(previous)
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def capture(fn: Callable, /, *, artifact_path: PathLike, cache_path: PathLike,
            tracer: str | MakeFxTracer = "make_fx", backend: str = "inductor") -> Capture:
    """A one-call capture of `fn` that writes its pair to `artifact_path` and `cache_path`.

    >>> import torch, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with capture(lambda x: x * 2, artifact_path=os.path.join(d, "f.py"),
    ...              cache_path=os.path.join(d, "f.cache"), backend="eager") as cap:
    ...     y = cap(torch.ones(2))  # doctest: +SKIP
    """
    if tracer == "make_fx":
        tracer = MakeFxTracer()
    if not isinstance(tracer, MakeFxTracer):
        raise option_error("capture", "tracer", tracer, "'make_fx' or MakeFxTracer()",
                           "use tracer='make_fx' (the default)",
                           what=f"capture: unknown tracer {tracer!r}")
    return Capture(fn, artifact_path, cache_path, backend=backend,
                   decompositions=tracer.decompositions)


class PrecompiledRunnable:
    """A pair loaded from files: call it like fn; `with` it, or unload() it, to let it go."""

    installed = False  # it installs nothing into other code: unload only lets it go

    def __init__(self, fn: Callable[..., Any], artifact_path: Path) -> None:
        self._fn: Callable[..., Any] | None = fn
        self.artifact_path = artifact_path
        self.__precompile_load__ = getattr(fn, "__precompile_load__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._fn is None:
            raise _fail("this loaded artifact was unloaded", where=str(self.artifact_path),
                        expected="a loaded artifact", actual="unloaded", stage="call",
                        hint="load it again: precompile.load(artifact_path, cache_path)")
        return self._fn(*args, **kwargs)

    def __enter__(self) -> PrecompiledRunnable:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unload()

    def unload(self) -> None:
        """Drop the loaded module (its kernels go with the last reference to it)."""
        self._fn = None


def load(artifact: Any, cache: Any = None) -> Any:
    """precompile.load in both shapes (Note [load of files or of text] in the module
    docstring): (python_code, cache bytes) -> the callable; (artifact path, cache path) -> a
    PrecompiledRunnable."""
    if isinstance(artifact, str) and not _names_a_file(artifact, cache):
        if isinstance(cache, os.PathLike) or (isinstance(cache, str) and os.path.isfile(cache)):
            raise _wrong_mix("python_code text with a cache path", str(cache))
        return load_text(artifact, cache)  # load's own checks say a cache must be bytes
    if not isinstance(artifact, (str, os.PathLike)):
        return load_text(artifact, cache)  # load's own checks name what python_code must be
    if cache is not None and not isinstance(cache, (str, os.PathLike)):
        raise _wrong_mix("an artifact path with cache bytes", str(artifact))
    return _load_files(Path(artifact), None if cache is None else Path(cache))


def _names_a_file(artifact: str, cache: Any) -> bool:
    """A str is the artifact's path when it has no newline and either its partner is a path
    too or a file of that name exists; anything else is python_code text."""
    if "\n" in artifact or not artifact:
        return False
    return isinstance(cache, (str, os.PathLike)) or os.path.isfile(artifact)


def _load_files(artifact_path: Path, cache_path: Path | None) -> PrecompiledRunnable:
    if not artifact_path.is_file():
        raise _fail("no artifact file at this path", where=str(artifact_path), stage="load",
                    expected="the python_code file a capture (or save_pair) wrote",
                    actual="missing", hint="check the path; to load python_code held in a "
                    "string, pass the string itself (it has many lines)")
    name = artifact_path.name[:-3] if artifact_path.name.endswith(".py") else None
    if name and cache_path == artifact_path.with_name(f"{name}.cache"):
        from .store import load_pair  # a load from a string imports no store

        return PrecompiledRunnable(load_pair(artifact_path.parent, name), artifact_path)
    code = artifact_path.read_text(encoding="utf-8")
    data = cache_path.read_bytes() if cache_path is not None and cache_path.exists() else None
    return PrecompiledRunnable(load_text(code, data), artifact_path)


def _wrong_mix(actual: str, where: str) -> PrecompileError:
    return _fail("precompile.load was given one shape's artifact and the other's cache",
                 where=where, stage="load", actual=actual,
                 expected="(python_code, cache bytes or None), or (artifact path, cache path "
                          "or None)",
                 hint="pass python_code with the cache bytes precompile returned, or both "
                      "file paths a capture wrote")
