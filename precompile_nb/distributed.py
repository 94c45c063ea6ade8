"""Compile on one rank, load on every rank: precompile in a torch.distributed job.

In a job of N processes (torchrun, or any launcher that initialised torch.distributed), every
rank runs the same computation: one compile is enough. `precompile_on_one_rank` precompiles on
rank `src` only and hands the pair (python_code, cache) to every other rank, through the
process group (default) or through a shared directory; each rank then loads it with the
cache, so the other ranks compile nothing. The pair is checked on arrival against what this
rank will call it with: its world size, and the device meshes of this rank's DTensor inputs
(shape, dim names, process groups). A failure on rank `src` reaches every rank as a
PrecompileError, so no rank waits forever for a pair that will not come.

    import torch.distributed as dist
    from precompile_nb.distributed import precompile_on_one_rank

    dist.init_process_group("nccl")          # torchrun sets rank and world size
    ...                                      # build and parallelize the model on every rank
    shared = precompile_on_one_rank(train_step, model, x)   # rank 0 compiles
    loss = shared(model, x)                  # every rank calls its own copy
    shared.compiled_here                     # True on rank 0 only

CUDA: the kernels are built for rank `src`'s device index; every rank must see its GPU under
that index (set CUDA_VISIBLE_DEVICES to the local rank before CUDA starts, so every rank's
GPU is cuda:0), or precompile on every rank.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from .core import _compat
from .runtime.convention import decode, mesh_text
from .core.errors import PrecompileError
from .core.load import read_meta
from .core.tune_together import on_one_rank

__all__ = ["SharedArtifact", "precompile_on_one_rank", "check_pair_for_this_rank"]


@dataclasses.dataclass(frozen=True)
class SharedArtifact:
    """The loaded artifact on this rank, and where it came from. Call it like the function."""

    forward: Callable[..., Any]
    python_code: str
    cache: bytes
    compiled_here: bool  # this rank ran precompile (rank `src` only)
    src: int  # the rank that compiled
    seconds: float  # this rank's time in precompile_on_one_rank (compile or wait, and load)

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)


def precompile_on_one_rank(fn: Callable, *example_inputs: Any, src: int = 0,
                           group: Any = None, directory: str | os.PathLike[str] | None = None,
                           name: str | None = None, **options: Any) -> SharedArtifact:
    """precompile(fn, *example_inputs, **options) on rank `src`, loaded on every rank of
    `group` (default: the whole job). With `directory` (a path every rank sees), rank `src`
    saves NAME.py / NAME.cache there and the others read them; otherwise the pair travels
    through the process group. Every rank must call it (it is a collective)."""
    from .core import precompile
    from .tools.store import save_pair

    if not dist.is_available() or not dist.is_initialized():
        raise PrecompileError(
            "precompile_on_one_rank needs an initialised torch.distributed job",
            invariant=6, stage="capture", where="torch.distributed", expected="initialised",
            actual="not initialised",
            hint="call torch.distributed.init_process_group first (torchrun sets the rank "
                 "and world size), or use precompile(...) in a single process")
    t0 = time.perf_counter()
    _refuse_rank_specific(example_inputs)  # on every rank alike, before anything compiles
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    name = name or f"{getattr(fn, '__name__', 'fn').strip('<>')}_shared"
    status: dict[str, Any] = {}
    code, cache = "", b""
    if rank == src:
        try:
            with on_one_rank():  # Note [every rank tunes a graph with collectives together]
                code, cache = precompile(fn, *example_inputs, **options)
            if directory is not None:
                save_pair(directory, name, code, cache)
            status = {"sha256": hashlib.sha256(code.encode()).hexdigest(), "world": world}
        except Exception as e:  # noqa: BLE001 - every rank must learn of it, then it is raised
            status = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
            _broadcast(status, None if directory else ("", b""), src, group)
            raise
        _broadcast(status, None if directory else (code, cache), src, group)
    else:
        status, pair = _broadcast(None, None if directory else ("", b""), src, group)
        if "error" in status:
            raise PrecompileError(
                f"precompile failed on rank {src}", stage="capture", where=f"rank {src}",
                expected="a pair from the compiling rank", actual=status["error"],
                hint=f"read rank {src}'s error (it raised the same PrecompileError) and fix it")
        if directory is not None:
            code, cache = _read_pair(directory, name)
            if hashlib.sha256(code.encode()).hexdigest() != status["sha256"]:
                raise PrecompileError(
                    f"{Path(directory) / name}.py is not the pair rank {src} just wrote",
                    invariant=7, stage="load", where=str(Path(directory) / f"{name}.py"),
                    expected=f"the files rank {src} saved", actual="other contents",
                    hint="give every rank the same shared directory (not a node-local one), "
                         "and one job at a time per NAME")
        else:
            code, cache = pair
        check_pair_for_this_rank(code, example_inputs, world_size=world,
                                 src_world_size=status["world"])
    forward = precompile.load(code, cache)  # the pair in hand: read and checked once
    return SharedArtifact(forward=forward, python_code=code, cache=cache,
                          compiled_here=rank == src, src=src,
                          seconds=time.perf_counter() - t0)


def check_pair_for_this_rank(python_code: str, example_inputs: Sequence[Any], *,
                             world_size: int, src_world_size: int | None = None) -> None:
    """A pair received from another rank, checked before it is loaded here: made for this
    world size, for the device meshes this rank's DTensor inputs live on, and for this rank's
    CUDA device index. A mismatch is a PrecompileError (invariant 6) naming both."""
    if src_world_size is not None and src_world_size != world_size:
        raise _mismatch("world size", src_world_size, world_size)
    _refuse_rank_specific(example_inputs)
    meta = read_meta(python_code)
    conv = decode(meta)
    meshes = _meshes_of(example_inputs)
    wanted = set()
    for k, rec in enumerate(conv.meshes):
        wanted.add((rec.device_type, tuple(rec.shape), rec.dim_names))
        if math.prod(rec.shape) > world_size:
            raise _mismatch(f"device mesh #{k}", f"{list(rec.shape)} (world size >= "
                            f"{math.prod(rec.shape)})", f"world size {world_size}")
    if meshes != wanted:  # this rank's DTensor inputs live on other meshes
        text = lambda ms: ", ".join(mesh_text(*m) for m in sorted(ms, key=str)) or "none"  # noqa: E731
        raise _mismatch("device mesh", text(wanted), text(meshes))
    cuda = any(s.device.startswith("cuda") for s in conv.inputs)
    index = meta["device_index"] if cuda and meta["backend"] == "inductor" else None
    if index is not None and torch.cuda.is_available() and torch.cuda.current_device() != index:
        raise PrecompileError(
            f"the pair's kernels were built for cuda:{index}; this rank uses "
            f"cuda:{torch.cuda.current_device()}", invariant=6, stage="load",
            where="CUDA device index", expected=f"cuda:{index}",
            actual=f"cuda:{torch.cuda.current_device()}",
            hint="make every rank see its GPU as the same index: set CUDA_VISIBLE_DEVICES to "
                 "the local rank before CUDA starts (then each rank's GPU is cuda:0), or "
                 "precompile on every rank")


def _mismatch(what: str, want: Any, got: Any) -> PrecompileError:
    return PrecompileError(
        f"the received pair was precompiled for another {what.split(' #')[0]}", invariant=6,
        stage="load", where=what, expected=want, actual=got,
        hint="precompile again in this job (every rank calls precompile_on_one_rank with the "
             "same model layout); a pair from a job with another world size or mesh does "
             "not fit this one")


def _refuse_rank_specific(example_inputs: Sequence[Any]) -> None:
    """A DTensor sharded unevenly (dim 0 of an FSDP2 parameter with 61 rows on 2 ranks: 31
    and 30) has a local shard of another shape on each rank, so a graph made on one rank
    does not fit the others. Every rank sees the same global shapes, so every rank raises
    this alike, before anything compiles or waits."""
    for where, t in _dtensors_of(example_inputs):
        mesh = _compat.dtensor_mesh(t)
        ways: dict[int, int] = {}  # tensor dim -> into how many shards the mesh cuts it
        for dim, p in enumerate(t.placements):  # _StridedShard: FSDP2 over TP's Shard
            if type(p).__name__ in ("Shard", "_StridedShard"):
                ways[p.dim] = ways.get(p.dim, 1) * mesh.shape[dim]
        for d, n in ways.items():
            if t.shape[d] % n:
                raise PrecompileError(
                    f"{where} is sharded unevenly, so its local shard has another shape "
                    "on each rank", invariant=6, stage="capture", where=where,
                    expected=f"a dim {d} divisible by the {n} shards the mesh cuts it into "
                             "(one graph fits every rank)",
                    actual=f"global shape {list(t.shape)}, placements {list(t.placements)}",
                    hint=f"pad dim {d} to a multiple of {n} (e.g. the vocabulary), or "
                         "precompile on every rank (plain precompile), where each rank's "
                         "graph is made for its own shard")


def _dtensors_of(example_inputs: Sequence[Any]) -> list[tuple[str, Any]]:
    out = []
    for i, a in enumerate(example_inputs):
        if isinstance(a, torch.nn.Module):
            named = list(a.named_parameters()) + list(a.named_buffers())
        else:
            named = [(str(k), t) for k, t in enumerate(torch.utils._pytree.tree_leaves(a))]
        out += [(f"args[{i}].{n}", t) for n, t in named if _compat.is_dtensor(t)]
    return out


def _meshes_of(example_inputs: Sequence[Any]) -> set[tuple[str, tuple[int, ...], Any]]:
    """(device type, shape, dim names) of every mesh this rank's DTensor inputs live on."""
    found = set()
    tensors: list[Any] = []
    for a in example_inputs:
        if isinstance(a, torch.nn.Module):
            tensors += list(a.parameters()) + list(a.buffers())
        else:
            tensors += torch.utils._pytree.tree_leaves(a)
    for t in tensors:
        if _compat.is_dtensor(t):
            m = _compat.dtensor_mesh(t)
            found.add((m.device_type, tuple(m.shape),
                       None if m.mesh_dim_names is None else tuple(m.mesh_dim_names)))
    return found


def _broadcast(status: dict | None, pair: tuple[str, bytes] | None, src: int, group: Any
               ) -> tuple[dict, tuple[str, bytes] | None]:
    """The status (and the pair, unless it goes through a directory) from `src` to all."""
    objs = [status, pair]
    device = None
    if dist.get_backend(group) == "nccl":  # NCCL moves objects through the current GPU
        device = torch.device("cuda", torch.cuda.current_device())
    dist.broadcast_object_list(objs, src=_global_rank(src, group), group=group,
                               device=device)
    return objs[0], objs[1]


def _global_rank(src: int, group: Any) -> int:
    return src if group is None else dist.get_global_rank(group, src)


def _read_pair(directory: str | os.PathLike[str], name: str) -> tuple[str, bytes]:
    d = Path(directory)
    try:
        return (d / f"{name}.py").read_text(encoding="utf-8"), (d / f"{name}.cache").read_bytes()
    except OSError as e:
        raise PrecompileError(
            f"the pair {name} is not in {d} on this rank", invariant=7, stage="load",
            where=str(d), expected=f"{name}.py and {name}.cache, written by the compiling rank",
            actual=f"{type(e).__name__}: {e}",
            hint="pass a directory every rank sees (a shared file system), or leave "
                 "directory=None to send the pair through the process group") from e
