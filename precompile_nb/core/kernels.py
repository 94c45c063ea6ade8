"""Lowering, the kernels as plain data for the report: which graph nodes each kernel that
Inductor wrote computes (Note [kernel provenance]). Reads the generated source; compiles
nothing.
"""
from __future__ import annotations

import ast
import dataclasses
import re

import torch

from . import _compat
from .schemas import KernelInfo

# Note [kernel provenance]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# Which graph nodes does each kernel compute? Inductor's module says it only in part: above a
# Triton kernel and an extern call it writes `# Topologically Sorted Source Nodes: [...]`
# (the functional graph's node names, which capture's names are, except where
# functionalization rewrote an in-place op), but above a C++ kernel it writes nothing, and an
# extern call's list also names nodes whose results it only reads (the second addmm of an MLP
# lists the gelu before it). So the kernels are read from the wrapper's `call` as a program:
# - an extern call computes the listed nodes that run its op (addmm for extern_kernels.addmm),
#   with the views folded into its arguments (reinterpret_tensor) and the items picked out of
#   its result;
# - a Triton kernel computes the listed nodes (that list is exact: Inductor's fused nodes);
# - a C++ kernel computes the nodes of the lowered graph whose pre-decomposition op is in its
#   name (cpp_fused_gelu_0: gelu) and whose inputs are in the buffers it reads or computed by
#   it, in graph order; a node an earlier kernel computed is not claimed again.
# Every buffer a kernel writes then holds the nodes it computed, for the kernels after it. The
# lowered graph's nodes name their functional-graph node in node.meta["from_node"].

_KERNEL_DEF = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*) = async_compile\.(?P<kind>cpp_pybinding|cpp|triton)\(",
    re.M)
_SOURCE_NODES = re.compile(
    r"#\s*Topologically Sorted Source Nodes: \[(?P<nodes>[^\]]*)\], Original ATen: "
    r"\[(?P<ops>[^\]]*)\]")
# the parameter list of a C++ kernel (`extern "C" void kernel(const float* in_ptr0, ...)`)
# or a Triton one (`def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : ...)`)
_KERNEL_PARAMS = re.compile(r'(?:extern "C"\s+void\s+kernel|\ndef \w+)\(([^)]*)\)')
_EXTERN_PREFIXES = ("extern_kernels.", "torch.ops.", "aten.")
_FRESH_BUFFERS = re.compile(r"^(empty_strided\w*|empty|torch\.empty\w*)$")


@dataclasses.dataclass(frozen=True)
class LoweredNode:
    """A node of the graph Inductor lowered (after AOTAutograd's decompositions)."""

    name: str  # "mul_2"
    op: str  # the op it runs, "mul"; "" for placeholders and the output
    aten: str  # the op before decomposition, "gelu": what fused kernels are named after
    source: str  # the functional graph's node it came from, "gelu" (what the comments name)
    args: tuple[str, ...]  # its input nodes
    free: bool  # a view or a getitem: computes nothing itself


@dataclasses.dataclass(frozen=True)
class LoweredGraph:
    """The lowered graph as plain records, and the ATen op names of every graph given."""

    ops: frozenset[str]
    nodes: tuple[LoweredNode, ...]  # in graph (topological) order


def _lowered_node(n: torch.fx.Node) -> LoweredNode:
    target = n.target
    op = ""
    if n.op == "call_function":
        op = getattr(target, "__name__", str(target)).split(".")[0]
    orig = n.meta.get("original_aten")
    aten = orig._overloadpacket.__name__ if isinstance(orig, torch._ops.OpOverload) else op
    from_node = n.meta.get("from_node")
    source = from_node[0].name if from_node else n.name
    free = op == "getitem" or (isinstance(target, torch._ops.OpOverload) and target.is_view)
    return LoweredNode(name=n.name, op=op, aten=aten, source=source,
                       args=tuple(a.name for a in n.all_input_nodes), free=free)


def lowered_graph(*gms: torch.fx.GraphModule) -> LoweredGraph:
    """The first of `gms` (the graph Inductor lowered) as plain records, with the ATen op names
    of all of them: what parse_kernels reads each kernel's graph nodes from (Note [kernel
    provenance])."""
    names = set()
    for gm in gms:
        for n in gm.graph.nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                base = n.target.__name__.split(".")[0]
                names.add(base)
                names.add(base.lstrip("_"))
    nodes = tuple(_lowered_node(n) for n in gms[0].graph.nodes) if gms else ()
    return LoweredGraph(ops=frozenset(names), nodes=nodes)


@dataclasses.dataclass
class _Call:
    """One kernel call in the wrapper's `call`."""

    kernel: str  # the kernel's name, or the extern call ("extern_kernels.addmm")
    kind: str  # "cpp" / "triton" / "extern"
    reads: list[str]  # buffers it reads
    writes: list[str]  # buffers it writes
    listed: tuple[list[str], list[str]] | None  # the Source Nodes comment above it: nodes, ops


def parse_kernels(source: str, known: LoweredGraph | set[str] = frozenset()
                  ) -> list[KernelInfo]:
    """The kernels Inductor generated, each with the ATen ops and graph nodes it computes
    (Note [kernel provenance]); `known` is the lowered graph (lowered_graph), or only op names,
    then the nodes come from Inductor's comments alone (2.11-2.14 module layout).

    >>> parse_kernels("x = 1\\n")
    []
    """
    graph = known if isinstance(known, LoweredGraph) else LoweredGraph(
        ops=frozenset(known), nodes=())
    defs: dict[str, tuple[str, int]] = {}
    for m in _KERNEL_DEF.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        kind = "triton" if m.group("kind") == "triton" else "cpp"
        defs[m.group("name")] = (kind, line)
    calls = _wrapper_calls(source, defs)
    computed = _attribute(calls, graph, _kernel_params(source, defs))
    fused: dict[str, list[LoweredNode]] = {}
    listed: dict[str, tuple[list[str], list[str]]] = {}
    extern: list[KernelInfo] = []
    for call, nodes in zip([e for e in calls if isinstance(e, _Call)], computed):
        if call.kind == "extern":
            if call.listed is None:
                continue  # no comment: a call Inductor made for itself, not for graph nodes
            ops, names = _describe(nodes) if nodes else (call.listed[1], call.listed[0])
            extern.append(KernelInfo(name=call.kernel, kind="extern", fused_ops=tuple(ops),
                                     source_nodes=tuple(names), line=0))
            continue
        got = fused.setdefault(call.kernel, [])
        got.extend(n for n in nodes if n not in got)
        if call.listed is not None:
            listed.setdefault(call.kernel, call.listed)
    out = []
    for name, (kind, line) in defs.items():
        nodes = sorted(fused.get(name, []), key=graph.nodes.index)
        if nodes:
            ops, names = _describe(nodes)
        else:  # no lowered graph to read, or nothing found: the comment, else the name
            names, ops = listed.get(name, ([], []))
            ops = ops or list(_ops_from_name(name, set(graph.ops)))
        out.append(KernelInfo(name=name, kind=kind, fused_ops=tuple(ops),
                              source_nodes=tuple(names), line=line))
    return out + extern


def _describe(nodes: list[LoweredNode]) -> tuple[list[str], list[str]]:
    """(ATen ops, functional-graph node names) of lowered nodes, in order, each once."""
    ops = list(dict.fromkeys(f"aten.{n.aten}" for n in nodes if n.op and n.aten))
    return ops, list(dict.fromkeys(n.source for n in nodes if n.op))


def _kernel_params(source: str, defs: dict[str, tuple[str, int]]
                   ) -> dict[str, list[tuple[str, bool, bool]]]:
    """Each kernel's parameters as (name, reads, writes): in_ptr reads, out_ptr writes,
    in_out_ptr both; sizes and block sizes neither."""
    starts = sorted((line, name) for name, (_, line) in defs.items())
    lines = source.splitlines(keepends=True)
    out = {}
    for k, (line, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines) + 1
        m = _KERNEL_PARAMS.search("".join(lines[line - 1:end - 1]))
        params = []
        for p in (m.group(1).split(",") if m else ()):
            ident = re.findall(r"[A-Za-z_]\w*", p.split(":")[0])
            pname = ident[-1] if ident else ""
            params.append((pname, pname.startswith(("in_ptr", "in_out_ptr")),
                           pname.startswith(("out_ptr", "in_out_ptr"))))
        out[name] = params
    return out


def _wrapper_calls(source: str, defs: dict[str, tuple[str, int]]) -> list[_Call | tuple]:
    """The wrapper's `call` as a list of kernel calls (_Call) and buffer bindings
    (("bind", target, sources): target now holds what the sources held)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == "call"), None)
    if fn is None:
        return []
    lines = source.splitlines()
    events: list[_Call | tuple] = []
    prev_end = fn.body[0].lineno - 1 if fn.body else fn.lineno
    for st in _statements(fn.body):
        listed = None
        for ln in lines[prev_end:st.lineno - 1]:
            m = _SOURCE_NODES.search(ln)
            if m:
                listed = ([x.strip() for x in m.group("nodes").split(",") if x.strip()],
                          [x.strip() for x in m.group("ops").split(",") if x.strip()])
        prev_end = st.end_lineno or st.lineno
        event = _event(st, defs, listed)
        if event is not None:
            events.append(event)
    return events


def _statements(body: list[ast.stmt]):
    for st in body:
        if isinstance(st, (ast.With, ast.If, ast.For)):  # device guards, streams
            yield from _statements(st.body)
        else:
            yield st


def _buffer(e: ast.expr) -> str | None:
    """The buffer an argument passes: `buf3`, or the one under reinterpret_tensor(buf3, ...)."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.args and \
            e.func.id in ("reinterpret_tensor", "as_strided"):
        return _buffer(e.args[0])
    if isinstance(e, ast.Subscript):
        return _buffer(e.value)
    return None


def _event(st: ast.stmt, defs: dict[str, tuple[str, int]],
           listed: tuple[list[str], list[str]] | None) -> _Call | tuple | None:
    if isinstance(st, ast.Assign) and len(st.targets) == 1:
        target, value = st.targets[0], st.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Name) and value.id == "args":
            return ("args", [e.id for e in target.elts if isinstance(e, ast.Name)])
        if not isinstance(target, ast.Name):
            return None
        if isinstance(value, ast.Call):
            func = ast.unparse(value.func)
            if func.startswith(_EXTERN_PREFIXES):
                return _extern(func, value, [target.id], listed)
            if _FRESH_BUFFERS.match(func):
                return ("bind", target.id, [])
        src = _buffer(value)
        return ("bind", target.id, [src] if src else [])
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
        call = st.value
        func = ast.unparse(call.func)
        name = func[:-len(".run")] if func.endswith(".run") else func
        if name in defs:
            return _Call(kernel=name, kind=defs[name][0], listed=listed,
                         reads=[_buffer(a) or "" for a in call.args], writes=[])
        if func.startswith(_EXTERN_PREFIXES):
            out = [_buffer(k.value) for k in call.keywords if k.arg == "out"]
            return _extern(func, call, [b for b in out if b], listed)
    return None


def _extern(func: str, call: ast.Call, writes: list[str],
            listed: tuple[list[str], list[str]] | None) -> _Call:
    reads = [b for b in (_buffer(a) for a in call.args) if b]
    reads += [b for b in (_buffer(k.value) for k in call.keywords if k.arg != "out") if b]
    return _Call(kernel=func, kind="extern", reads=reads, writes=writes, listed=listed)


def _attribute(events: list[_Call | tuple], graph: LoweredGraph,
               params: dict[str, list[tuple[str, bool, bool]]]) -> list[list[LoweredNode]]:
    """The lowered nodes each kernel call computes, in the order of the calls (Note [kernel
    provenance])."""
    by_name = {n.name: n for n in graph.nodes}
    holds: dict[str, frozenset[str]] = {}  # buffer -> lowered nodes it may hold
    taken: set[str] = set()
    out: list[list[LoweredNode]] = []
    for ev in events:
        if isinstance(ev, tuple):
            if ev[0] == "args":
                holds.update({a: frozenset([a]) for a in ev[1]})
            else:
                holds[ev[1]] = frozenset().union(*(holds.get(s, frozenset()) for s in ev[2]))
            continue
        if ev.kind == "cpp" and params.get(ev.kernel):
            pairs = list(zip(ev.reads, params[ev.kernel]))
            ev.writes = [b for b, (_, _, w) in pairs if w and b]
            ev.reads = [b for b, (_, r, _) in pairs if r and b]
        elif ev.kind == "triton" and params.get(ev.kernel):
            pairs = list(zip(ev.reads, params[ev.kernel]))
            ev.writes = [b for b, (_, _, w) in pairs if w and b]
        if ev.kind == "extern":
            nodes = _extern_nodes(graph, ev) if ev.listed else []
        elif ev.kind == "triton":
            roots = set(ev.listed[0]) if ev.listed else set()
            nodes = [n for n in graph.nodes if n.op and n.source in roots]
        else:
            avail = set().union(*(holds.get(b, frozenset()) for b in ev.reads))
            ops = _name_ops(ev.kernel, graph.ops)
            nodes = _claim(graph, by_name, ops, avail, taken)
            if not nodes:  # what it reads is unknown (an uncommented call made it): anything
                # computed before it, or any graph input, may be its input
                known = taken | {n.name for n in graph.nodes if not n.op}
                nodes = _claim(graph, by_name, ops, known, taken)
        taken.update(n.name for n in nodes)
        for b in ev.writes:
            holds[b] = frozenset(n.name for n in nodes)
        out.append(nodes)
    return out


def _name_ops(kernel: str, known: frozenset[str]) -> set[str]:
    return {o[len("aten."):] for o in _ops_from_name(kernel, set(known)) if o.startswith("aten.")}


def _extern_nodes(graph: LoweredGraph, call: _Call) -> list[LoweredNode]:
    """The listed nodes an extern call computes: those running its op (the others listed
    only feed it), the views of its arguments and the items picked out of its result."""
    roots = set(call.listed[0]) if call.listed else set()
    listed = [n for n in graph.nodes if n.op and n.source in roots]
    op = call.kernel.split(".")[-2 if call.kernel.startswith(("torch.ops.", "aten.")) else -1]
    main = {n.name for n in listed if n.op == op} or {n.name for n in listed if not n.free}
    keep = set(main)
    by_name = {n.name: n for n in listed}
    frontier = list(main)
    while frontier:  # views folded into its arguments (reinterpret_tensor)
        for a in by_name[frontier.pop()].args:
            if a in by_name and by_name[a].free and a not in keep:
                keep.add(a)
                frontier.append(a)
    for n in listed:  # items picked out of a tuple result
        if n.free and n.name not in keep and any(a in main for a in n.args):
            keep.add(n.name)
    return [n for n in listed if n.name in keep]


def _claim(graph: LoweredGraph, by_name: dict[str, LoweredNode], ops: set[str],
           avail: set[str], taken: set[str]) -> list[LoweredNode]:
    """The nodes a C++ kernel computes: not computed before, of an op in its name, and whose
    inputs it reads or computes itself (views of those count), in graph order."""
    have = set(avail)
    got = []
    for n in graph.nodes:
        if not n.op or n.name in taken or (n.aten not in ops and n.op not in ops):
            continue
        if all(_ready(a, have, by_name) for a in n.args):
            got.append(n)
            have.add(n.name)
    return got


def _ready(name: str, have: set[str], by_name: dict[str, LoweredNode]) -> bool:
    if name in have:
        return True
    n = by_name.get(name)
    return (n is not None and n.free and bool(n.args)
            and all(_ready(a, have, by_name) for a in n.args))


_KERNEL_PREFIX = re.compile(r"^(cpp|triton)_(?:[a-z]+_)?fused_")


def _ops_from_name(name: str, known: set[str]) -> tuple[str, ...]:
    """Inductor names a fused kernel after the ops in it (cpp_fused_add_relu_0): split the
    name back into ATen op names, longest match first, where a match is an op of the lowered
    graph or any ATen op (a fallback where no source-node comment precedes the kernel's
    call)."""
    body = _KERNEL_PREFIX.sub("", name)
    if body == name:
        return ()
    tokens = [t for t in re.sub(r"_\d+$", "", body).split("_")]
    out, i = [], 0
    while i < len(tokens):
        if not tokens[i]:
            i += 1
            continue
        for j in range(len(tokens), i, -1):
            words = tokens[i:j]
            cands = ["_".join(words)]
            if i > 0 and not tokens[i - 1]:
                cands.insert(0, "_" + cands[0])  # a leading underscore: _native_batch_norm...
            hit = next((c for c in cands if c in known or _compat.is_aten_op(c)), None)
            if hit is not None:
                out.append("aten." + hit)
                i = j
                break
        else:
            out.append(tokens[i])
            i += 1
    return tuple(dict.fromkeys(out))
