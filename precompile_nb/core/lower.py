"""Stage 2: lower(captured, backend) -> Lowered.

Turns the captured ATen graph into a Python module section that defines `call(args)`:
- eager: the captured graph itself as plain code (mutations and views happen in place, so any
  layout works and nothing needs writing back);
- inductor: functionalized (mutations become extra outputs, results that alias inputs are
  rebuilt by the driver), then AOTAutograd + Inductor in a private compiler cache dir whose
  binaries become the artifact's cache.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import re
import time

import torch

from . import _compat, warm
from ..runtime.convention import AliasOut, GraphOut, InputOut, WriteBack
from .errors import PrecompileError
from .schemas import Captured, KernelInfo, Lowered


def lower(captured: Captured, backend: str) -> Lowered:
    """Lower a captured graph with `backend` ("eager" or "inductor")."""
    if backend == "eager":
        return _lower_eager(captured)
    if backend == "inductor":
        return _lower_inductor(captured)
    raise ValueError(f"precompile: unknown backend {backend!r}; use 'inductor' or 'eager'")


# ---------------------------------------------------------------------------------------------
# eager

_EAGER_PREAMBLE = """\
import functools
import types
import torch
from torch import device
from math import inf, nan
NoneType = type(None)
"""
_FX_GLOBALS = {"torch", "device", "inf", "nan", "NoneType", "fx_pytree", "pytree"}


def _eager_module_source(gm: torch.fx.GraphModule, path: str) -> str:
    """`gm` as plain code: `_pc_eager_graph{suffix}(self, ...)` and an object `self` whose
    attributes are its submodules (the branches of torch.cond, the bodies of other
    higher-order ops), each written the same way, innermost first."""
    suffix = "_" + re.sub(r"\W", "_", path) if path else ""
    code = gm.graph.python_code(root_module="self")
    extra = set(code.globals) - _FX_GLOBALS
    if extra:
        raise PrecompileError(
            "the captured graph calls Python objects that cannot be written as source",
            invariant=4, stage="lower", where=", ".join(sorted(extra)),
            expected="ATen ops only", actual=sorted(extra),
            hint="keep fn to tensor operations; report this as a precompile_nb bug if it is")
    src, n = re.subn(r"\ndef forward\(self(, )?", rf"\ndef _pc_eager_graph{suffix}(self\1",
                     code.src, count=1)
    assert n == 1, "FX codegen changed shape"  # our own invariant, not user input
    parts, children = [], []
    for name, sub in gm.named_children():
        if isinstance(sub, torch.fx.GraphModule):
            child = f"{path}.{name}" if path else name
            parts.append(_eager_module_source(sub, child))
            children.append((name, re.sub(r"\W", "_", child)))
    attrs = "".join(f"_pc_eager_self{suffix}.{name} = functools.partial("
                    f"_pc_eager_graph_{ref}, _pc_eager_self_{ref})\n" for name, ref in children)
    parts.append(src.strip("\n") + "\n\n\n"
                 f"_pc_eager_self{suffix} = types.SimpleNamespace()\n" + attrs)
    return "\n\n".join(parts)


def _lower_eager(c: Captured) -> Lowered:
    t0 = time.perf_counter()
    if c.unbacked:  # mark_dynamic dims run on the eager graph too, with their guards
        raise PrecompileError(
            "dims marked with mark_unbacked need the inductor backend", invariant=3,
            stage="lower", where=", ".join(f"{c.inputs[i].where}.shape[{d}]"
                                           for i, d in sorted(c.unbacked)),
            expected="backend='inductor' with mark_unbacked", actual="backend='eager'",
            hint="use backend='inductor', or mark the dims with torch._dynamo.mark_dynamic "
                 "(which the eager backend serves, with its guards checked per call)")
    source = (_EAGER_PREAMBLE + _eager_module_source(c.graph, "") + "\n\n"
              "def call(args):\n"
              "    return _pc_eager_graph(_pc_eager_self, *args)\n")
    # the eager graph mutates and views its inputs itself: the captured convention holds
    return Lowered(backend="eager", source=source, convention=c.convention, kernels=(),
                   files=(), seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# inductor


def _lower_inductor(c: Captured) -> Lowered:
    t0 = time.perf_counter()
    fgm = _compat.functionalize(c.graph, c.fake_inputs)
    outputs, mutations, grads = _mutations_and_aliases_to_driver(c, fgm)
    unread = _drop_unread_inputs(c, fgm)
    fake_inputs = [n.meta["val"] for n in fgm.graph.nodes if n.op == "placeholder"]
    devices = {t.device for t in c.fake_inputs if isinstance(t, torch.Tensor)}
    device_index = next((d.index or 0 for d in devices if d.type == "cuda"), 0)
    convention = dataclasses.replace(
        c.convention, outputs=tuple(outputs), mutations=tuple(mutations), grads=tuple(grads),
        check_strides=True, device_index=device_index, unread=unread)
    if not next(n for n in reversed(fgm.graph.nodes) if n.op == "output").args[0]:
        # every result is an input, a view of one, or a value: nothing to compile
        return Lowered(backend="inductor", source=_NOTHING_TO_COMPUTE, convention=convention,
                       kernels=(), files=(), seconds=time.perf_counter() - t0)
    cuda = any(isinstance(t, torch.Tensor) and t.device.type == "cuda" for t in fake_inputs)
    launches: dict[str, dict] = {}
    with _compat.private_compile_cache() as cache_dir, (
            _compat.recording_triton_launchers() if cuda else contextlib.nullcontext()):
        try:
            source, inner_gm, compiled = _compat.inductor_compile(
                fgm, fake_inputs, dynamic=c.tracing_mode != "fake")
        except Exception as e:  # noqa: BLE001 - re-raised with the invariant it breaks
            raise _lowering_error(c, e) from e
        if cuda and _autotune_at_precompile(c, fgm):
            _compat.autotune_now(compiled, fake_inputs)
        if cuda:  # how the warm load launches each kernel's one binary (Note [warm CUDA load])
            launches = _compat.triton_launch_records(warm.triton_kernel_vars(source))
        files = _collect_files(cache_dir)
        if any(rel.endswith(".so") for root, rel, _ in files if root == "inductor"):
            files = _with_isa_probes(files, cache_dir)
    source = _compat.strip_inductor_main(source)
    return Lowered(backend="inductor", source=source, convention=convention,
                   kernels=tuple(parse_kernels(source, _op_names(inner_gm, fgm))),
                   files=tuple(files), seconds=time.perf_counter() - t0, launches=launches)


def _autotune_at_precompile(c: Captured, fgm: torch.fx.GraphModule) -> bool:
    """Triton kernels with several configurations pick one by benchmarking at their first
    run: run a CUDA graph once here (issue: no benchmarking at load or first call), for
    static sizes, and not when the graph holds collectives (one rank compiling alone would
    wait for the others forever)."""
    return (c.tracing_mode == "fake"
            and not any(n.op == "call_function" and _compat.is_collective(n.target)
                        for n in fgm.graph.nodes))


_NOTHING_TO_COMPUTE = """\
def call(args):
    # fn's results are its inputs, views of them, or values: the driver builds them
    args.clear()
    return ()
"""


def _drop_unread_inputs(c: Captured, fgm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Graph inputs whose data the graph never reads (it read only their shape at trace
    time, or nothing): removed from the graph, so Inductor neither takes nor asserts their
    layout. The driver still checks them (shape, dtype, device) and writes back into them."""
    g = fgm.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"][:len(c.inputs)]
    unread = tuple(i for i, n in enumerate(placeholders) if not n.users)
    for i in unread:
        g.erase_node(placeholders[i])
    if unread:
        g.lint()
        fgm.recompile()
    return unread


def _mutations_and_aliases_to_driver(c: Captured, fgm: torch.fx.GraphModule):
    """Rewrite the functional graph's boundary so that `call` returns only fresh tensors:
    - copy_(input, new) at the end (input mutation)  -> an extra output the driver copies back;
    - a result that views an input                   -> dropped; the driver rebuilds the view.
    Returns the final result leaves, mutations and grads in `call`'s output numbering."""
    g = fgm.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    out_node = next(n for n in reversed(g.nodes) if n.op == "output")
    outs = list(out_node.args[0])
    mutated: list[tuple[int, torch.fx.Node]] = []
    for n in list(g.nodes):
        if (n.op == "call_function" and n.target is torch.ops.aten.copy_.default
                and n.args[0] in placeholders):
            mutated.append((placeholders.index(n.args[0]), n.args[1]))
            n.replace_all_uses_with(n.args[1])
            g.erase_node(n)
    n_user = c.n_user_outputs
    views = dict(c.aliases)
    new_outs: list[torch.fx.Node] = []
    remap: dict[int, int] = {}
    outputs = []
    for lf in c.convention.outputs:
        if not isinstance(lf, GraphOut):
            outputs.append(lf)
            continue
        k = lf.index
        if k in views:
            outputs.append(_input_view(c, k, views[k]))
            continue
        if k not in remap:
            remap[k] = len(new_outs)
            new_outs.append(outs[k])
        outputs.append(dataclasses.replace(lf, index=remap[k]))
    grads = []
    for w in c.convention.grads:
        grads.append(dataclasses.replace(w, output=len(new_outs)))
        new_outs.append(outs[w.output])
    mutations = []
    for i, node in mutated:
        mutations.append(WriteBack(input=i, output=len(new_outs)))
        new_outs.append(node)
    assert len(outs) == n_user + len(c.convention.grads), "captured outputs changed shape"
    out_node.args = (tuple(new_outs),)
    g.eliminate_dead_code()
    g.lint()
    fgm.recompile()
    return outputs, mutations, grads


def _input_view(c: Captured, k: int, view: AliasOut) -> InputOut | AliasOut:
    """Result #k views an input: the driver returns the input itself, or rebuilds the view
    on the runtime input (invariant 4: aliases stay aliases)."""
    spec = c.inputs[view.index] if view.index < len(c.inputs) else None
    if any(not isinstance(d, int) for d in view.size + view.stride + (view.offset,)):
        raise PrecompileError(
            "a result views an input whose size is dynamic", invariant=4, stage="lower",
            where=f"result #{k} views {spec.where if spec else view.index}",
            expected="results that view inputs have static sizes",
            actual=f"view size {list(view.size)}", hint="return a .clone() of it instead")
    if spec is not None and (spec.shape, spec.stride, 0) == (view.size, view.stride,
                                                             view.offset):
        return InputOut(index=view.index)
    return view


def _op_names(*gms: torch.fx.GraphModule) -> LoweredGraph:
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


def _collect_files(cache_dir: str) -> list[tuple[str, str, bytes]]:
    """Every compiled artifact of this compile: (root, relative path, bytes). Root
    'inductor' is the inductor cache dir, 'triton' the Triton cache dir (inside it for a
    private compile)."""
    files = []
    triton_root = os.path.join(cache_dir, "triton")
    for dirpath, _, filenames in os.walk(cache_dir):
        for fname in filenames:
            full = os.path.join(dirpath, fname)
            if fname.endswith(".lock") or fname.endswith(".tmp"):
                continue
            if full.startswith(triton_root + os.sep):
                root, rel = "triton", os.path.relpath(full, triton_root)
                # triton/<device index>/<hash>/... when TRITON_CACHE_DIR was derived
            else:
                root, rel = "inductor", os.path.relpath(full, cache_dir)
                if rel.split(os.sep)[0] in _compat.SKIP_CACHE_PARTS:
                    continue
            with open(full, "rb") as f:
                files.append((root, rel.replace(os.sep, "/"), f.read()))
    files.sort(key=lambda x: (x[0], x[1]))
    return files


# (relative path, bytes) of the CPU ISA probe binaries, kept from the first compile of this
# process that built them: later compiles find the answers in memory and build none.
_ISA_PROBES: dict[str, bytes] = {}


def _isa_probe_files(files: list[tuple[str, str, bytes]], sources: frozenset[bytes],
                     ) -> dict[str, bytes]:
    """The probe sources and what was built from them (same stem: the library, and torch
    2.14's `.so.load_ok` marker that spares a fresh process the probe) among `files`."""
    cpp = {rel[:-len(".cpp")]: data for root, rel, data in files
           if root == "inductor" and rel.endswith(".cpp")}
    return {rel: data for root, rel, data in files
            if root == "inductor" and cpp.get(rel.split(".", 1)[0]) in sources}


def _with_isa_probes(files: list[tuple[str, str, bytes]], cache_dir: str,
                     ) -> list[tuple[str, str, bytes]]:
    """The artifact's files plus the ISA probe binaries a fresh process needs before it can
    use any C++ kernel, so that loading it runs no C++ compiler."""
    sources = _compat.isa_probe_sources()
    found = _isa_probe_files(files, sources)
    if not found and not _ISA_PROBES:
        # this process probed before any private compile (e.g. a torch.compile earlier in
        # the notebook): probe once more as a fresh process would, into this compile's dir
        _compat.run_isa_probes_fresh(cache_dir)
        found = _isa_probe_files(_collect_files(cache_dir), sources)
    _ISA_PROBES.update(found)
    have = {rel for root, rel, _ in files if root == "inductor"}
    extra = [("inductor", rel, data) for rel, data in _ISA_PROBES.items() if rel not in have]
    return sorted(files + extra, key=lambda x: (x[0], x[1]))


def _lowering_error(c: Captured, e: Exception) -> PrecompileError:
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else type(e).__name__
    unbacked = [s for s in c.inputs if s.dynamic]
    if unbacked and ("data-dependent" in str(e) or "GuardOnDataDependent" in type(e).__name__
                     or "unbacked" in str(e).lower() or "guard" in str(e).lower()):
        s = unbacked[0]
        return PrecompileError(
            f"{c.fn_name}: the graph needs to branch on a dynamic dimension", invariant=3,
            stage="lower", where=f"{s.where} dim(s) {sorted(s.dynamic)}",
            expected="a graph that works for every size of the dynamic dim",
            actual=first, hint="remove the size-dependent branch, or do not mark that "
            "dimension with mark_unbacked")
    return PrecompileError(
        f"{c.fn_name}: Inductor could not lower the captured graph", stage="lower",
        where=type(e).__name__, expected="a graph Inductor can compile", actual=first,
        hint="try backend='eager' to run the captured graph as-is, and report the "
             "failing op")


# ---------------------------------------------------------------------------------------------
# kernels, as plain data for the report

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
    (Note [kernel provenance]); `known` is the lowered graph (_op_names), or only op names,
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
