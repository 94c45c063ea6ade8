"""Capture, leaving the world as it found it: the models' Python state around every trace.

A model may keep state in plain attributes during forward: a cache dict of rotary tables or
masks (`self._cache[key] = t`), a lazily built tensor (`self._cos = ...`), a counter. Under
make_fx those writes store FakeTensors and proxies: left there, the user's next eager call reads
a FakeTensor, and the next trace (capture traces again under each guard, Note [guards from the
example]) reads a tensor of the previous trace as if it were live data. So each module's
attributes, and the contents of the dicts, lists and sets it holds, are restored after every
trace, whatever it raised; what the trace computed stays computed inside the graph.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ...runtime.convention import ModuleArg, ModuleAttr, same_value

_CONTAINERS = (dict, list, set)
_MISSING = object()


def _contents(v: Any) -> Any:
    return list(v) if isinstance(v, (list, set)) else dict(v)


def _put_back(v: Any, saved: Any) -> None:
    if isinstance(v, list):
        v[:] = saved
    else:
        v.clear()
        v.update(saved)


@contextlib.contextmanager
def models_as_found(example_inputs: Sequence[Any], reads: dict[tuple[int, str], Any]
                    ) -> Iterator[None]:
    """Every module among `example_inputs` (and its submodules) exactly as it was: attributes
    added during the trace removed, replaced ones put back, containers refilled. Of `reads`
    (the attributes fn read, Note [module attributes read] in runtime/driver.py), those the
    trace itself set or changed are dropped first: their value came from fn, not the model."""
    saved = {}
    for a in example_inputs:
        if not isinstance(a, torch.nn.Module):
            continue
        for m in a.modules():
            if id(m) not in saved:
                d = m.__dict__
                inner = {k: _contents(v) for k, v in d.items() if isinstance(v, _CONTAINERS)}
                saved[id(m)] = (d, dict(d), inner)
    try:
        yield
    finally:
        for key in [k for k in reads if k[0] in saved]:
            d, attrs = saved[key[0]][:2]
            was = attrs.get(key[1], _MISSING)
            if not (same_value(was, reads[key]) and same_value(was, d.get(key[1], _MISSING))):
                del reads[key]
        for d, attrs, inner in saved.values():
            for k in [k for k in d if k not in attrs]:
                del d[k]
            for k, v in attrs.items():
                if d.get(k) is not v:
                    d[k] = v
            for k, c in inner.items():
                if _changed(attrs[k], c):
                    _put_back(attrs[k], c)


def _changed(v: Any, saved: Any) -> bool:
    """Whether a container's contents differ from the saved ones, by identity (they may be
    tensors, whose == is elementwise)."""
    now = _contents(v)
    if isinstance(v, dict):
        return now.keys() != saved.keys() or any(now[k] is not saved[k] for k in saved)
    return len(now) != len(saved) or any(a is not b for a, b in zip(now, saved))


def with_attributes_read(args: Sequence[Any], reads: dict[tuple[int, str], Any],
                         paths: dict[int, tuple[int, str]]) -> tuple[Any, ...]:
    """`args` with each model argument's attributes that fn read while traced, named by their
    module's name in that model, checked on every call (Note [module attributes read] in
    runtime/driver.py)."""
    per_arg: dict[int, list[ModuleAttr]] = {}
    for (mid, name), value in reads.items():
        if mid in paths:
            i, module = paths[mid]
            per_arg.setdefault(i, []).append(ModuleAttr(module=module, name=name, value=value))
    return tuple(a._replace(attrs=tuple(per_arg.get(i, ()))) if isinstance(a, ModuleArg)
                 else a for i, a in enumerate(args))
