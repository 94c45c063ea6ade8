"""torch internals of data parallelism at capture: FSDP2's (fully_shard) states and hooks,
DDP's settings and forward, and the collectives capture puts in the graph in their place
(checked on 2.13 and 2.15; Note [data parallel in the graph] in capture/data_parallel.py).
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch


def data_parallel_wrapper(m: torch.nn.Module) -> tuple[str, str] | None:
    """(path, kind) of the first submodule that a data-parallel wrapper drives from its own
    hooks: "FSDP2 (fully_shard)" (FSDPModule), "FSDP" (FSDP1), "DistributedDataParallel"
    (2.11-2.15 classes); else None."""
    kinds = []
    if "torch.distributed.fsdp" in sys.modules:
        fsdp = sys.modules["torch.distributed.fsdp"]
        kinds += [(getattr(fsdp, "FullyShardedDataParallel", None), "FSDP"),
                  (getattr(fsdp, "FSDPModule", None), "FSDP2 (fully_shard)")]
    if "torch.nn.parallel" in sys.modules:
        kinds.append((torch.nn.parallel.DistributedDataParallel, "DistributedDataParallel"))
    kinds = [(cls, name) for cls, name in kinds if isinstance(cls, type)]
    for path, sub in m.named_modules():
        for cls, name in kinds:
            if isinstance(sub, cls):
                return path, name
    return None


# ---- FSDP2 -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FsdpParam:
    """One parameter FSDP2 manages: where it is registered (the owner module and attribute
    name, and the modules that share it), and the dtypes of its all-gather and
    reduce-scatter (None: the parameter's own)."""

    owners: tuple[tuple[torch.nn.Module, str], ...]
    sharded: torch.Tensor  # the sharded DTensor parameter FSDP2 registers when resharded
    param_dtype: torch.dtype | None
    reduce_dtype: torch.dtype | None
    # FSDP2 over a tensor-parallel DTensor: the parameter's TP layout (DTensorSpec), which
    # the module computes on; None for a plain parameter
    tp_spec: Any = None


@dataclass(frozen=True)
class FsdpUnit:
    """One fully_shard call (one FSDPState): its modules, parameters and mixed precision."""

    modules: tuple[torch.nn.Module, ...]
    params: tuple[FsdpParam, ...]
    cast_inputs_to: torch.dtype | None  # mp_policy.param_dtype where cast_forward_inputs
    output_dtype: torch.dtype | None


def fsdp2_units(root: torch.nn.Module) -> list[FsdpUnit]:
    """The FSDP2 states in `root`'s tree, in named_modules pre-order, each once
    (fully_shard.state(module), FSDPState._fsdp_param_groups (2.13-2.15) or
    _fsdp_param_group (2.11), FSDPParam._module_info and sharded_param)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    units, seen = [], set()
    for sub in root.modules():
        if not isinstance(sub, FSDPModule):
            continue
        state = fully_shard.state(sub)
        if id(state) in seen:
            continue
        seen.add(id(state))
        params = []
        mp = state._mp_policy
        groups = getattr(state, "_fsdp_param_groups", None)  # 2.13+: one per mesh
        if groups is None:  # 2.11: one group a state, or None without parameters
            groups = [g for g in (state._fsdp_param_group,) if g is not None]
        for group in groups:
            for fp in group.fsdp_params:
                info = fp._module_info
                owners = ((info.module, info.param_name),) + tuple(
                    zip(info.shared_modules, info.shared_param_names))
                params.append(FsdpParam(owners=owners, sharded=fp.sharded_param,
                                        tp_spec=_tp_spec(fp),
                                        **_fsdp_dtypes(fp.sharded_param.dtype, mp)))
        units.append(FsdpUnit(
            modules=tuple(state._modules), params=tuple(params),
            cast_inputs_to=mp.param_dtype if mp.cast_forward_inputs else None,
            output_dtype=mp.output_dtype))
    return units


def _tp_spec(fp: Any) -> Any:
    """The DTensorSpec of a parameter FSDP2 shards over tensor parallelism (FSDPParam.
    _unsharded_dtensor_spec, 2.13-2.15; _tp_spec before), or None for a plain parameter."""
    spec = getattr(fp, "_unsharded_dtensor_spec", None)
    return spec if spec is not None else getattr(fp, "_tp_spec", None)


def _fsdp_dtypes(orig: torch.dtype, mp: Any) -> dict[str, torch.dtype | None]:
    """The all-gather and reduce-scatter dtypes of one parameter, as FSDP2 settles them at
    its lazy init (FSDPParam.init_dtype_attrs, 2.13-2.15): no reduce cast where reduce_dtype
    is param_dtype, no param cast where it is the parameter's dtype or not floating."""
    param, reduce = mp.param_dtype, mp.reduce_dtype
    if reduce == param:
        reduce = None
    if param == orig or not orig.is_floating_point:
        param = None
    return {"param_dtype": param, "reduce_dtype": reduce}


def _handle_ids(handle: Any) -> set[int]:
    """The hook ids of a RemovableHandle, or of FSDP2's _MultiHandle (its .handles)."""
    if handle is None:
        return set()
    inner = getattr(handle, "handles", None)
    if inner is not None:
        return set().union(*(_handle_ids(h) for h in inner))
    return {handle.id}


@contextlib.contextmanager
def fsdp2_hooks_removed(root: torch.nn.Module) -> Iterator[None]:
    """While capture traces: FSDP2's forward pre/post hooks (FSDPState._pre_forward_hook_
    handle / _post_forward_hook_handle, 2.13-2.15) are out of the modules' hook tables, so
    none of FSDP2's eager all-gathers, buffer frees or autograd hooks run on the traced
    tensors (Note [data parallel in the graph]); the tables are put back as they were."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    ids: set[int] = set()
    for sub in root.modules():
        if isinstance(sub, FSDPModule):
            state = fully_shard.state(sub)
            ids |= _handle_ids(getattr(state, "_pre_forward_hook_handle", None))
            ids |= _handle_ids(getattr(state, "_post_forward_hook_handle", None))
    saved = []
    for sub in root.modules():
        for table in (sub._forward_pre_hooks, sub._forward_hooks):
            if ids & set(table):
                saved.append((table, dict(table)))
                for k in ids & set(table):
                    del table[k]
    try:
        yield
    finally:
        for table, before in saved:
            table.clear()
            table.update(before)


def cast_floating(dtype: torch.dtype, tree: Any) -> Any:
    """Every floating-point tensor in `tree` cast to `dtype`, as FSDP2 casts forward inputs
    and outputs (_cast_fp_tensor through torch.distributed.utils._apply_to_tensors,
    2.13-2.15: containers, namedtuples and dataclasses)."""
    from torch.distributed.utils import _apply_to_tensors

    def cast(x: torch.Tensor) -> torch.Tensor:
        if not torch.is_floating_point(x) or x.dtype == dtype:
            return x
        return x.to(dtype)

    return _apply_to_tensors(cast, tree)


def unsharded(p: torch.Tensor, param_dtype: torch.dtype | None,
              reduce_dtype: torch.dtype | None, tp_spec: Any = None) -> torch.Tensor:
    """The full parameter of a Shard(0) DTensor `p`, as a plain tensor (SimpleFSDP's
    replicate-compute, torchtitan): all-gathered in `param_dtype`; its gradient
    reduce-scattered in `reduce_dtype` and averaged over the mesh, landing on `p` as a
    Shard(0) DTensor of `p`'s dtype. DTensor pads and unpads uneven shards as FSDP2 does.
    With `tp_spec` (FSDP2 over tensor parallelism: `p` on the (dp, tp) mesh, Shard(0) or
    _StridedShard(0) on dp), only the dp dim is gathered and the result is the DTensor of
    `tp_spec` on the tp mesh, as FSDP2 gives the module; its gradient averaged over dp.
    redistribute(forward_dtype=, backward_dtype=): 2.13-2.15."""
    from torch.distributed.tensor import DTensor, Partial, Replicate

    keep = list(p.placements[1:]) if tp_spec is not None else []
    full = p.redistribute(placements=[Replicate(), *keep], forward_dtype=param_dtype,
                          backward_dtype=reduce_dtype)
    local = full.to_local(grad_placements=[Partial("avg"), *keep])
    if tp_spec is None:
        return local
    return DTensor.from_local(local, tp_spec.mesh, tp_spec.placements, run_check=False,
                              shape=tp_spec.shape, stride=tp_spec.stride)


def fsdp_mesh_of(p: torch.Tensor) -> Any:
    return p._spec.mesh


# ---- DDP -------------------------------------------------------------------------------

@dataclass(frozen=True)
class DdpSettings:
    """What of a DistributedDataParallel decides the gradients (2.13-2.15 attributes)."""

    group: Any  # DDP's process group
    world: int
    bucket_bytes: int  # bucket_cap_mb in bytes
    first_bucket_bytes: int  # the first bucket's cap (1 MiB with the default cap)
    broadcast_buffers: bool
    syncing: bool  # require_backward_grad_sync: False inside no_sync()
    comm_hook: str | None  # a registered communication hook, or None
    mixed_precision: bool


def ddp_settings(ddp: torch.nn.Module) -> DdpSettings:
    import torch.distributed as dist

    config = getattr(ddp, "_bucket_config", None)
    cap = int(ddp.bucket_bytes_cap)
    first = int(getattr(config, "first_bucket_bytes_cap", cap) if config is not None else cap)
    hook = None
    if getattr(ddp, "_comm_hooks", None):
        hook = "python reducer comm hooks"
    else:
        data = ddp._get_ddp_logging_data() if hasattr(ddp, "_get_ddp_logging_data") else {}
        hook = data.get("comm_hook") or None
    return DdpSettings(
        group=ddp.process_group, world=dist.get_world_size(ddp.process_group),
        bucket_bytes=cap, first_bucket_bytes=first,
        broadcast_buffers=bool(ddp.broadcast_buffers),
        syncing=bool(ddp.require_backward_grad_sync), comm_hook=hook,
        mixed_precision=getattr(ddp, "mixed_precision", None) is not None)


@contextlib.contextmanager
def ddp_forward_is_the_module(ddp: torch.nn.Module,
                              before: Callable[[], None] | None = None) -> Iterator[None]:
    """While capture traces: calling the DDP wrapper calls the wrapped module (DDP's
    _pre_forward prepares its C++ reducer and syncs buffers with eager process-group calls;
    capture puts its own collectives in the graph instead). An instance attribute `forward`
    shadows DistributedDataParallel.forward, removed after. `before` runs first on each
    call (capture's buffer broadcast)."""
    module = ddp.module

    def forward(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        return module(*args, **kwargs)

    ddp.forward = forward
    try:
        yield
    finally:
        del ddp.forward


def all_reduce_sum(t: torch.Tensor, group: Any) -> torch.Tensor:
    """A functional all-reduce (sum) on `group`, waited: graph ops _c10d_functional.
    all_reduce + wait_tensor (2.11-2.15)."""
    import torch.distributed._functional_collectives as funcol

    return funcol.wait_tensor(funcol.all_reduce(t, "sum", group))


def broadcast(t: torch.Tensor, src: int, group: Any) -> torch.Tensor:
    """A functional broadcast from global rank `src` on `group`, waited (2.11-2.15)."""
    import torch.distributed._functional_collectives as funcol

    return funcol.wait_tensor(funcol.broadcast(t, src, group))


def group_name(group: Any) -> str:
    return group.group_name


def collective_groups(gm: torch.fx.GraphModule) -> list[tuple[str, int, int]]:
    """(name, size, world size) of each process group the graph's functional collectives
    name, in first-use order: the argument the op's schema calls `group_name`
    (_c10d_functional and _dtensor ops, 2.11-2.15), resolved in this process
    (_resolve_process_group)."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import _resolve_process_group

    names: dict[str, None] = {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or getattr(n.target, "namespace", None) not in (
                "_c10d_functional", "c10d_functional", "_dtensor"):
            continue
        schema = getattr(n.target, "_schema", None)
        for k, a in enumerate(schema.arguments if schema is not None else ()):
            value = n.args[k] if k < len(n.args) else n.kwargs.get(a.name)
            if a.name == "group_name" and isinstance(value, str):
                names.setdefault(value)
    world = dist.get_world_size() if names else 0
    return [(name, _resolve_process_group(name).size(), world) for name in names]


def queue_end_of_backward(fn: Callable[[], None]) -> None:
    """Run `fn` when the backward that is running ends (the autograd engine's
    queue_callback, what DDP and FSDP use; 2.11-2.15). Called from inside a backward hook."""
    from torch.autograd import Variable

    Variable._execution_engine.queue_callback(fn)


def swap_param(module: torch.nn.Module, name: str, value: torch.Tensor) -> torch.Tensor:
    """Put `value` where `module` registers its parameter `name` (a plain tensor too), and
    return what was there (torch.nn.utils._named_member_accessor.swap_tensor, 2.11-2.15:
    what stateless reparametrization uses)."""
    from torch.nn.utils._named_member_accessor import swap_tensor

    return swap_tensor(module, name, value)


def job_store() -> tuple[int, int, Any] | None:
    """(rank, world size, the job's key-value store) where torch.distributed is initialized:
    the default process group's store, which every rank of the job reaches (2.11-2.15);
    else None."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    from torch.distributed.distributed_c10d import _get_default_store

    return dist.get_rank(), dist.get_world_size(), _get_default_store()


def store_wait(store: Any, keys: list[str], seconds: float) -> bool:
    """Whether every key of `keys` is set in `store` within `seconds` (False at the timeout,
    torch's DistStoreError, or a store that cannot wait)."""
    import datetime

    try:
        store.wait(keys, datetime.timedelta(seconds=seconds))
    except Exception:  # noqa: BLE001 - DistStoreError (a RuntimeError) at the timeout, 2.11-2.15
        return False
    return True
