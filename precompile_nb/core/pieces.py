"""Lowering, in pieces: a large graph cut into consecutive parts that Inductor compiles at the
same time, each in a worker process, joined back into one module that runs them in turn
(Note [a graph compiled in pieces]). lower.py calls `compile_in_pieces`; the workers run
`python -m precompile_nb.core.pieces`.
"""
from __future__ import annotations

import dataclasses
import operator
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from . import _compat
from .schemas import KernelInfo

# Note [a graph compiled in pieces]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Most of a cold precompile of a large graph is Inductor's own Python (lowering, fusion, code
# generation: tv_resnet18's training step on the H200 spent ~40 of its 57 s there), on one
# thread; torch.compile pays the same, for its forward and then its backward graph. But
# precompile holds the whole step as one graph before Inductor sees it, so it can cut it and
# let several processes lower it at once:
# - The compute nodes, in graph order, are cut into K consecutive runs of about the same size,
#   each cut moved, within a window, to where the fewest bytes are live across it.
# - A view (a node whose result shares storage with what it reads) goes with the node it
#   views; a piece that reads a view made in another piece, or a view of an input, makes the
#   view itself from its base. So every value that crosses a cut is a fresh tensor, never an
#   alias of another, as a graph's results must be for Inductor's code to return them as they
#   are. An item of a node with several results goes with that node.
# - Each run becomes a graph of its own: its inputs are the graph's inputs it reads and the
#   values earlier pieces made, its results what later pieces and fn's results need. Each is
#   compiled by `python -m precompile_nb.core.pieces` in its own process, all at once, into
#   the one private compile dir, its kernels named apart (`_p1_` before the number).
# - The pieces' modules are joined into one (_compat.join_modules): one header, all kernels,
#   each piece's `call` under its own name, and a `call` that runs them in turn and drops
#   every value after its last reader. Load, the warm path and the report read it as any
#   other module; each kernel's report entry is read from its own piece's module.
# - Each piece asserts its inputs' sizes and strides, as any Inductor module does; a value
#   the producing piece returns in other strides than the reading piece was compiled for
#   is found from the workers' answers, before anything runs, and the graph is compiled in
#   one piece instead.
# Opt-in: PRECOMPILE_NB_PIECES=K asks for K pieces; unset (or 1), one piece, as before. The
# automatic choice this started with (300 compute nodes and 4 cores per piece) did not pay on
# the H200 host (16 cores), measured with benchmarks/cold_split.py (h200_round10/): a worker
# is a fresh process that needs 6.5 s to import torch and start its compile pool, 12 s when
# it also warms Inductor up beside three others and the parent's own pool, and each piece's
# compile then pays Inductor's first-compile set-up again, so t5's training step (1400 compute
# nodes) took 28.6 s in four pieces against 29.0 s in one (torch.compile 27.9 s), Swin's
# (810) 49.4 s in two against 51.6 s in one; the step was the same (8.69 / 8.75 ms,
# 8.31 / 8.32 ms). It stays for a larger graph or a machine with more cores per piece.
# Where it is sound: sizes static (a cut would carry symbolic sizes), no collectives, no
# data guards, only ATen ops, and convolutions only where Inductor would keep them in eager's
# layout anyway (its rule, asked of the whole graph: a ViT's one patch convolution among
# hundreds of nodes); each piece is then compiled with layout optimization off, so a small
# piece holding that convolution does not decide otherwise. A CNN, whose convolutions
# Inductor runs in channels_last from the whole graph's choice, compiles in one piece.
# Anything else, or a worker that fails, and the graph is compiled in one piece, in this
# process, as before; the report says how it was compiled and why. Random ops are cut like
# any other: each piece draws its seeds from torch's global generator at every call, as one
# graph does (repeatable under torch.manual_seed; the draws are Inductor's own either way).
# The price: Inductor fuses nothing across a cut (K-1 places where a value is written and
# read back), measured beside the compile time by benchmarks/cold_split.py --steady.
ENV = "PRECOMPILE_NB_PIECES"


class Ref(NamedTuple):
    """A value a piece reads, or one of the graph's results: the graph's input `index`
    (piece == -1), or result `index` of piece `piece`."""

    piece: int
    index: int


class _Name(NamedTuple):
    """A reference to the node of that name inside a node record's arguments."""

    name: str


class NodeRec(NamedTuple):
    """One node of a piece as plain, picklable data."""

    name: str
    op: str  # "placeholder" / "call_function" / "output"
    target: tuple[str, str] | None  # ("aten::add", "Tensor"); ("", "getitem"); None
    args: Any  # node references as _Name
    kwargs: Any


class InputMeta(NamedTuple):
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device


@dataclasses.dataclass(frozen=True)
class Piece:
    """One consecutive part of the graph, as a graph of its own."""

    nodes: tuple[NodeRec, ...]
    inputs: tuple[Ref, ...]  # where each of its inputs comes from
    metas: tuple[InputMeta, ...]  # each input's size, stride, dtype and device
    n_outputs: int


@dataclasses.dataclass(frozen=True)
class Cut:
    """The graph cut into pieces."""

    pieces: tuple[Piece, ...]
    results: tuple[Ref, ...]  # the graph's results


@dataclasses.dataclass(frozen=True)
class Joined:
    """The graph compiled in pieces: one module, its kernels, and how it was done."""

    source: str
    kernels: tuple[KernelInfo, ...]
    pieces: int
    run: Callable[..., Any] | None  # the module's call, loaded (CUDA graphs: to autotune)
    # per worker, seconds from its start until it was ready, had its piece, had compiled it
    workers: tuple[tuple[float, float, float], ...]


def how_many(gm: torch.fx.GraphModule) -> tuple[int, str]:
    """How many pieces to compile `gm` in, and why (Note [a graph compiled in pieces]): as
    many as PRECOMPILE_NB_PIECES asks, else one; one where Inductor lays convolutions out in
    channels_last, which it decides from the whole graph."""
    asked = os.environ.get(ENV, "").strip()
    if not asked:
        return 1, f"{ENV} is not set: compiling in pieces is opt-in"
    try:
        k = int(asked)
    except ValueError:
        return 1, f"{ENV}={asked!r} is not a number"
    if k < 2:
        return 1, f"{ENV}={k}"
    fakes = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    if _compat.layout_optimized(gm, fakes):
        return 1, ("Inductor lays the graph's convolutions out in channels_last, deciding from "
                   "the whole graph")
    nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function" and not _is_free(n))
    return max(1, min(k, nodes)), f"{ENV}={k}"


# ---- the cut --------------------------------------------------------------------------------

def _writes(n: torch.fx.Node) -> bool:
    schema = getattr(n.target, "_schema", None)
    return schema is not None and any(a.alias_info is not None and a.alias_info.is_write
                                      for a in schema.arguments)


def _base(n: torch.fx.Node) -> torch.fx.Node | None:
    """The node whose storage n's result shares (n a view, or an item of a view op), or
    None where n's result is a fresh tensor (an op that writes its input is not a view)."""
    if n.op != "call_function" or _writes(n):
        return None
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    src = n.args[0] if n.target is operator.getitem and isinstance(n.args[0],
                                                                   torch.fx.Node) else n
    key = _compat.storage_key(val)
    for a in src.all_input_nodes:
        av = a.meta.get("val")
        if isinstance(av, torch.Tensor) and _compat.storage_key(av) == key:
            return a
    return None


def _is_free(n: torch.fx.Node) -> bool:
    return n.target is operator.getitem or _base(n) is not None


def _why_not(gm: torch.fx.GraphModule) -> str | None:
    """Why `gm` cannot be cut soundly, or None."""
    for n in gm.graph.nodes:
        if n.op in ("get_attr", "call_module", "call_method"):
            return f"the graph holds a {n.op} node ({n.name})"
        if n.op != "call_function":
            continue
        t = n.target
        if t is not operator.getitem and not isinstance(t, torch._ops.OpOverload):
            return f"{n.name} runs {getattr(t, '__name__', t)}, not an ATen op"
        if _compat.is_collective(t):
            return f"{n.name} is a collective"
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        vals = val if isinstance(val, (tuple, list)) else [val]
        for v in vals:
            if isinstance(v, torch.Tensor) and not all(
                    isinstance(x, int) for x in (*v.shape, *v.stride())):
                return f"{n.name} has symbolic sizes"
            if isinstance(v, torch.SymInt):
                return f"{n.name} is a symbolic size"
    return None


def _home(n: torch.fx.Node, home: dict[torch.fx.Node, int]) -> int | None:
    """The piece a free node goes with: its base's (its producer's, for an item)."""
    seen = n
    while seen not in home:
        nxt = (seen.args[0] if seen.target is operator.getitem else _base(seen)) \
            if seen.op == "call_function" else None
        if not isinstance(nxt, torch.fx.Node):
            return None
        seen = nxt
    return home[seen]


def _cuts(compute: list[torch.fx.Node], k: int) -> list[int]:
    """Where to cut the compute nodes into k runs: near each even split, where the fewest
    bytes are live across the cut (a value counts from its node to its last reader)."""
    pos = {n: i for i, n in enumerate(compute)}
    live = [0] * (len(compute) + 2)
    for i, n in enumerate(compute):
        last = i
        stack, seen = list(n.users), set(n.users)
        while stack:
            u = stack.pop()
            if u in pos:
                last = max(last, pos[u])
            elif u.op == "output":
                last = len(compute)
            else:  # a view or an item: its readers read n
                stack.extend(v for v in u.users if v not in seen)
                seen.update(u.users)
        val = n.meta.get("val")
        size = val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0
        if last > i:
            live[i + 1] += size
            live[last + 1] -= size
    for i in range(1, len(live)):
        live[i] += live[i - 1]
    step = len(compute) / k
    window = max(1, int(step // 4))
    cuts = [0]
    for j in range(1, k):  # each cut after the one before, leaving a node for each piece after
        mid = round(j * step)
        lo = max(cuts[-1] + 1, mid - window)
        hi = max(lo, min(len(compute) - (k - j), mid + window))
        cuts.append(min(range(lo, hi + 1), key=lambda c: (live[c], abs(c - mid))))
    return cuts[1:]


class _NoCut(Exception):
    """The graph cannot be cut soundly; the message says why."""


def _target(t: Any) -> tuple[str, str]:
    if t is operator.getitem:
        return ("", "getitem")
    return (t._schema.name, t._overloadname)


def _meta(n: torch.fx.Node) -> InputMeta:
    v = n.meta.get("val")
    if not isinstance(v, torch.Tensor):
        raise _NoCut(f"{n.name}, read across a cut, is not a tensor")
    return InputMeta(tuple(v.shape), tuple(v.stride()), v.dtype, v.device)


class _Builder:
    """The node records of piece `p`: its own nodes in graph order, the views it reads made
    again from their bases, and an input for every other value it reads."""

    def __init__(self, p: int, homes: dict[torch.fx.Node, int | None],
                 placeholders: dict[torch.fx.Node, int], outputs: list[list[torch.fx.Node]]):
        self.p, self.homes, self.placeholders, self.outputs = p, homes, placeholders, outputs
        self.recs: list[NodeRec] = []
        self.inputs: list[Ref] = []
        self.metas: list[InputMeta] = []
        self.have: set[torch.fx.Node] = set()

    def _input(self, n: torch.fx.Node, ref: Ref) -> None:
        self.metas.append(_meta(n))
        self.recs.append(NodeRec(n.name, "placeholder", None, (), {}))
        self.inputs.append(ref)
        self.have.add(n)

    def value(self, n: torch.fx.Node) -> None:
        if n in self.have:
            return
        if n.op == "placeholder":
            self._input(n, Ref(-1, self.placeholders[n]))
        elif _base(n) is not None and self.homes.get(n) != self.p:
            self.copy(n)  # a view made elsewhere, or of an input: made here from its base
        else:
            q = self.homes.get(n)
            if q is None or q >= self.p:  # our own invariant: pieces read only earlier ones
                raise _NoCut(f"{n.name} is read before it is made")
            if n not in self.outputs[q]:
                self.outputs[q].append(n)
            self._input(n, Ref(q, self.outputs[q].index(n)))

    def copy(self, n: torch.fx.Node) -> None:
        for a in n.all_input_nodes:
            self.value(a)
        name = torch.fx.node.map_arg
        self.recs.append(NodeRec(n.name, "call_function", _target(n.target),
                                 name(n.args, lambda a: _Name(a.name)),
                                 name(n.kwargs, lambda a: _Name(a.name))))
        self.have.add(n)


def split(gm: torch.fx.GraphModule, k: int) -> Cut:
    """`gm` cut into `k` pieces (Note [a graph compiled in pieces]); _NoCut says why not."""
    why = _why_not(gm)
    if why is not None:
        raise _NoCut(why)
    nodes = list(gm.graph.nodes)
    placeholders = {n: i for i, n in enumerate(n for n in nodes if n.op == "placeholder")}
    compute = [n for n in nodes if n.op == "call_function" and not _is_free(n)]
    if len(compute) < 2 * k:
        raise _NoCut(f"{len(compute)} compute nodes are too few for {k} pieces")
    bounds = [0, *_cuts(compute, k), len(compute)]
    home = {n: p for p in range(k) for n in compute[bounds[p]:bounds[p + 1]]}
    for n in compute:  # a node reading what is not a tensor (a profiler range's handle)
        for a in n.all_input_nodes:  # goes with the node that made it
            if a in home and not isinstance(a.meta.get("val"), torch.Tensor):
                home[n] = home[a]
    homes = {n: _home(n, home) for n in nodes if n.op == "call_function"}
    outputs: list[list[torch.fx.Node]] = [[] for _ in range(k)]
    builders = []
    for p in range(k):
        b = _Builder(p, homes, placeholders, outputs)
        for n in nodes:
            if n.op == "call_function" and homes[n] == p:
                b.copy(n)
        builders.append(b)
    out = next(n for n in reversed(nodes) if n.op == "output")
    results = []
    for r in torch.utils._pytree.tree_leaves(out.args[0]):
        q = homes.get(r) if isinstance(r, torch.fx.Node) else None
        if q is None:
            raise _NoCut(f"result {r} is not computed by the graph")
        if r not in outputs[q]:
            outputs[q].append(r)
        results.append(Ref(q, outputs[q].index(r)))
    pieces = tuple(Piece(nodes=(*b.recs, NodeRec("output", "output", None, (tuple(
        _Name(v.name) for v in outputs[p]),), {})), inputs=tuple(b.inputs),
        metas=tuple(b.metas), n_outputs=len(outputs[p])) for p, b in enumerate(builders))
    return Cut(pieces=pieces, results=tuple(results))


def piece_graph(piece: Piece) -> torch.fx.GraphModule:
    """A piece's records as a graph again, its nodes named as in the whole graph."""
    g = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}

    def arg(a: Any) -> Any:
        if isinstance(a, _Name):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        if isinstance(a, dict):
            return {k: arg(v) for k, v in a.items()}
        return a

    for r in piece.nodes:
        if r.op == "placeholder":
            env[r.name] = g.placeholder(r.name)
        elif r.op == "output":
            g.output(arg(r.args[0]))
        else:
            ns, name = r.target
            if ns == "":
                target: Any = operator.getitem
            else:
                lib, op = ns.split("::")
                packet = getattr(getattr(torch.ops, lib), op)
                target = getattr(packet, name or "default")
            env[r.name] = g.create_node("call_function", target, arg(r.args), arg(r.kwargs),
                                        name=r.name)
    return torch.fx.GraphModule(torch.nn.Module(), g)


# ---- the joined module ------------------------------------------------------------------------

def _call_name(p: int) -> str:
    return f"call_piece{p}"


def top_call(s: Cut) -> str:
    """The joined module's `call`: each piece in turn on the graph's inputs and earlier
    pieces' results, each value dropped after its last reader."""
    def ref(r: Ref) -> str:
        return f"_pc_in[{r.index}]" if r.piece < 0 else f"_pc_{r.piece}_{r.index}"

    last: dict[Ref, int] = {}
    for p, piece in enumerate(s.pieces):
        for r in piece.inputs:
            if r.piece >= 0:
                last[r] = p
    keep = set(s.results)
    lines = ["def call(args):", "    _pc_in = list(args)", "    args.clear()"]
    for p, piece in enumerate(s.pieces):
        call = f"{_call_name(p)}([{', '.join(ref(r) for r in piece.inputs)}])"
        if piece.n_outputs:
            names = ", ".join(ref(Ref(p, i)) for i in range(piece.n_outputs))
            call = f"({names},) = {call}"
        lines.append("    " + call)
        dead = [ref(r) for r, q in last.items() if q == p and r not in keep]
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    lines.append(f"    return ({''.join(ref(r) + ', ' for r in s.results)})")
    return "\n".join(lines) + "\n"


def _join(s: Cut, answers: list[dict[str, Any]]) -> tuple[str, tuple[KernelInfo, ...]]:
    """One module from the pieces' answers, after checking that every value crossing a cut
    comes out in the strides its reader was compiled for; each kernel's report entry points
    at its line in the joined module."""
    for p, piece in enumerate(s.pieces):
        for r, meta in zip(piece.inputs, piece.metas):
            strides = answers[r.piece].get("strides") if r.piece >= 0 else None
            got = strides[r.index] if strides is not None else None
            if got is not None and tuple(got) != tuple(meta.stride):
                raise _NoCut(f"piece {r.piece} returns a value in strides {got}, piece {p} "
                             f"was compiled for {meta.stride}")
    source = _compat.join_modules([a["source"] for a in answers],
                                  [_call_name(p) for p in range(len(answers))], top_call(s))
    lines = {}
    for i, line in enumerate(source.splitlines(), 1):
        head = line.split(" = async_compile.", 1)
        if len(head) == 2:
            lines[head[0]] = i
    kernels = tuple(dataclasses.replace(k, line=lines.get(k.name, k.line))
                    for a in answers for k in a["kernels"])
    return source, kernels


# ---- the workers ------------------------------------------------------------------------------

class _Worker(NamedTuple):
    proc: subprocess.Popen
    folder: str  # its log and its answer
    started: float  # time.time() at its start


_EARLY: list[_Worker] = []  # started with the capture, waiting for a piece


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _spawn(n: int, warm: str | None) -> list[_Worker]:
    """n worker processes, each with its share of the cores for its kernel compiles;
    `warm`: the device to warm Inductor up on while it waits for its piece."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, ENV: "1", "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, _cores() // n)),
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                                         if p)}
    workers = []
    for _ in range(n):
        folder = tempfile.mkdtemp(prefix="precompile_nb_piece_")
        with open(os.path.join(folder, "log"), "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "precompile_nb.core.pieces", folder,
                 *(("--warm", warm) if warm else ())],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
        workers.append(_Worker(proc, folder, time.time()))
    return workers


# Note [piece workers start with the capture]
#   A worker is a fresh Python process: before it can compile, it imports torch and
#   Inductor, starts its kernel-compile pool, and Inductor initialises itself at its first
#   compile (decompositions, pattern tables): 6-7 s on the H200 host, measured (t5's training
#   step: the four workers were ready 6.4-6.5 s after their start). Started when lowering
#   begins, that is all waiting. So for a CUDA graph, when PRECOMPILE_NB_PIECES asks for
#   pieces, precompile starts them with the capture, as it starts Inductor's own compile pool
#   (Note [compile workers start with the capture]), and each compiles a tiny graph on the
#   device while it waits; lowering takes the ones it needs, and every other one is ended when
#   the lowering ends, whatever it decided, or when capture fails.
def start_workers(device: str) -> None:
    """Start the workers PRECOMPILE_NB_PIECES asks for, now (Note [piece workers start with
    the capture]); none where it asks for one piece or is not set."""
    asked = os.environ.get(ENV, "").strip()
    n = int(asked) if asked.isdigit() else 1
    if n >= 2 and not _EARLY:
        _EARLY.extend(_spawn(n, device))


def stop_workers(workers: Sequence[_Worker] | None = None) -> None:
    """End `workers` (default: every one started early and not taken) and remove their
    folders."""
    import shutil

    if workers is None:
        workers, _EARLY[:] = list(_EARLY), []
    for w in workers:
        if w.proc.poll() is None:
            w.proc.kill()
        w.proc.wait()
        if w.proc.stdin is not None:
            w.proc.stdin.close()
        shutil.rmtree(w.folder, ignore_errors=True)


def _take(k: int) -> list[_Worker]:
    """k workers: those started early first, then new ones."""
    ws = [w for w in _EARLY[:k] if w.proc.poll() is None]
    stop_workers([w for w in _EARLY[:k] if w not in ws])
    del _EARLY[:k]
    return ws + (_spawn(k - len(ws), None) if len(ws) < k else [])


def _answers(workers: list[_Worker], s: Cut) -> list[dict[str, Any]]:
    dirs = (os.environ.get("TORCHINDUCTOR_CACHE_DIR"), os.environ.get("TRITON_CACHE_DIR"))
    for p, (w, piece) in enumerate(zip(workers, s.pieces)):
        assert w.proc.stdin is not None
        try:
            w.proc.stdin.write(pickle.dumps({"piece": piece, "tag": f"p{p}", "dirs": dirs}))
            w.proc.stdin.close()
        except OSError:  # it died: its log says why, below
            pass
    answers = []
    for p, w in enumerate(workers):
        rc = w.proc.wait()
        if rc != 0:
            with open(os.path.join(w.folder, "log"), "rb") as f:
                tail = f.read().decode(errors="replace").strip().splitlines()[-1:]
            raise _NoCut(f"piece {p}'s compile failed ({tail[0] if tail else f'exit {rc}'})")
        with open(os.path.join(w.folder, "out"), "rb") as f:
            answer = pickle.load(f)  # noqa: S301 - our own worker's answer
        answer["stamps"] = [t - w.started for t in answer["stamps"]]
        answers.append(answer)
    return answers


def compile_in_pieces(gm: torch.fx.GraphModule, k: int, cuda: bool) -> Joined | str:
    """Compile `gm` in k pieces at once (Note [a graph compiled in pieces]), into the
    private compile dir this process is in; the reason as a str where it did not."""
    try:
        s = split(gm, k)
    except _NoCut as e:
        return str(e)
    workers = _take(k)
    try:
        answers = _answers(workers, s)
        source, kernels = _join(s, answers)
    except _NoCut as e:
        return str(e)
    finally:
        stop_workers(workers)
    run = None
    if cuda:
        try:
            module = _compat.load_module(source)
        except Exception as e:  # noqa: BLE001 - compiled in one piece instead, and said why
            return f"the joined module did not load ({type(e).__name__}: {str(e)[:160]})"
        run = lambda *args: module.call(list(args))  # noqa: E731
    workers_t = tuple(tuple(round(t, 3) for t in a["stamps"])  # type: ignore[misc]
                      for a in answers)
    return Joined(source=source, kernels=kernels, pieces=k, run=run, workers=workers_t)


def _worker(folder: str, warm: str | None) -> None:
    """One worker: warm Inductor up on `warm`'s device, read a piece from stdin (none: the
    lowering did not need this worker), compile it with Inductor into the cache dirs the job
    names, write the module's source, its kernels for the report and its results' strides."""
    _compat.start_compile_workers()
    if warm:
        _compat.warm_inductor(warm)
    stamps = [time.time()]  # ready, got its piece, compiled it
    data = sys.stdin.buffer.read()
    if not data:
        return
    job = pickle.loads(data)  # noqa: S301 - from the parent process
    stamps.append(time.time())
    piece: Piece = job["piece"]
    from .kernels import lowered_graph, parse_kernels

    gm = piece_graph(piece)
    fakes = _compat.fake_inputs([(m.shape, m.stride, m.dtype, m.device) for m in piece.metas])
    record: dict[str, Any] = {}
    with _compat.compile_dirs(*job["dirs"]), _compat.kernel_names_tagged(job["tag"]):
        source, inner, _ = _compat.inductor_compile(gm, fakes, record=record,
                                                    eager_layout=True)
    stamps.append(time.time())
    source = _compat.strip_inductor_main(source)
    answer = {"source": source, "strides": record.get("output_strides"), "stamps": stamps,
              "kernels": parse_kernels(source, lowered_graph(inner, gm))}
    out = os.path.join(folder, "out")
    with open(out + ".tmp", "wb") as f:
        pickle.dump(answer, f)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":  # run as the package's module: the records unpickle as its classes
    from precompile_nb.core import pieces as _pieces

    _pieces._worker(sys.argv[1], sys.argv[3] if sys.argv[2:3] == ["--warm"] else None)
