"""Profile, the eager side: each module's own eager forward time per step (its children's
ranges excluded), the before of the profile's before/after comparison.
"""
from __future__ import annotations

import contextlib
import inspect
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from .timing import _MODULE_RANGE, _gpu_seconds, _per_step, _profiled, _wall_seconds


def _module_paths(fn: Callable[..., Any], inputs: Sequence[Any]) -> dict[torch.nn.Module, str]:
    """Each module reachable from `inputs`, named like the graph names it ("m", "m.0"): the
    argument name, then the attribute path."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    paths: dict[torch.nn.Module, str] = {}
    for k, v in enumerate(inputs):
        if isinstance(v, torch.nn.Module):
            root = params[k] if k < len(params) else f"arg{k}"
            for sub, mod in v.named_modules(prefix=root):
                paths.setdefault(mod, sub)
    return paths


@contextlib.contextmanager
def _module_ranges(paths: Mapping[torch.nn.Module, str]) -> Iterator[None]:
    """A record_function range around each module's forward, by forward hooks (removed
    after)."""
    open_ranges: dict[int, list[Any]] = defaultdict(list)

    def enter(mod: torch.nn.Module, _args: Any) -> None:
        rf = torch.profiler.record_function(f"{_MODULE_RANGE}{paths[mod]}")
        rf.__enter__()
        open_ranges[id(mod)].append(rf)

    def leave(mod: torch.nn.Module, _args: Any, _out: Any) -> None:
        if open_ranges[id(mod)]:
            open_ranges[id(mod)].pop().__exit__(None, None, None)

    handles = []
    for mod in paths:
        handles.append(mod.register_forward_pre_hook(enter))
        handles.append(mod.register_forward_hook(leave))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _profile_eager(eager: Callable[..., Any], inputs: Sequence[Any], steps: int, warmup: int,
                   cuda: bool) -> tuple[dict[str, float], float]:
    """Each module's own eager forward time per step (its children's ranges excluded), and
    the eager step time."""
    paths = _module_paths(eager, inputs)
    step_s = _wall_seconds(lambda: eager(*inputs), steps, warmup, cuda)
    with _module_ranges(paths):
        prof = _profiled(lambda: eager(*inputs), steps, cuda)
    events = list(prof.events())
    own: dict[str, float] = defaultdict(float)
    if cuda:  # a kernel goes to the innermost module range: the module's own time
        for name, t in _gpu_seconds(events, _MODULE_RANGE).items():
            own[name[len(_MODULE_RANGE):]] += t / steps
        return dict(own), step_s
    calls: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if e.name.startswith(_MODULE_RANGE):
            t = e.cpu_time_total / 1e6 - sum(c.cpu_time_total / 1e6
                                             for c in _module_children(e))
            calls[e.name[len(_MODULE_RANGE):]].append(t)
    return {name: _per_step(ts, steps) for name, ts in calls.items()}, step_s


def _module_children(e: Any) -> list[Any]:
    """The nearest module ranges below `e`."""
    out, todo = [], list(e.cpu_children)
    while todo:
        c = todo.pop()
        if c.name.startswith(_MODULE_RANGE):
            out.append(c)
        else:
            todo.extend(c.cpu_children)
    return out
