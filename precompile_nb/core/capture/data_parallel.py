"""Capture, step 1b: data-parallel wrappers (FSDP2's fully_shard, DDP) as collectives in
the graph.

Note [data parallel in the graph]
  FSDP2 and DDP run their collectives from module and autograd hooks with eager
  process-group calls on buffers they own. Inside a trace those hooks would run on fake
  tensors or read FSDP2's freed buffers (measured, torch 2.13, 2 gloo ranks: a fully_shard
  model traced after one eager step recorded FSDP2's all-gather buffers, whose storage FSDP2
  had resized to 0 bytes, as graph constants; reading one is a SIGSEGV,
  benchmarks/repro_fsdp2_freed_storage.py). So while capture traces, their hooks are out of
  the way and the same collectives are written into the computation, where the trace sees
  them as functional collectives:
  - FSDP2, as torchtitan's SimpleFSDP does it: on each fully_shard module's forward, its
    Shard(0) DTensor parameters are replaced by their full values, cast to mp_policy's
    param_dtype and all-gathered (DTensor redistribute to Replicate), then made plain with a
    Partial("avg") gradient placement, so the backward reduce-scatters the gradient in
    reduce_dtype, averaged over the mesh, onto the sharded parameter's .grad as a Shard(0)
    DTensor of its own dtype: what eager FSDP2 leaves. Forward inputs and outputs are cast as
    FSDP2 casts them (cast_forward_inputs, output_dtype). The full parameters stay alive from
    forward to backward (reshard_after_forward changes memory, not values). FSDP2 over
    tensor parallelism (fully_shard on the dp dim of a (dp, tp) mesh, over parameters TP
    made DTensors on tp): the parameter is a DTensor on the 2-D mesh, Shard(0) or
    _StridedShard(0) on dp; only dp is gathered, and the module gets the DTensor on the tp
    mesh that TP made (its TP collectives are then traced as for TP alone); the gradient,
    Partial("avg") on dp, lands on the 2-D placements.
  - DDP: the wrapper calls the wrapped module; each gradient, once accumulated in the
    backward, joins its bucket (DDP's bucket_cap_mb, the first bucket DDP's smaller first cap,
    over the parameters in reverse order, the order in which their gradients become ready,
    as DDP's rebuilt buckets follow it; one dtype a bucket); a full bucket is divided by the
    world size, flattened into one tensor, all-reduced (sum) on DDP's process group and copied
    back, as DDP's reducer does. Buckets left incomplete (parameters fn does not use) are
    reduced when the backward ends. Buffers are broadcast from the group's rank 0 before each
    forward where broadcast_buffers.
  The artifact then runs those collectives inside its graph; FSDP2's and DDP's own state is
  never touched.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Union

import torch

from .. import _compat
from ..errors import PrecompileError, Problems


@dataclass(frozen=True)
class Fsdp2Plan:
    """An FSDP2 model argument: what each fully_shard call manages."""

    units: tuple[_compat.FsdpUnit, ...]  # one per FSDPState, in module order


@dataclass(frozen=True)
class DdpPlan:
    """A DistributedDataParallel model argument."""

    ddp: torch.nn.Module  # the wrapper itself (fn's argument)
    settings: _compat.DdpSettings  # what decides its gradients: group, buckets, buffers


Plan = Union[Fsdp2Plan, DdpPlan]


def plan(m: torch.nn.Module, path: str, P: Problems) -> Plan | None:
    """How the data-parallel wrapper in `m` is captured, or None for a plain model; what
    cannot be captured is refused (invariant 4) with the alternative."""
    found = _compat.data_parallel_wrapper(m)
    if found is None:
        return None
    sub, kind = found
    where = ".".join(x for x in (path, sub) if x)
    if kind == "FSDP":
        _refuse(P, where, "FSDP (FullyShardedDataParallel, FSDP1) keeps its parameters "
                "flattened in its own buffers", "FSDP1",
                "use FSDP2 (torch.distributed.fsdp.fully_shard), which precompile captures, "
                "or precompile the unwrapped model")
        return None
    if kind == "DistributedDataParallel":
        return _ddp_plan(m, sub, where, P)
    return _fsdp2_plan(m, where, P)


def _refuse(P: Problems, where: str, why: str, actual: str, hint: str) -> None:
    P.add(PrecompileError(
        f"{where}: {why}", invariant=4, stage="capture", where=where,
        expected="a plain model, an FSDP2 (fully_shard) model on a 1-D mesh (alone, or "
                 "over tensor parallelism), or a DistributedDataParallel model passed as "
                 "fn's argument",
        actual=actual, hint=hint))


def _ddp_plan(m: torch.nn.Module, sub: str, where: str, P: Problems) -> DdpPlan | None:
    if sub:
        _refuse(P, where, "a DistributedDataParallel nested inside the model", "nested DDP",
                "pass the DistributedDataParallel wrapper itself as fn's argument")
        return None
    inner = _compat.data_parallel_wrapper(m.module)
    if inner is not None:
        _refuse(P, where, f"DistributedDataParallel around a {inner[1]} model",
                f"DDP of {inner[1]}", "use one data-parallel wrapper: DDP of a plain model, "
                "or FSDP2 (fully_shard) alone")
        return None
    s = _compat.ddp_settings(m)
    if s.comm_hook or s.mixed_precision:
        what = f"communication hook {s.comm_hook}" if s.comm_hook else "mixed_precision"
        _refuse(P, where, f"DistributedDataParallel with a {what}", what,
                "wrap the model without it (precompile writes DDP's default averaged "
                "all-reduce into the graph); for mixed precision use torch.autocast inside "
                "fn")
        return None
    if not s.syncing:
        _refuse(P, where, "precompile was called inside DistributedDataParallel.no_sync()",
                "require_backward_grad_sync=False",
                "call precompile outside no_sync() for the synchronising step; for the "
                "accumulating micro-steps precompile a second step on model.module (no "
                "all-reduce) and call that one inside no_sync()")
        return None
    if any(_compat.is_dtensor(p) for p in m.parameters()):
        _refuse(P, where, "DistributedDataParallel over DTensor parameters", "DTensor params",
                "shard with FSDP2 (fully_shard) or tensor parallelism instead")
        return None
    return DdpPlan(ddp=m, settings=s)


def _fsdp2_plan(m: torch.nn.Module, where: str, P: Problems) -> Fsdp2Plan | None:
    units = _compat.fsdp2_units(m)
    for unit in units:
        for fp in unit.params:
            owner, name = fp.owners[0]
            registered = owner._parameters.get(name)
            if registered is not fp.sharded:
                _refuse(P, where, "an FSDP2 parameter is not in its sharded state",
                        f"{type(owner).__name__}.{name} is unsharded",
                        "call model.reshard() (or finish the step's backward) before "
                        "precompile and before each call")
                return None
            mesh = _compat.fsdp_mesh_of(fp.sharded)
            placements = tuple(fp.sharded.placements)
            tp_ndim = 0 if fp.tp_spec is None else fp.tp_spec.mesh.ndim
            dp = type(placements[0]).__name__ in ("Shard", "_StridedShard") and \
                placements[0].dim == 0
            if mesh.ndim != 1 + tp_ndim or tp_ndim > 1 or not dp:
                _refuse(P, where, "FSDP2 on a mesh of more than one data-parallel dimension "
                        "(HSDP), or over a parameter of more than one other parallel "
                        "dimension, is not captured",
                        f"mesh {tuple(mesh.shape)}, placements "
                        f"{tuple(str(p) for p in placements)}",
                        "shard with fully_shard on a 1-D mesh (alone, or on the dp dim of a "
                        "(dp, tp) mesh over tensor parallelism on its tp dim); or use "
                        "torch.compile")
                return None
    return Fsdp2Plan(units=tuple(units))


@contextlib.contextmanager
def in_graph(p: Plan | None, m: torch.nn.Module, traced: dict[str, torch.Tensor]
             ) -> Iterator[None]:
    """While fn is traced on `m` reparametrized onto `traced` (name -> traced tensor): the
    wrapper's collectives are written into the computation (Note [data parallel in the
    graph])."""
    if p is None:
        yield
    elif isinstance(p, Fsdp2Plan):
        with _compat.fsdp2_hooks_removed(m), _fsdp2_hooks(p):
            yield
    else:
        buffers = [traced[n] for n, _ in m.named_buffers() if n in traced]
        sync = p.settings.broadcast_buffers and buffers and p.settings.world > 1
        before = (lambda: _broadcast_buffers(buffers, p.settings)) if sync else None
        with _compat.ddp_forward_is_the_module(m, before), _ddp_hooks(p, traced):
            yield


@contextlib.contextmanager
def _fsdp2_hooks(p: Fsdp2Plan) -> Iterator[None]:
    handles = []
    for unit in p.units:
        for mod in unit.modules:
            own = set(map(id, mod.modules()))
            params = [fp for fp in unit.params if id(fp.owners[0][0]) in own]
            saved: list[list[tuple[torch.nn.Module, str, torch.Tensor]]] = []
            handles.append(mod.register_forward_pre_hook(
                _fsdp2_pre(unit, params, saved), prepend=True, with_kwargs=True))
            handles.append(mod.register_forward_hook(_fsdp2_post(unit, saved)))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _fsdp2_pre(unit: _compat.FsdpUnit, params: list[_compat.FsdpParam], saved: list):
    def pre(mod: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if unit.cast_inputs_to is not None:
            args, kwargs = (_compat.cast_floating(unit.cast_inputs_to, args),
                            _compat.cast_floating(unit.cast_inputs_to, kwargs))
        swapped = []
        for fp in params:  # the traced DTensor parameter -> its full value (all-gather)
            owner, name = fp.owners[0]
            sharded = owner._parameters[name]
            full = _compat.unsharded(sharded, fp.param_dtype, fp.reduce_dtype, fp.tp_spec)
            for o, n in fp.owners:
                swapped.append((o, n, _compat.swap_param(o, n, full)))
        saved.append(swapped)
        return args, kwargs
    return pre


def _fsdp2_post(unit: _compat.FsdpUnit, saved: list):
    def post(mod: torch.nn.Module, args: tuple, out: Any) -> Any:
        for o, n, sharded in reversed(saved.pop()):
            _compat.swap_param(o, n, sharded)
        if unit.output_dtype is not None:
            out = _compat.cast_floating(unit.output_dtype, out)
        return out
    return post


class _Buckets:
    """DDP's gradient buckets over the traced parameters, reduced as they fill."""

    def __init__(self, params: list[torch.Tensor], s: _compat.DdpSettings) -> None:
        self.s = s
        self.buckets: list[list[torch.Tensor]] = []
        size, cap = 0, s.first_bucket_bytes
        for t in reversed(params):  # DDP fills buckets from the last parameter
            nbytes = t.numel() * t.element_size()
            full = bool(self.buckets) and size + nbytes > cap
            if not self.buckets or full or self.buckets[-1][0].dtype != t.dtype:
                if self.buckets:
                    cap = s.bucket_bytes
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(t)
            size += nbytes
        self.of = {id(t): k for k, b in enumerate(self.buckets) for t in b}
        self.ready: dict[int, set[int]] = {}
        self.queued = False

    def hook(self, t: torch.Tensor) -> None:
        if not self.queued:
            self.queued = True
            _compat.queue_end_of_backward(self.flush)
        k = self.of[id(t)]
        self.ready.setdefault(k, set()).add(id(t))
        if len(self.ready[k]) == len(self.buckets[k]):
            self.reduce(k)

    def reduce(self, k: int) -> None:
        del self.ready[k]
        grads = [t.grad for t in self.buckets[k] if t.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads]) / self.s.world
        flat = _compat.all_reduce_sum(flat, self.s.group)
        for g, chunk in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(chunk.view_as(g))

    def flush(self) -> None:
        for k in sorted(self.ready):
            self.reduce(k)
        self.queued = False


@contextlib.contextmanager
def _ddp_hooks(p: DdpPlan, traced: dict[str, torch.Tensor]) -> Iterator[None]:
    names = [n for n, t in p.ddp.named_parameters() if t.requires_grad
             and n not in getattr(p.ddp, "parameters_to_ignore", ())]
    params = [traced[n] for n in names if n in traced]
    buckets = _Buckets(params, p.settings)
    handles = [t.register_post_accumulate_grad_hook(buckets.hook) for t in params]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _broadcast_buffers(buffers: list[torch.Tensor], s: _compat.DdpSettings) -> None:
    """DDP's buffer sync before a forward: every buffer from the group's rank 0."""
    import torch.distributed as dist

    src = dist.get_global_rank(s.group, 0)
    with torch.no_grad():
        for b in buffers:
            b.copy_(_compat.broadcast(b, src, s.group))
