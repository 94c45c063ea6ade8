"""Which plain Python attributes of the models fn reads while it is traced (`self.scale`, a
Dropout's `p`, a submodule's `training`): the values the traced program is specialised to
(Note [module attributes read] in runtime/driver.py). nn.Module defines no __getattribute__
(2.11-2.15), so one is put on it while some thread records, through ScopedPatch: other threads
read attributes as before (one test of a thread-local flag more)."""
from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Container, Iterator
from typing import Any

import torch

from .scoped_patch import ScopedPatch

_SCALARS = (bool, int, float, str, type(None))
# nn.Module's own bookkeeping (hooks, dicts, flags __call__ reads): not the model's settings;
# `training` stays, a submodule's mode decides its Dropout and BatchNorm
_OWN = frozenset(vars(torch.nn.Module())) - {"training"}
_MISSING = object()
_RECORDING = threading.local()


def _kept(v: Any) -> bool:
    """A value the artifact bakes and checks: a finite scalar, or a tuple of them."""
    if type(v) is tuple:
        return all(type(x) in _SCALARS and _finite(x) for x in v)
    return type(v) in _SCALARS and _finite(v)


def _finite(v: Any) -> bool:
    return type(v) is not float or math.isfinite(v)


def _get() -> Any:
    return torch.nn.Module.__dict__.get("__getattribute__", object.__getattribute__)


def _put(f: Any) -> None:
    if f is object.__getattribute__:
        del torch.nn.Module.__getattribute__
    else:
        torch.nn.Module.__getattribute__ = f


def _recording(original: Any, patch: ScopedPatch) -> Any:
    def __getattribute__(self: Any, name: str) -> Any:
        v = original(self, name)
        rec = getattr(_RECORDING, "rec", None)
        if rec is not None and id(self) in rec[0] and name not in _OWN and _kept(v):
            if original(self, "__dict__").get(name, _MISSING) is v:
                rec[1].setdefault((id(self), name), v)
        return v
    return __getattribute__


_PATCH = ScopedPatch(_get, _put, _recording)


@contextlib.contextmanager
def attribute_reads(watched: Container[int], reads: dict[tuple[int, str], Any]
                    ) -> Iterator[None]:
    """While this thread runs the block, `reads` gets {(id(module), name): value} for each
    attribute of a module whose id is in `watched` that the block reads from the module's own
    __dict__ with a kept value (its first read)."""
    saved = getattr(_RECORDING, "rec", None)
    _RECORDING.rec = (watched, reads)
    try:
        with _PATCH.active():
            yield
    finally:
        _RECORDING.rec = saved
