"""Stage 2, lowering: whether every rank of the job tunes a CUDA graph with collectives now,
together (autotuning runs the graph once: tuning.py).

Note [every rank tunes a graph with collectives together]
  Autotuning at precompile runs the compiled graph once (Note [a configuration per size] in
  tuning.py). A graph with collectives cannot run on one rank alone: its first collective
  would wait for the other ranks forever. Where every rank of the job precompiles the same
  step at the same time (torchrun with precompile on every rank: tensor parallelism, FSDP2),
  they can run it together. Before the run each rank writes that it is here to the job's
  key-value store (the default process group's) under a key made of the graph's collectives,
  in order (op, its non-tensor arguments such as the group, the shapes it moves) and of how
  many graphs with the same collectives this process met before; then it waits for every
  rank's word under that key, up to PRECOMPILE_NB_TUNE_TOGETHER seconds (60 by default; 0 or
  off: never wait, never tune such a graph). Graphs that are not the same step on every rank
  (other collectives or shapes) get other keys and never pair up. Seeing every rank come is
  not enough: a rank whose wait ended just before the last one came must not be left out of
  a collective the others run. So each rank then writes its verdict, yes (every rank came in
  time) or no, and a rank that said yes waits for every rank's verdict (every rank came, so
  every rank writes one within its own wait) and tunes only if all are yes. A rank that said
  no tunes nothing. Either every rank runs the graph or none does. A graph not tuned keeps
  its configurations: its load autotunes at the first call, and the load's reason says why
  precompile did not tune it (why_not_together's sentence); its lowering is not kept in the
  lowering store, so a later precompile may tune it. precompile_on_one_rank says its rank
  precompiles alone (on_one_rank): no wait, no tuning. A rank that precompiles alone
  otherwise (one rank compiles, the others load its artifact) waits the whole time, once per
  such graph, then tunes nothing and warns (a wait in vain is worth a line in the job's
  output). A graph with collectives is tuned at the example's
  size only: a size point that fails on one rank (its memory) would leave the others in a
  collective.
"""
from __future__ import annotations

import contextlib
import hashlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from . import _compat
from ._compat.scoped_patch import switch_seconds

SWITCH = "PRECOMPILE_NB_TUNE_TOGETHER"
DEFAULT_WAIT_S = 60.0
_PREFIX = "precompile_nb/tune_together"
_MET: dict[str, int] = {}  # signature -> graphs with it met by this process so far
_ALONE = threading.local()  # .on: this thread precompiles on one rank of the job


@contextlib.contextmanager
def on_one_rank() -> Iterator[None]:
    """While this thread precompiles on one rank alone (precompile_on_one_rank)."""
    before = getattr(_ALONE, "on", False)
    _ALONE.on = True
    try:
        yield
    finally:
        _ALONE.on = before


def collectives_signature(gm: torch.fx.GraphModule) -> str:
    """The graph's collectives in order, each as its op, non-tensor arguments and the shapes
    of its tensor arguments; "" for a graph without collectives."""
    parts = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or not _compat.is_collective(n.target):
            continue
        args = [_arg(a) for a in (*n.args, *n.kwargs.values())]
        parts.append(f"{n.target}({', '.join(args)})")
    return "; ".join(parts)


def _arg(a: Any) -> str:
    if isinstance(a, torch.fx.Node):
        val = a.meta.get("val")
        shape = getattr(val, "shape", None)
        return f"tensor{tuple(shape)}" if shape is not None else "node"
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_arg(x) for x in a) + "]"
    return repr(a)


def why_not_together(signature: str, wait_s: float | None = None) -> str | None:
    """None where every rank of the job reached a graph of this `signature` within the wait
    and agreed to tune it now, else why not (one sentence)."""
    wait_s = switch_seconds(SWITCH, DEFAULT_WAIT_S) if wait_s is None else wait_s
    if wait_s <= 0:
        return f"{SWITCH}=0: graphs with collectives are not tuned"
    if getattr(_ALONE, "on", False):
        return "precompile_on_one_rank compiles on one rank, and none alone runs collectives"
    job = _compat.job_store()
    if job is None:
        return "torch.distributed is not initialized, so no rank can run the collectives"
    rank, world, store = job
    if world == 1:
        return None
    n = _MET.get(signature, 0)
    _MET[signature] = n + 1
    key = f"{_PREFIX}/{hashlib.sha256(signature.encode()).hexdigest()[:20]}/{n}"
    try:
        why = rendezvous(store, rank, world, key, wait_s)
    except Exception as e:  # noqa: BLE001 - a store that fails costs the tuning, not the build
        why = f"the job's key-value store failed ({type(e).__name__}: {str(e)[:160]})"
    if why is not None:  # waited in vain: say so where the user looks (a torchrun's output)
        warnings.warn(f"precompile on rank {rank}: {why}; the load autotunes it at its first "
                      "call", UserWarning, stacklevel=2)
    return why


def rendezvous(store: Any, rank: int, world: int, key: str, wait_s: float) -> str | None:
    """The two waits of the Note on `store` under `key`: None where every rank agreed."""
    store.set(f"{key}/here/{rank}", "1")
    came = _compat.store_wait(store, [f"{key}/here/{r}" for r in range(world)], wait_s)
    missing = [] if came else [r for r in range(world) if not store.check([f"{key}/here/{r}"])]
    store.set(f"{key}/verdict/{rank}", "yes" if came else "no")
    if not came:
        who = f"rank(s) {_ranks(missing)}" if missing else "the last rank"
        return (f"{who} did not reach this graph within {wait_s:g} s, so no rank ran its "
                f"collectives to tune it ({SWITCH} sets the wait)")
    verdicts = [f"{key}/verdict/{r}" for r in range(world)]
    if not _compat.store_wait(store, verdicts, wait_s + 30.0):
        return (f"not every rank said within {wait_s + 30.0:g} s whether it tunes this graph "
                "(a rank stopped after it came?), so this rank does not tune it")
    late = [r for r, k in enumerate(verdicts) if store.get(k) != b"yes"]
    if late:
        return (f"rank(s) {_ranks(late)} stopped waiting before every rank came, so no rank "
                f"ran this graph's collectives to tune it ({SWITCH} sets the wait)")
    return None


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))
