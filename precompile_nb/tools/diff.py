"""Compare two precompile results: what changed in the calling convention, the graph, the
kernels, the cache and the stage times, and the python_code text. Plain data from two reports
(report_data dicts), for viewers/diff.py; nothing here runs the compiler.

    d = diff_reports(before.report, after.report)
    d.same                       # True when the two artifacts are the same computation
    d.nodes_added, d.code_diff   # graph nodes only `after` has; unified diff lines
"""
from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Change", "InputChange", "NodeChange", "CountChange", "KernelChange", "ReportDiff",
           "diff_reports"]

Change = Literal["added", "removed", "changed"]

# the fields of an input row and a graph node that, when they differ, make it "changed"
_INPUT_FIELDS = ("kind", "shape", "dtype", "device", "requires_grad", "gets_grad", "mutated",
                 "dynamic")
_NODE_FIELDS = ("shape", "dtype", "module", "role")


@dataclass(frozen=True)
class InputChange:
    """A tensor of the calling convention (by its `where`) added, removed or changed."""

    where: str  # "m.0.weight"
    change: Change
    fields: tuple[str, ...]  # the fields that differ ("shape", "dtype", ...); () if added/removed
    before: str | None  # "param [16, 8] float32 cpu"; None when added
    after: str | None


@dataclass(frozen=True)
class NodeChange:
    """A graph node, matched by (name, target), added, removed or changed."""

    name: str  # "addmm_1"
    target: str  # "aten.addmm.default"
    change: Change
    fields: tuple[str, ...]
    module: str  # the module it belongs to (after, else before)
    before: str | None  # "[32, 16] float32"
    after: str | None


@dataclass(frozen=True)
class CountChange:
    """How often an op (a graph node target) or a kernel name occurs, before and after."""

    name: str
    before: int
    after: int


@dataclass(frozen=True)
class KernelChange:
    """A kernel (by name) added or removed, or whose fused ops changed."""

    name: str  # "cpp_fused_relu_0" / "extern_kernels.mm"
    change: Change
    before: tuple[str, ...] | None  # fused ops; None when added
    after: tuple[str, ...] | None


@dataclass(frozen=True)
class ReportDiff:
    """Everything that differs between two precompile results, `a` (before) and `b`."""

    a: str  # what `a` is called ("before", or the result's name)
    b: str
    fn_names: tuple[str, str]
    backends: tuple[str, str]
    inputs: tuple[InputChange, ...]
    outputs: tuple[tuple[str, ...], tuple[str, ...]] | None  # the outputs if they differ
    guards: tuple[tuple[str, ...], tuple[str, ...]] | None  # the guards if they differ
    nodes_added: tuple[NodeChange, ...]
    nodes_removed: tuple[NodeChange, ...]
    nodes_changed: tuple[NodeChange, ...]
    op_counts: tuple[CountChange, ...]  # only the ops whose count differs
    kernels: tuple[KernelChange, ...]
    kernel_counts: tuple[CountChange, ...]  # only the kernel names whose count differs
    node_totals: tuple[int, int]
    kernel_totals: tuple[int, int]
    cache_bytes: tuple[int, int]
    python_code_bytes: tuple[int, int]
    stages: tuple[tuple[str, float | None, float | None], ...]  # (stage, a seconds, b seconds)
    code_diff: tuple[str, ...]  # unified diff of python_code (difflib), no line endings

    @property
    def same(self) -> bool:
        """The two results compile the same computation to the same python_code."""
        return not (self.inputs or self.outputs or self.guards or self.nodes_added
                    or self.nodes_removed or self.nodes_changed or self.kernels
                    or self.kernel_counts or self.code_diff)

    def summary(self) -> str:
        """One line: what changed, in counts (stable text, no timings)."""
        if self.same:
            return f"{self.a} and {self.b}: the same python_code and graph"
        parts = [f"{len(self.inputs)} input(s) differ",
                 f"nodes +{len(self.nodes_added)} -{len(self.nodes_removed)} "
                 f"~{len(self.nodes_changed)}",
                 f"kernels {self.kernel_totals[0]} -> {self.kernel_totals[1]}",
                 f"python_code {sum(_is_change(x) for x in self.code_diff)} line(s) changed"]
        return f"{self.a} -> {self.b}: " + ", ".join(parts)

    def to_data(self) -> dict[str, Any]:
        """Plain JSON-able data (the edge to the viewers)."""
        data = dataclasses.asdict(self)
        data["same"] = self.same
        data["summary"] = self.summary()
        return data


def diff_reports(a: Mapping[str, Any], b: Mapping[str, Any], *, names: tuple[str, str] = (
        "before", "after"), context: int = 3) -> ReportDiff:
    """The differences between two reports (report_data dicts, e.g. `result.report`).

    >>> from precompile_nb.core.diff import diff_reports
    >>> r = {"fn_name": "f", "inputs": [], "graph": {"nodes": []}, "kernels": [],
    ...      "python_code": "x = 1\\n"}
    >>> diff_reports(r, r).same
    True
    """
    nodes_a, nodes_b = _nodes(a), _nodes(b)
    added, removed, changed = _node_changes(nodes_a, nodes_b)
    kernels_a, kernels_b = list(a.get("kernels") or []), list(b.get("kernels") or [])
    return ReportDiff(
        a=names[0], b=names[1],
        fn_names=(str(a.get("fn_name")), str(b.get("fn_name"))),
        backends=(str(a.get("backend")), str(b.get("backend"))),
        inputs=_input_changes(a.get("inputs") or [], b.get("inputs") or []),
        outputs=_if_differ(a.get("outputs"), b.get("outputs")),
        guards=_if_differ([g.get("text") for g in a.get("guards") or []],
                          [g.get("text") for g in b.get("guards") or []]),
        nodes_added=added, nodes_removed=removed, nodes_changed=changed,
        op_counts=_count_changes(Counter(str(n.get("target")) for n in nodes_a.values()
                                         if n.get("op") == "call_function"),
                                 Counter(str(n.get("target")) for n in nodes_b.values()
                                         if n.get("op") == "call_function")),
        kernels=_kernel_changes(kernels_a, kernels_b),
        kernel_counts=_count_changes(Counter(str(k.get("name")) for k in kernels_a),
                                     Counter(str(k.get("name")) for k in kernels_b)),
        node_totals=(len(nodes_a), len(nodes_b)),
        kernel_totals=(len(kernels_a), len(kernels_b)),
        cache_bytes=(_cache_bytes(a), _cache_bytes(b)),
        python_code_bytes=(len(str(a.get("python_code") or "").encode("utf-8")),
                           len(str(b.get("python_code") or "").encode("utf-8"))),
        stages=_stages(a.get("stages") or [], b.get("stages") or []),
        code_diff=tuple(difflib.unified_diff(
            str(a.get("python_code") or "").splitlines(),
            str(b.get("python_code") or "").splitlines(),
            fromfile=f"{names[0]}.py", tofile=f"{names[1]}.py", lineterm="", n=context)),
    )


def _is_change(line: str) -> bool:
    return line[:1] in "+-" and not line.startswith(("+++", "---"))


def _if_differ(x: Any, y: Any) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    xs, ys = tuple(str(v) for v in x or []), tuple(str(v) for v in y or [])
    return None if xs == ys else (xs, ys)


def _cache_bytes(r: Mapping[str, Any]) -> int:
    return int((r.get("cache") or {}).get("bytes") or 0)


def _describe_input(row: Mapping[str, Any]) -> str:
    dyn = row.get("dynamic") or {}
    return (f"{row.get('kind')} {list(row.get('shape') or [])} {row.get('dtype')} "
            f"{row.get('device')}" + (f" dynamic dims {sorted(dyn)}" if dyn else "")
            + (" requires_grad" if row.get("requires_grad") else ""))


def _input_changes(a: Sequence[Mapping[str, Any]],
                   b: Sequence[Mapping[str, Any]]) -> tuple[InputChange, ...]:
    by_a = {str(r.get("where")): r for r in a}
    by_b = {str(r.get("where")): r for r in b}
    out = []
    for where in list(by_a) + [w for w in by_b if w not in by_a]:
        ra, rb = by_a.get(where), by_b.get(where)
        if ra is None or rb is None:
            out.append(InputChange(where=where, change="added" if ra is None else "removed",
                                   fields=(), before=ra and _describe_input(ra),
                                   after=rb and _describe_input(rb)))
            continue
        fields = tuple(f for f in _INPUT_FIELDS if ra.get(f) != rb.get(f))
        if fields:
            out.append(InputChange(where=where, change="changed", fields=fields,
                                   before=_describe_input(ra), after=_describe_input(rb)))
    return tuple(out)


def _nodes(r: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Graph nodes by (name, target): a node renamed or retargeted is one removed, one added."""
    return {(str(n.get("name")), str(n.get("target"))): n
            for n in (r.get("graph") or {}).get("nodes") or []}


def _describe_node(n: Mapping[str, Any]) -> str:
    shape = n.get("shape")
    return (f"{list(shape) if shape is not None else '-'} {n.get('dtype') or ''}".strip()
            + (f" in {n.get('module')}" if n.get("module") else "")
            + (" (backward)" if n.get("role") == "gradient" else ""))


def _node_changes(a: Mapping[tuple[str, str], Mapping[str, Any]],
                  b: Mapping[tuple[str, str], Mapping[str, Any]],
                  ) -> tuple[tuple[NodeChange, ...], tuple[NodeChange, ...],
                             tuple[NodeChange, ...]]:
    def row(key: tuple[str, str], change: Change, fields: tuple[str, ...] = ()) -> NodeChange:
        na, nb = a.get(key), b.get(key)
        return NodeChange(name=key[0], target=key[1], change=change, fields=fields,
                          module=str((nb or na or {}).get("module") or ""),
                          before=None if na is None else _describe_node(na),
                          after=None if nb is None else _describe_node(nb))

    added = tuple(row(k, "added") for k in b if k not in a)
    removed = tuple(row(k, "removed") for k in a if k not in b)
    changed = []
    for k in a:
        if k in b:
            fields = tuple(f for f in _NODE_FIELDS if a[k].get(f) != b[k].get(f))
            if fields:
                changed.append(row(k, "changed", fields))
    return added, removed, tuple(changed)


def _count_changes(a: Counter[str], b: Counter[str]) -> tuple[CountChange, ...]:
    names = sorted(set(a) | set(b))
    return tuple(CountChange(name=n, before=a[n], after=b[n]) for n in names if a[n] != b[n])


def _kernel_changes(a: Sequence[Mapping[str, Any]],
                    b: Sequence[Mapping[str, Any]]) -> tuple[KernelChange, ...]:
    """Kernels by name: the fused ops of every kernel of that name (an extern name repeats)."""
    def ops(ks: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for k in ks:
            seen = out.setdefault(str(k.get("name")), [])
            seen.extend(x for x in k.get("fused_ops") or [] if x not in seen)
        return {n: tuple(v) for n, v in out.items()}

    oa, ob = ops(a), ops(b)
    out = []
    for name in list(oa) + [n for n in ob if n not in oa]:
        if name not in ob:
            out.append(KernelChange(name=name, change="removed", before=oa[name], after=None))
        elif name not in oa:
            out.append(KernelChange(name=name, change="added", before=None, after=ob[name]))
        elif set(oa[name]) != set(ob[name]):
            out.append(KernelChange(name=name, change="changed", before=oa[name],
                                    after=ob[name]))
    return tuple(out)


def _stages(a: Sequence[Sequence[Any]],
            b: Sequence[Sequence[Any]]) -> tuple[tuple[str, float | None, float | None], ...]:
    sa = {str(s[0]): float(s[1]) for s in a}
    sb = {str(s[0]): float(s[1]) for s in b}
    return tuple((n, sa.get(n), sb.get(n)) for n in list(sa) + [n for n in sb if n not in sa])
