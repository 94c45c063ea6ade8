"""Stage 2, lowering: autotuning a compiled CUDA graph at precompile, so that neither load nor
the first call benchmarks anything; a graph with dynamic sizes at several sizes.

Note [a configuration per size]
  Inductor compiles a graph with mark_dynamic / mark_unbacked dims once for the whole range,
  and its autotuner picks one configuration per Triton kernel at the first run, whatever size
  comes later (torch.compile's dynamic graphs too). A block size chosen at batch 64 is not the
  one batch 1 or batch 1024 runs best with. So precompile tunes the graph at several size
  points: the example's, the ends of the marked range (each end at most 8x the example's
  input elements: a bigger run could exhaust the GPU's memory), and the points the user asks for
  (`precompile(..., tune_sizes=[...])`). At each point the graph runs once on the example's
  values cut or repeated to that size (Note [tuning on the example's values], below), and
  each multi-configuration kernel's choice is recorded with its size arguments (xnumel, ...).
  The artifact then holds, per kernel whose choice differs between points, one cubin per
  choice and the size where the next one takes over (halfway between two points, on a log
  scale of the product of its size arguments); the warm path's launcher picks by that size on
  each launch (core/warm.py). The example's point runs last, as Inductor's own run: its choice
  is what the cache's best_config files hold, so a load that compiles (no warm path) runs it
  at every size, as before. Dims with the same size in the example move together (a batch
  shared by inputs and targets); a point that breaks a guard the graph was captured under, or
  fails, is skipped and the report says why; a point the user asked for is checked up front
  and a failure is a PrecompileError. Not tuned per size: graphs with collectives (tuned at the
  example's size only, where every rank tunes them together: Note [every rank tunes a graph
  with collectives together] in tune_together.py) and CPU graphs (C++ kernels have no
  configurations to choose among).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..runtime.driver import _PC_GUARD_FNS
from . import _compat
from .errors import PrecompileError
from .schemas import Captured, Tuning

# the largest automatic point, in input elements against the example's (user points: any size)
_MAX_GROWTH = 8
_Point = dict[int, int]  # example size of a group of dims -> its size at the point


def check_tune_sizes(tune_sizes: Any) -> tuple[int | Mapping[str, int], ...]:
    """The option's form: a list of sizes (int) or of {"x.size(0)": n, ...} points."""
    if tune_sizes is None:
        return ()
    if not isinstance(tune_sizes, (list, tuple)):
        raise PrecompileError(
            "tune_sizes takes a list", invariant=3, stage="lower",
            where="precompile(..., tune_sizes=...)", expected="a list of sizes",
            actual=f"{type(tune_sizes).__name__}: {tune_sizes!r}"[:80],
            hint="tune_sizes=[1, 256] (a list, even for one size: tune_sizes=[64])")
    items = tuple(tune_sizes)
    for item in items:
        ok = (type(item) is int and item > 0) or (isinstance(item, Mapping) and all(
            isinstance(k, str) and type(v) is int and v > 0 for k, v in item.items()))
        if not ok:
            raise PrecompileError(
                f"tune_sizes: {item!r} is not a size", invariant=3, stage="lower",
                where="precompile(..., tune_sizes=...)",
                expected="positive ints, or dicts like {'x.size(0)': 64}",
                actual=repr(item)[:80],
                hint="tune_sizes=[1, 256] tunes the dynamic dim at batch 1 and 256; with "
                     "several dynamic dims of different sizes give a dict per point")
    return items


def autotune(c: Captured, fake_inputs: Sequence[Any], unread: tuple[int, ...],
             kernel_vars: Sequence[str], run_at: Callable[[list, list], None],
             asked: Sequence[_Point] = (), collectives: bool = False) -> Tuning:
    """Tune the graph just compiled at its size points (Note [a configuration per size]),
    `asked` those of tune_sizes (asked_points); `run_at(shapes, values)` runs it once on
    inputs of those (shape, stride)s and values. A graph with `collectives` (every rank
    tunes it together) only at the example's size."""
    dims = _dynamic_dims(c, unread)
    points, skipped = _points(c, dims, list(asked))
    if collectives:  # Note [every rank tunes a graph with collectives together]
        skipped += [(p, "a graph with collectives is tuned at the example's size only (a "
                        "size that failed on one rank would leave the others waiting)")
                    for p in points[1:]]
        points = points[:1]
    example = tuning_values(c, len(fake_inputs), unread)

    def run(point: _Point) -> None:
        run_at(*_inputs_at(c, fake_inputs, unread, dims, example, point))

    choices: dict[str, list[tuple[int, list[str], dict[str, Any]]]] = {}
    tuned: list[_Point] = []
    counts: list[int] = []
    with _compat.tuning_at_sizes(kernel_vars) as tune:
        for point in points[1:]:
            try:
                got = tune(lambda p=point: run(p), True)
            except torch.cuda.OutOfMemoryError as e:
                _failed(c, dims, point, asked, skipped, e)
                torch.cuda.empty_cache()
                continue
            except (RuntimeError, AssertionError) as e:  # a check of the graph's own
                _failed(c, dims, point, asked, skipped, e)
                continue
            tuned.append(point)
            counts.append(len(got))
            _add(choices, got)
        at_example = tune(lambda: run({}), False)
    _add(choices, at_example, first=True)
    return Tuning(at=tuple(_shapes(c, dims, p) for p in [{}, *tuned]),
                  kernels=(len(at_example), *counts),
                  skipped=tuple((_shapes(c, dims, p), why) for p, why in skipped),
                  by_size={v: _buckets(ch) for v, ch in choices.items()
                           if len({r["hash"] for _, _, r in ch}) > 1})


def tuning_record(t: Tuning) -> dict[str, Any]:
    """A Tuning as plain data: the report's `autotuning`, and _PC_WARM's autotuned_at /
    autotuned_kernels / tuning_skipped."""
    def point(p: Mapping[str, tuple[int, ...]]) -> dict[str, list[int]]:
        return {k: list(v) for k, v in p.items()}

    return {"at": [point(p) for p in t.at], "kernels": list(t.kernels),
            "skipped": [{"at": point(p), "why": why} for p, why in t.skipped],
            "by_size": sorted(t.by_size)}


def asked_points(c: Captured,
                 tune_sizes: Sequence[int | Mapping[str, int]]) -> list[_Point]:
    """tune_sizes as points, each checked (PrecompileError): dims, ranges, guards. Checked
    for every backend and device, tuned where a CUDA graph is autotuned."""
    if not tune_sizes:
        return []
    dims = _dynamic_dims(c, ())
    return [_asked_point(c, dims, item) for item in tune_sizes]


def _dynamic_dims(c: Captured, unread: tuple[int, ...]) -> dict[tuple[int, int], tuple]:
    """(graph input, dim) -> (example size, lo, hi) for each dynamic dim the graph reads."""
    out = {}
    for i, spec in enumerate(c.inputs):
        if i in unread:
            continue
        for d, (lo, hi) in spec.dynamic.items():
            hi = hi if isinstance(hi, int) and hi < 2 ** 31 else None
            out[(i, d)] = (int(spec.shape[d]), max(lo or 1, 1), hi)
    return out


def _points(c: Captured, dims: dict, asked: list[_Point],
            ) -> tuple[list[_Point], list[tuple[_Point, str]]]:
    """The example's point first, then the range's ends and the asked points, each once;
    and the automatic ones skipped, with why."""
    groups: dict[int, list[tuple]] = {}
    for v, lo, hi in dims.values():
        groups.setdefault(v, []).append((lo, hi))
    low = {v: max(lo for lo, _ in r) for v, r in groups.items()}
    high = {v: min(h for _, h in r if h is not None) for v, r in groups.items()
            if any(h is not None for _, h in r)}
    points: list[_Point] = [{}]
    skipped: list[tuple[_Point, str]] = []
    for point in (*asked, low, high):
        point = {v: n for v, n in point.items() if n != v}
        if not point or point in points:
            continue
        why = None if point in asked else _why_not(c, dims, point)
        if why is None:
            points.append(point)
        else:
            skipped.append((point, why))
    return points, skipped


def _why_not(c: Captured, dims: dict, point: _Point) -> str | None:
    """Why an automatic point is not tuned: a guard it breaks, or its size."""
    broken = _broken_guard(c, dims, point)
    if broken is not None:
        return f"it breaks the guard {broken}"
    grow = _input_elements(c, dims, point) / max(_input_elements(c, dims, {}), 1)
    if grow > _MAX_GROWTH:
        return f"its inputs are {grow:.0f}x the example's (more than {_MAX_GROWTH}x)"
    return None


def _asked_point(c: Captured, dims: dict, item: int | Mapping[str, int]) -> _Point:
    """A point of tune_sizes, checked: named dims exist, sizes in range, guards hold."""
    names = {f"{c.inputs[i].where}.size({d})": (i, d) for i, d in dims}
    sizes = sorted({v for v, _, _ in dims.values()})
    if not dims:
        raise _bad(item, "no input has a dynamic dim", "mark a dim first: "
                   "torch._dynamo.mark_dynamic(x, 0), then tune_sizes=[...]")
    if isinstance(item, int):
        if len(sizes) > 1:
            raise _bad(item, f"the dynamic dims have {len(sizes)} sizes in the example "
                       f"({', '.join(sorted(names))})", "give a dict per point: "
                       f"{{{sorted(names)[0]!r}: {item}}}")
        item = {n: item for n in names}
    point: _Point = {}
    for name, n in item.items():
        if name not in names:
            raise _bad(item, f"{name} is not a dynamic dim", f"name one of {sorted(names)}")
        v, lo, hi = dims[names[name]]
        if n < lo or (hi is not None and n > hi):
            raise _bad(item, f"{name}={n} is outside its range [{lo}, {hi or 'inf'}]",
                       "pick a size inside the range the dim was marked with")
        if point.get(v, n) != n:
            raise _bad(item, f"dims of size {v} in the example move together and got "
                       f"{point[v]} and {n}", "give them one size")
        point[v] = n
    point = {v: n for v, n in point.items() if n != v}  # the example's own size: no point
    broken = _broken_guard(c, dims, point)
    if broken is not None:
        raise _bad(item, f"it breaks the guard {broken}, which the graph was captured under",
                   "pick sizes the guard allows (the report lists the guards)")
    return point


def _bad(item: Any, actual: str, hint: str) -> PrecompileError:
    return PrecompileError(f"tune_sizes: cannot tune at {item!r}", invariant=3, stage="lower",
                           where="precompile(..., tune_sizes=...)",
                           expected="sizes of the dynamic dims, inside their ranges",
                           actual=actual, hint=hint)


def _failed(c: Captured, dims: dict, point: _Point, asked: list[_Point],
            skipped: list, e: BaseException) -> None:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
    if point in asked:
        raise _bad(_shapes(c, dims, point), f"the graph failed there: {type(e).__name__}: {first}",
                   "tune at sizes the GPU has memory for, or leave tune_sizes out") from e
    skipped.append((point, f"the run failed: {type(e).__name__}: {first}"))


def _broken_guard(c: Captured, dims: dict, point: _Point) -> str | None:
    for g in c.convention.guards:
        sizes = {n: point.get(dims[(i, d)][0], dims[(i, d)][0]) if (i, d) in dims
                 else int(c.inputs[i].shape[d]) for n, (i, d) in g.symbols.items()}
        if not eval(compile(g.expr, "<guard>", "eval"), dict(_PC_GUARD_FNS), sizes):  # noqa: S307
            return g.text
    return None


def _shape_at(c: Captured, i: int, dims: dict, point: _Point) -> tuple[int, ...]:
    return tuple(point.get(s, s) if (i, d) in dims else s
                 for d, s in enumerate(c.inputs[i].shape))


def _shapes(c: Captured, dims: dict, point: _Point) -> dict[str, tuple[int, ...]]:
    """The point as people read it: each dynamic input's name -> its shape there."""
    return {c.inputs[i].where: _shape_at(c, i, dims, point) for i in sorted({i for i, _ in dims})}


def _input_elements(c: Captured, dims: dict, point: _Point) -> int:
    return sum(math.prod(_shape_at(c, i, dims, point)) for i in {i for i, _ in dims})


def _inputs_at(c: Captured, fake_inputs: Sequence[Any], unread: tuple[int, ...], dims: dict,
               example: list[Any], point: _Point) -> tuple[list, list]:
    """(shape, stride) of each lowered graph input at the point, and its value: the
    example's (`example`, Note [tuning on the example's values]), cut or repeated along each
    dim that moves."""
    kept = [i for i in range(len(c.inputs)) if i not in unread]
    values = list(example)
    shapes: list = []
    for k, fake in enumerate(fake_inputs):
        i = kept[k] if k < len(kept) else None
        if i is None or not c.inputs[i].dynamic:
            shapes.append((tuple(fake.shape), tuple(fake.stride())))
            continue
        shape = _shape_at(c, i, dims, point)
        spec = c.inputs[i]
        shapes.append((shape, tuple(spec.stride) if shape == tuple(spec.shape)
                       else _dense_like(shape, spec.stride)))
        if isinstance(values[k], torch.Tensor):
            values[k] = _resized(values[k], shape)
    return shapes, values


# Note [tuning on the example's values]
#   A tuning run of a CUDA graph at precompile (Note [a configuration per size]) gets
#   copies of the example's own values, not random stand-ins. The choice of configuration
#   depends on sizes only, but a graph may check the data: data guards (Note [data guards])
#   and the runtime asserts Inductor keeps for data-dependent sizes. A Mixture-of-Experts
#   layer routes tokens by value, and on stand-ins (zero token ids) every token went to the
#   same experts, an expert the example fed got none, and the graph's check stopped the run
#   ("Ne(u360, 0)"): precompile failed on an example that eager and the artifact both run.
#   Copies, so that a graph that writes into an input (BatchNorm's statistics) leaves the
#   user's tensors as they were. Constants are rebuilt from their literals; a DTensor input
#   (its placement is not a plain tensor's) keeps a stand-in.


def tuning_values(c: Captured, n: int, unread: tuple[int, ...]) -> list[Any]:
    """Each lowered graph input's value for the tuning run, or None for a stand-in: the
    example's tensors (inputs not dropped as unread, in order), then the constants."""
    kept = [t for i, t in enumerate(c.example_tensors) if i not in unread]
    if len(kept) != len(c.inputs) - len(unread):
        kept = []  # a Captured made without its example (tests): stand-ins throughout
    values: list[Any] = list(kept) + [None] * (n - len(kept))
    for k, const in enumerate(c.constants):
        if len(kept) + k < n:
            values[len(kept) + k] = torch.tensor(const.data, dtype=getattr(torch, const.dtype),
                                                 device=const.device)
    return values[:n]


def _dense_like(shape: tuple[int, ...], example_stride: Sequence[int]) -> tuple[int, ...]:
    """Dense strides for `shape`, dims ordered as the example's strides order them."""
    order = sorted(range(len(shape)), key=lambda d: (example_stride[d], -d))
    stride, step = [0] * len(shape), 1
    for d in order:
        stride[d], step = step, step * max(shape[d], 1)
    return tuple(stride)


def _resized(v: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    for d, n in enumerate(shape):
        if n < v.shape[d]:
            v = v.narrow(d, 0, n)
        elif n > v.shape[d]:
            v = torch.cat([v] * math.ceil(n / max(v.shape[d], 1)), dim=d).narrow(d, 0, n)
    return v


def _add(choices: dict, got: Mapping[str, Any], first: bool = False) -> None:
    for var, ch in got.items():
        entry = (math.prod(ch.numel.values()) if ch.numel else 1, sorted(ch.numel), ch.record)
        choices.setdefault(var, [])
        if first:
            choices[var].insert(0, entry)
        else:
            choices[var].append(entry)


def _buckets(choices: list[tuple[int, list[str], dict[str, Any]]]) -> dict[str, Any]:
    """A kernel's choices as size buckets: {"numel": [its size arguments], "buckets":
    [{"upto": n or None, "record": ...}]}, by the product of the size arguments (a bucket
    runs up to `upto` inclusive); where two points have the same product, the first (the
    example's) choice. Neighbours with one choice merge."""
    by_n: dict[int, dict[str, Any]] = {}
    for n, _, rec in choices:
        by_n.setdefault(n, rec)
    ordered = sorted(by_n.items())
    out: list[dict[str, Any]] = []
    for k, (n, rec) in enumerate(ordered):
        upto = (math.isqrt(n * ordered[k + 1][0]) if k + 1 < len(ordered) else None)
        if out and out[-1]["record"]["hash"] == rec["hash"]:
            out[-1]["upto"] = upto
        else:
            out.append({"upto": upto, "record": rec})
    return {"numel": choices[0][1], "buckets": out}
