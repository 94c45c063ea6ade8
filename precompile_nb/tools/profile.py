"""Profile a loaded artifact: run it under torch.profiler and say what each part of the model
costs after compilation. Kernel time goes to the graph nodes the kernel computes, and from the
nodes to the model's modules, forward and backward apart; the time no kernel accounts for is a
row of its own. The same modules run eagerly give the before/after comparison.

    prof = profile_artifact(f, report, (model, x), steps=10, eager=step.__wrapped__)
    prof.modules[0].module, prof.modules[0].forward_seconds
    data = prof.to_data()          # plain JSON-able data for viewers/profile.py

See Note [how kernels are timed].
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..core import on_cuda
from ..core.errors import PrecompileError, option_error
from .profile_eager import _profile_eager
from .timing import (
    _KERNEL_RANGE,
    _STEP_RANGE,
    _gpu_by_owner,
    _gpu_seconds,
    _per_step,
    _profiled,
    _wall_seconds,
)

__all__ = ["KernelTime", "ModuleTime", "Profile", "profile_artifact", "UNATTRIBUTED",
           "TOP_LEVEL"]


UNATTRIBUTED = "(unattributed)"  # the module row for step time outside every kernel


TOP_LEVEL = "(top level)"  # the module row for nodes of fn itself, outside any module


# Ops that only reinterpret a tensor (no arithmetic): a kernel's time goes to the other nodes it
# computes, unless it computes nothing but these.
_VIEW_OPS = frozenset({
    "aten.t", "aten.view", "aten._unsafe_view", "aten.reshape", "aten.expand", "aten.permute",
    "aten.transpose", "aten.unsqueeze", "aten.squeeze", "aten.as_strided", "aten.alias",
    "aten.slice", "aten.select", "aten.detach", "aten.split", "aten.unbind"})


# Note [how kernels are timed]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Inductor's C++ kernels are plain function calls that torch.profiler cannot see, and its
# extern calls (extern_kernels.mm) look the same for every matmul. The artifact's `call` finds
# each kernel by name in the namespace python_code was executed in, at call time. For the
# length of a profile, those names are rebound (and restored after) to wrappers that open a
# record_function range "pcnb.kernel#K", K the kernel's index in report["kernels"]: the k-th
# call of a repeated extern name is the k-th kernel of that name in the report (the report
# lists them in the order `call` runs them). Dotted names (extern_kernels.mm,
# torch.ops.aten._scaled_dot_product_efficient_attention.default) are reached through proxies
# of the global they start from. The range's CPU time is the kernel's time on CPU; on CUDA, the
# GPU time of what it launched (Note [GPU time of a range]). Buffers the graph allocates
# (empty_strided_*) are counted against the next kernel, the one that writes them. Nothing in
# torch is patched, and the artifact is not re-executed. The step time is measured apart, with
# nothing instrumented, so the wrappers' own cost lands in no row.
# Read from torch.profiler's FunctionEvents: name, id, cpu_parent, cpu_children,
# cpu_time_total, time_range, device_type (2.11-2.14; is_user_annotation where it exists).


@dataclass(frozen=True)
class KernelTime:
    """One kernel of the report, timed."""

    index: int  # its index in report["kernels"]
    name: str  # "cpp_fused_relu_0" / "extern_kernels.mm"
    kind: str  # cpp / triton / extern / aten (eager backend: one ATen op per node)
    calls: int  # calls per step
    seconds: float  # time per step (device time on CUDA)
    bytes: int  # bytes of the buffers allocated for it per step
    nodes: tuple[str, ...]  # graph nodes its time is attributed to
    # "source nodes" (the report's provenance), "op names" (matched by op: the report lists
    # no source nodes for it) or "none" (its time stays unattributed)
    attribution: str
    backward_fraction: float  # share of its nodes that are backward (gradient) nodes


@dataclass(frozen=True)
class ModuleTime:
    """The time of one module's graph nodes (the innermost module of each node)."""

    module: str  # "m.0"; TOP_LEVEL; UNATTRIBUTED
    forward_seconds: float  # per step
    backward_seconds: float
    eager_forward_seconds: float | None  # the module's own eager forward (children excluded)
    nodes: int  # graph nodes with time
    unsplit_seconds: float = 0.0  # time that is neither (the UNATTRIBUTED row's)

    @property
    def seconds(self) -> float:
        return self.forward_seconds + self.backward_seconds + self.unsplit_seconds


@dataclass(frozen=True)
class Profile:
    """What profiling the artifact measured, per step (over `steps` calls: medians of CPU
    times, GPU times summed and divided by `steps`)."""

    fn_name: str
    device: str  # "cpu" / "cuda"
    steps: int
    # wall time of one call, timed apart from the profiler with nothing instrumented
    # (synchronized on CUDA); the module rows, UNATTRIBUTED included, sum to it, unless the
    # kernels' profiled time exceeded it (a busy machine): then UNATTRIBUTED is 0, the rows
    # sum to the kernels' time, and a note says by how much (never a negative row)
    step_seconds: float
    kernels: tuple[KernelTime, ...]  # slowest first
    modules: tuple[ModuleTime, ...]  # slowest first; the UNATTRIBUTED row last
    node_seconds: Mapping[str, float]  # graph node -> seconds, for coloring the graph
    outside: tuple[tuple[str, float], ...]  # profiler ops outside any kernel, slowest first
    eager_step_seconds: float | None  # the same call run eagerly, if profiled
    notes: tuple[str, ...]  # what the numbers do not cover
    peak_bytes: int | None = None  # CUDA: the most memory allocated during a step

    @property
    def kernel_seconds(self) -> float:
        return sum(k.seconds for k in self.kernels)

    @property
    def unattributed_seconds(self) -> float:
        return next((m.seconds for m in self.modules if m.module == UNATTRIBUTED), 0.0)

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-able data (the edge to the viewers)."""
        data = dataclasses.asdict(self)
        data["node_seconds"] = dict(self.node_seconds)
        data["outside"] = [{"name": n, "seconds": s} for n, s in self.outside]
        data["kernel_seconds"] = self.kernel_seconds
        data["unattributed_seconds"] = self.unattributed_seconds
        for row, m in zip(data["modules"], self.modules):
            row["seconds"] = m.seconds
        return data


def profile_artifact(fn: Callable[..., Any], report: Mapping[str, Any], inputs: Sequence[Any],
                     *, steps: int = 10, warmup: int = 2,
                     eager: Callable[..., Any] | None = None) -> Profile:
    """Run the loaded artifact `fn` (precompile.load's callable) `warmup + steps` times on
    `inputs` and attribute its time to the graph nodes and modules of `report` (report_data).
    With `eager` (the plain function), the same inputs run eagerly too, each module's forward
    timed. Gradients and buffers of the models among `inputs` are restored afterwards.

    >>> from precompile_nb.core.profile import profile_artifact  # doctest: +SKIP
    >>> prof = profile_artifact(step, r.report, (model, x), steps=5)  # doctest: +SKIP
    >>> prof.modules[-1].module  # doctest: +SKIP
    '(unattributed)'
    """
    if not isinstance(steps, int) or steps < 1:
        raise option_error("profile", "steps", steps, "a positive int",
                           "pass how many timed calls to average, e.g. steps=5",
                           what=f"profile: steps must be a positive int, got {steps!r}",
                           stage="call")
    ns = getattr(fn, "__globals__", None)
    if not isinstance(ns, dict) or "_PC_META" not in ns:
        raise PrecompileError(
            "profile: not a loaded precompile artifact", stage="profile",
            where=type(fn).__name__, expected="the callable precompile.load returned",
            actual=repr(fn)[:200], hint="profile the PrecompileResult (result.profile(...)) "
                                        "or precompile.load(python_code, cache)")
    cuda = on_cuda(inputs)
    kernels = list(report.get("kernels") or [])
    if report.get("backend") == "eager":
        kernels = _eager_kernels(report)
    with _restored(inputs):
        measured, step_s, outside, peak = _profile_artifact(
            fn, ns, kernels, inputs, steps, warmup, cuda, report.get("backend") == "eager")
        eager_modules, eager_step = ({}, None)
        if eager is not None:
            eager_modules, eager_step = _profile_eager(eager, inputs, steps, warmup, cuda)
    prof = _attribute(report, kernels, measured, step_s, outside, eager_modules, eager_step,
                      steps=steps, device="cuda" if cuda else "cpu")
    return dataclasses.replace(prof, peak_bytes=peak)


@dataclass(frozen=True)
class _Measured:
    calls: int
    seconds: float
    bytes: int


def _profile_artifact(fn: Callable[..., Any], ns: dict[str, Any],
                      kernels: Sequence[Mapping[str, Any]], inputs: Sequence[Any], steps: int,
                      warmup: int, cuda: bool, eager_backend: bool,
                      ) -> tuple[dict[int, _Measured], float, list[tuple[str, float]],
                                 int | None]:
    """Kernel index -> its time per step, the step time, the ops outside kernels, and the
    peak memory of a step on CUDA."""
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    step_s = _wall_seconds(lambda: fn(*inputs), steps, warmup, cuda)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    counters = _Counters()
    patch = _eager_graph_range if eager_backend else _kernel_ranges
    with patch(ns, kernels, counters):
        prof = _profiled(lambda: fn(*inputs), steps, cuda)
    events = list(prof.events())
    measured: dict[int, _Measured] = {}
    if eager_backend:
        per_kernel = _eager_op_times(events, kernels, cuda)
    elif cuda:
        per_kernel = {int(name[len(_KERNEL_RANGE):]): s
                      for name, s in _gpu_seconds(events, _KERNEL_RANGE).items()}
    else:
        calls: dict[int, list[float]] = defaultdict(list)
        for e in events:
            if e.name.startswith(_KERNEL_RANGE):
                calls[int(e.name[len(_KERNEL_RANGE):])].append(e.cpu_time_total / 1e6)
        # back to totals over the steps, as the other two paths give
        per_kernel = {k: _per_step(ts, steps) * steps for k, ts in calls.items()}
    for k in range(len(kernels)):
        n_calls = counters.calls.get(k, 0) // (steps + 1) if not eager_backend else 1
        measured[k] = _Measured(calls=n_calls, seconds=per_kernel.get(k, 0.0) / steps,
                                bytes=counters.bytes.get(k, 0) // (steps + 1))
    return measured, step_s, _outside_ops(events, cuda, steps, eager_backend), peak


def _outside_ops(events: Sequence[Any], cuda: bool, steps: int,
                 eager_backend: bool) -> list[tuple[str, float]]:
    """The ops directly inside a step that no kernel range holds (gradient accumulation into
    .grad, write-backs, checks), by name, per step."""
    def outside(e: Any) -> bool:
        parent = e.cpu_parent
        return (parent is not None and parent.name == _STEP_RANGE
                and not e.name.startswith(_KERNEL_RANGE) and e.name != "pcnb.graph")

    times: dict[str, float] = defaultdict(float)
    if cuda:
        for e, t in _gpu_by_owner(events, outside).items():
            times[e.name] += t / steps
    else:
        for e in events:
            if outside(e):
                times[e.name] += e.cpu_time_total / 1e6 / steps
    return sorted(times.items(), key=lambda kv: -kv[1])


class _Counters:
    """Calls per kernel and the bytes allocated for each, counted by the wrappers."""

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()
        self.bytes: Counter[int] = Counter()
        self.pending = 0  # bytes allocated since the last kernel call


@contextlib.contextmanager
def _kernel_ranges(ns: dict[str, Any], kernels: Sequence[Mapping[str, Any]],
                   counters: _Counters) -> Iterator[None]:
    """Rebind the artifact's kernels (and allocators) to timed wrappers for the duration.
    See Note [how kernels are timed]."""
    by_name: dict[str, list[int]] = defaultdict(list)
    for k, kern in enumerate(kernels):
        by_name[str(kern.get("name"))].append(k)
    saved: dict[str, Any] = {}

    def rebind(name: str, value: Any) -> None:
        saved.setdefault(name, ns[name])
        ns[name] = value

    seen: Counter[str] = Counter()

    def timed(name: str, target: Callable[..., Any]) -> Callable[..., Any]:
        indices = by_name[name]

        def run(*args: Any, **kwargs: Any) -> Any:
            k = indices[seen[name] % len(indices)]
            seen[name] += 1
            counters.calls[k] += 1
            counters.bytes[k] += counters.pending
            counters.pending = 0
            with torch.profiler.record_function(f"{_KERNEL_RANGE}{k}"):
                return target(*args, **kwargs)
        return run

    # dotted names (extern_kernels.mm, torch.ops.aten.x.default): a tree of attribute paths
    # under each global, rebuilt as proxies whose leaves are timed
    externs: dict[str, dict[str, Any]] = defaultdict(dict)
    for name in by_name:
        owner, _, path = name.partition(".")
        if path and owner in ns:
            target = _resolve(ns[owner], path)
            if target is not None:
                node = externs[owner]
                *inner, leaf = path.split(".")
                for part in inner:
                    node = node.setdefault(part, {})
                node[leaf] = timed(name, target)
        elif name in ns and hasattr(ns[name], "run") and not callable(ns[name]):
            rebind(name, _Launcher(ns[name], timed(name, ns[name].run)))
        elif name in ns and callable(ns[name]):
            rebind(name, timed(name, ns[name]))
    for owner, tree in externs.items():
        rebind(owner, _proxy(ns[owner], tree))
    for alloc in ("empty_strided_cpu", "empty_strided_cuda", "empty_strided"):
        if callable(ns.get(alloc)):
            rebind(alloc, _counting_alloc(ns[alloc], counters))
    try:
        yield
    finally:
        ns.update(saved)


def _resolve(obj: Any, path: str) -> Callable[..., Any] | None:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if callable(obj) else None


def _proxy(target: Any, tree: dict[str, Any]) -> Any:
    return _Proxy(target, {k: _proxy(getattr(target, k), v) if isinstance(v, dict) else v
                           for k, v in tree.items()})


class _Proxy:
    """A module-like object (`extern_kernels`, `torch`) with some attributes replaced: timed
    wrappers, or proxies one level down (`torch.ops`)."""

    def __init__(self, target: Any, attrs: dict[str, Any]) -> None:
        self._target, self._attrs = target, attrs

    def __getattr__(self, name: str) -> Any:
        if name in self._attrs:
            return self._attrs[name]
        return getattr(self._target, name)


class _Launcher:
    """A Triton kernel object whose `.run` is timed."""

    def __init__(self, target: Any, run: Callable[..., Any]) -> None:
        self._target, self.run = target, run

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def _counting_alloc(alloc: Callable[..., Any], counters: _Counters) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        t = alloc(*args, **kwargs)
        if isinstance(t, torch.Tensor):
            counters.pending += t.untyped_storage().nbytes()
        return t
    return counted


@contextlib.contextmanager
def _restored(inputs: Sequence[Any]) -> Iterator[None]:
    """Gradients and buffers of the models among `inputs` as they were before profiling ran
    the step many times."""
    grads, buffers = [], []
    with torch.no_grad():
        for v in inputs:
            if isinstance(v, torch.nn.Module):
                grads += [(p, None if p.grad is None else p.grad.clone()) for p in v.parameters()]
                buffers += [(b, b.clone()) for b in v.buffers()]
            elif isinstance(v, torch.Tensor) and v.requires_grad:
                grads.append((v, None if v.grad is None else v.grad.clone()))
    try:
        yield
    finally:
        with torch.no_grad():
            for p, g in grads:
                p.grad = g
            for b, saved in buffers:
                b.copy_(saved)


def _eager_kernels(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One pseudo-kernel per compute node of an eager-backend artifact."""
    return [{"name": n["target"], "kind": "aten", "fused_ops": [n["target"]],
             "source_nodes": [n["name"]]}
            for n in report["graph"]["nodes"] if n.get("op") == "call_function"]


@contextlib.contextmanager
def _eager_graph_range(ns: dict[str, Any], kernels: Sequence[Mapping[str, Any]],
                       counters: _Counters) -> Iterator[None]:
    """One range around the eager graph, whose child ops are its nodes in order."""
    graph = ns.get("_pc_eager_graph")
    if not callable(graph):
        yield
        return

    def ranged(*args: Any) -> Any:
        with torch.profiler.record_function("pcnb.graph"):
            return graph(*args)
    ns["_pc_eager_graph"] = ranged
    try:
        yield
    finally:
        ns["_pc_eager_graph"] = graph


def _eager_op_times(events: Sequence[Any], kernels: Sequence[Mapping[str, Any]],
                    cuda: bool) -> dict[int, float]:
    """Match the ops under each "pcnb.graph" range to the graph's nodes in order, by op name
    ("aten::addmm" is node target "aten.addmm.default"). Totals over the steps: GPU times
    summed, CPU times as the median call times the calls (one stall of a busy machine, or a
    first call's one-off setup, would otherwise dominate a short profile)."""
    times: dict[int, list[float]] = defaultdict(list)
    gpu = (_gpu_by_owner(events, lambda e: e.cpu_parent is not None
                         and e.cpu_parent.name == "pcnb.graph") if cuda else {})
    for g in events:
        if g.name != "pcnb.graph":
            continue
        k = 0
        for child in sorted(g.cpu_children, key=lambda e: e.time_range.start):
            op = child.name.replace("::", ".")
            while k < len(kernels) and not str(kernels[k]["name"]).startswith(op + "."):
                k += 1  # a node that ran no profiled op (a view the profiler did not record)
            if k == len(kernels):
                break
            times[k].append(gpu.get(child, 0.0) if cuda else child.cpu_time_total / 1e6)
            k += 1
    if cuda:
        return {k: sum(ts) for k, ts in times.items()}
    return {k: statistics.median(ts) * len(ts) for k, ts in times.items()}


def _op(target: str) -> str:
    """"aten.addmm.default" -> "aten.addmm"."""
    parts = target.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else target


def _kernel_nodes(kernels: Sequence[Mapping[str, Any]],
                  nodes: Mapping[str, Mapping[str, Any]]) -> list[tuple[tuple[str, ...], str]]:
    """For each kernel, the graph nodes its time goes to and how they were found."""
    claimed = {n for kern in kernels for n in kern.get("source_nodes") or [] if n in nodes}
    out = []
    for kern in kernels:
        found = tuple(n for n in kern.get("source_nodes") or [] if n in nodes)
        how = "source nodes"
        if not found:
            found = _nodes_by_op(kern.get("fused_ops") or [], nodes, claimed)
            claimed.update(found)
            how = "op names" if found else "none"
        work = tuple(n for n in found if _op(str(nodes[n].get("target"))) not in _VIEW_OPS)
        out.append((work or found, how))
    return out


def _nodes_by_op(ops: Sequence[str], nodes: Mapping[str, Mapping[str, Any]],
                 claimed: set[str]) -> tuple[str, ...]:
    """A kernel the report gives no source nodes: for each op it fuses, the first graph node
    of that op no other kernel claims (else the first of that op at all). Approximate, and
    said so in the profile's notes."""
    found = []
    for op in ops:
        of_op = [name for name, n in nodes.items()
                 if n.get("op") == "call_function" and _op(str(n.get("target"))) == op]
        free = [name for name in of_op if name not in claimed and name not in found]
        pick = free[:1] or of_op[:1]
        found.extend(x for x in pick if x not in found)
    return tuple(found)


def _attribute(report: Mapping[str, Any], kernels: Sequence[Mapping[str, Any]],
               measured: Mapping[int, _Measured], step_s: float,
               outside: Sequence[tuple[str, float]], eager_modules: Mapping[str, float],
               eager_step: float | None, *, steps: int, device: str) -> Profile:
    nodes = {n["name"]: n for n in report["graph"]["nodes"]}
    node_s: dict[str, float] = defaultdict(float)
    rows = []
    unowned = 0.0  # time of kernels with no node to go to
    for k, (kern, (found, how)) in enumerate(zip(kernels, _kernel_nodes(kernels, nodes))):
        m = measured.get(k, _Measured(0, 0.0, 0))
        if found:
            for n in found:
                node_s[n] += m.seconds / len(found)
        else:
            unowned += m.seconds
        bwd = sum(nodes[n].get("role") == "gradient" for n in found)
        rows.append(KernelTime(index=k, name=str(kern.get("name")), kind=str(kern.get("kind")),
                               calls=m.calls, seconds=m.seconds, bytes=m.bytes, nodes=found,
                               attribution=how,
                               backward_fraction=bwd / len(found) if found else 0.0))
    fwd: dict[str, float] = defaultdict(float)
    bwd_s: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for n, s in node_s.items():
        mod = nodes[n].get("module") or TOP_LEVEL
        (bwd_s if nodes[n].get("role") == "gradient" else fwd)[mod] += s
        count[mod] += 1
    modules = [ModuleTime(module=mod, forward_seconds=fwd.get(mod, 0.0),
                          backward_seconds=bwd_s.get(mod, 0.0),
                          eager_forward_seconds=eager_modules.get(mod) if eager_modules
                          else None, nodes=count[mod])
               for mod in count]
    modules.sort(key=lambda m: -m.seconds)
    attributed = sum(m.seconds for m in modules)
    notes = _notes(rows, unowned, device, step_s, attributed)
    modules.append(_unattributed_row(max(0.0, step_s - attributed)))
    rows.sort(key=lambda r: -r.seconds)
    return Profile(fn_name=str(report.get("fn_name")), device=device, steps=steps,
                   step_seconds=step_s, kernels=tuple(rows), modules=tuple(modules),
                   node_seconds=dict(node_s), outside=tuple(outside),
                   eager_step_seconds=eager_step, notes=tuple(notes))


def _unattributed_row(seconds: float) -> ModuleTime:
    # the step time no kernel with nodes accounts for: driver checks, allocation, gradient
    # accumulation, Python, kernels without source nodes. It makes the rows sum to the step
    # (where the kernels' profiled time did not exceed it: then it is 0).
    return ModuleTime(module=UNATTRIBUTED, forward_seconds=0.0, backward_seconds=0.0,
                      eager_forward_seconds=None, nodes=0, unsplit_seconds=seconds)


def _notes(rows: Sequence[KernelTime], unowned: float, device: str, step: float,
           attributed: float) -> list[str]:
    notes = []
    if attributed > step > 0:
        notes.append(f"kernels {attributed / step:.2f}× the step time, measured apart: the "
                     "kernels took longer under the profiler than the whole step took without "
                     "it (a busy machine, or a step too short to time), so the "
                     f"{UNATTRIBUTED} row shows 0; profile again with more steps")
    by_ops = [r.name for r in rows if r.attribution == "op names"]
    if by_ops:
        notes.append(f"{len(by_ops)} kernel(s) list no source nodes in the report; their time "
                     "went to the graph nodes of the ops they fuse: " + ", ".join(by_ops[:6]))
    if unowned:
        notes.append(f"{unowned * 1e3:.3f} ms of kernel time matched no graph node and is in "
                     f"the {UNATTRIBUTED} row")
    if device == "cuda":
        notes.append("kernel times are GPU time; the step time is wall time with the device "
                     "synchronized, so launch gaps are in the unattributed row")
    return notes
