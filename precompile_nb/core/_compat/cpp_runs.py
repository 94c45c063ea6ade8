"""torch internals of the order Inductor's scheduler emits a CPU graph's nodes in: C++ nodes
brought together so that they make fewer kernels (Note [C++ kernels in fewer runs]); checked
on 2.13, 2.14 and 2.15."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .scoped_patch import ScopedPatch, switched_off

# Note [C++ kernels in fewer runs]
#   Inductor's C++ backend emits every run of consecutive non-extern nodes of the final
#   schedule as one kernel, and starts a new one at each extern call (mm, addmm, convolution),
#   template or device change (2.13-2.15: Scheduler.codegen). precompile hands Inductor a
#   training step as one graph, in which autograd's order interleaves the backward's extern
#   calls with its pointwise and reduction nodes (a bias gradient's sum after the weight
#   gradient's mm, away from the gelu_backward it reads). torch.compile's backward graph gets
#   a new order from Inductor's peak-memory pass (reorder_for_peak_memory), which happens to
#   bring such nodes together; in one graph that pass finds every order's peak at the forward
#   /backward boundary and keeps autograd's (diagnosed on a 2-layer MLP step: precompile 5 C++
#   kernels, torch.compile 5 in two graphs; HF Swin tiny 39 against 35). So after that pass,
#   for a graph on the CPU, the nodes are ordered again: a list schedule over the same
#   predecessors the pass honours (each node's mpi_node.pred_nodes, data and ordering
#   dependencies), which after an extern call first emits the other ready extern calls, and
#   while a run of C++ nodes is open adds every ready C++ node to it. The new order is kept
#   only if Inductor's own peak-memory estimate for it is no higher. Values are the same; the
#   kernels are fewer: the benchmarks' transformer training step 12 -> 11, CNN+BatchNorm step
#   7 -> 6, the zoo's Swin at tiny size 39 -> 30; the steady step level, the cold precompile
#   of the two small steps level within the spread (benchmarks/results/cpu_round13/): one C++
#   build fewer in 7 or 12 is little. On a graph with any node off the CPU or a collective
#   (whose order every rank must share), on a torch whose nodes carry no mpi_node, or should
#   the reorder fail, the order is left as Inductor made it; PRECOMPILE_NB_FEWER_RUNS=0 (or
#   off, false, no) leaves every order so.


@contextlib.contextmanager
def cpp_nodes_in_fewer_runs() -> Iterator[None]:
    """While this thread compiles a graph: Note [C++ kernels in fewer runs] (2.13-2.15:
    torch._inductor.memory.reorder_for_peak_memory, which the scheduler imports at each
    call, replaced while a thread needs it)."""
    memory = _memory()
    names = ("reorder_for_peak_memory", "prepare_planning_info", "estimate_peak_memory")
    if switched_off("PRECOMPILE_NB_FEWER_RUNS") or memory is None or not all(
            hasattr(memory, n) for n in names):
        yield
        return
    with _PATCH.active():
        yield


def _memory() -> Any:
    """Inductor's memory planning module (2.13-2.15: torch._inductor.memory), or None."""
    try:
        import torch._inductor.memory as memory
    except ImportError:
        return None
    return memory


_PATCH = ScopedPatch(lambda: _memory().reorder_for_peak_memory,
                     lambda f: setattr(_memory(), "reorder_for_peak_memory", f),
                     lambda f, patch: _then_fewer_runs(f, patch, _memory()))


def _then_fewer_runs(reorder: Any, patch: ScopedPatch, memory: Any) -> Any:
    def reorder_for_peak_memory(nodes, name_to_buf, name_to_fused_node, graph_inputs,
                                graph_outputs, *args: Any, **kwargs: Any):
        best = reorder(nodes, name_to_buf, name_to_fused_node, graph_inputs, graph_outputs,
                       *args, **kwargs)
        if not patch.on():
            return best
        try:
            grouped = fewer_runs(best)
            if grouped is None or grouped == best:
                return best
            _, freeable = memory.prepare_planning_info(best, name_to_buf, name_to_fused_node,
                                                       graph_inputs, graph_outputs)
            peak = memory.estimate_peak_memory(best, freeable, graph_outputs)[0]
            return grouped if memory.estimate_peak_memory(
                grouped, freeable, graph_outputs)[0] <= peak else best
        except Exception:  # noqa: BLE001 - an optimization only: Inductor's order stands
            return best

    return reorder_for_peak_memory


def _kind(node: Any, nop: type) -> str | None:
    """"cpp" (a node the C++ backend puts in a kernel with its neighbours), "break" (an extern
    call or template, which ends that kernel), "nop" (a NopKernelSchedulerNode), or None (a
    node off the CPU)."""
    if isinstance(node, nop):
        return "nop"
    device = node.get_device()
    if device is None or device.type != "cpu":
        return None
    return "break" if node.is_extern() or node.is_template() else "cpp"


def fewer_runs(nodes: list[Any]) -> list[Any] | None:
    """The nodes in an order with as few runs of C++ nodes as a greedy list schedule finds,
    each after its predecessors; None where the graph is not all on the CPU, holds a
    collective, or its nodes carry no predecessors (mpi_node.pred_nodes)."""
    from torch._inductor.scheduler import NopKernelSchedulerNode
    from torch._inductor.utils import is_collective, is_wait

    kinds = [_kind(n, NopKernelSchedulerNode) for n in nodes]
    if None in kinds or "cpp" not in kinds or not all(hasattr(n, "mpi_node") for n in nodes):
        return None
    if any(is_collective(getattr(n, "node", None)) or is_wait(getattr(n, "node", None))
           for n in nodes):
        return None  # collectives keep the order every rank has
    index = {n: i for i, n in enumerate(nodes)}
    waiting = [0] * len(nodes)
    users: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for p in n.mpi_node.pred_nodes:
            if p in index:
                users[index[p]].append(i)
                waiting[i] += 1
    ready = [i for i, w in enumerate(waiting) if w == 0]
    order: list[int] = []
    in_run = False
    while ready:
        # an open run takes any ready C++ node; after an extern call, the other extern
        # calls first; else the earliest node, as Inductor had it
        want = ("cpp", "nop") if in_run else ("break",) if order else ()
        pick = min((i for i in ready if kinds[i] in want), default=min(ready))
        ready.remove(pick)
        order.append(pick)
        in_run = kinds[pick] == "cpp" or (in_run and kinds[pick] == "nop")
        for u in users[pick]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if len(order) != len(nodes):  # a cycle: not a schedule
        return None
    return [nodes[i] for i in order]
