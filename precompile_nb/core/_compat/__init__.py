"""The one door to torch internals.

Every private torch API precompile_nb uses, and every torch-version branch, lives here with a
comment naming the versions it was checked on (2.11 on the GPU machine, 2.13 in CI, 2.14,
2.15 on CPU).
Nothing here patches torch globally; what must be patched is patched inside a context manager
and restored.

The door is one package: `from . import _compat` and `_compat.NAME` reach every name, whichever
of its modules holds it:
  tracing.py   capture: make_fx, fake tensors, symbolic sizes, marks, autocast, RNG, DTensor
  inductor.py  lowering and the compile-path load: AOTAutograd + Inductor, caches, Triton
  straight_to_inductor.py  a functional graph handed to Inductor without AOTAutograd's traces
  conv_layout.py  which convolution layouts Inductor is given, at lowering
  conv_as_mm.py  a depthwise-separable CNN's 1x1 convolutions as matrix products (CUDA)
  cpp_runs.py  the order of a CPU graph's scheduled nodes: C++ kernels in fewer runs
  isa_probes.py  Inductor's CPU ISA probes, run at once
  kernel_store.py  C++ kernels kept between processes and reused
  triton_store.py  Triton kernels kept between processes and reused
  lowering_key.py  what decides a lowering, as a key; where whole lowerings are kept
  stack_frames.py  make_fx's node stack traces, each frame's line read only when kept
  backward_nodes.py  whether a traced graph holds ops autograd ran inside fn
  result_sizes.py  a number in fn's result computed from dynamic sizes, as an expression
  module_attrs.py  which plain Python attributes of the models fn reads while traced
  tree_nodes.py  pytree nodes of fn's arguments and results: namedtuples, structseqs
  repro_string.py  Inductor's runnable-repro string, written only where a trace reads it
  scoped_patch.py  a torch function replaced while some thread needs it
  compile_pool.py  Inductor's Triton compile workers and Triton's set-up, started with the capture
  kernel_threads.py  Triton kernels met before those workers are ready, compiled on threads
  kernel_names.py  Triton kernels' names kept under the length Triton files their binaries by
  autotune.py  tuning a compiled CUDA graph at several sizes, at lowering
  pieces.py    a graph compiled in pieces: kernel names apart, the modules joined, loaded
  parallel.py  capture of data parallelism: FSDP2's states and hooks, DDP's settings
  warm.py      the warm load, without the compiler stack
  batch_norm.py  BatchNorm's hidden writes of its statistics, said before functionalizing
  realdata.py  data guards: fake tensors with real values, the decisions taken from them
  answers.py   what torch's compiler flags answer on the tracing thread while capture traces
warm is imported with the door (a warm load runs on it; it imports no compiler); every other
module at the first use of one of its names (`_LAZY`): a warm load imports none of them (12.8 ms
of a tiny MLP's 67 ms load on the 2-core development machine when they came with the door;
inductor.py and scoped_patch.py, which a warm load does not use either, came with it until
round 41: ~0.6 ms of `from precompile_nb import precompile`).
"""
from __future__ import annotations

import importlib
import threading
from typing import Any

import torch

from .warm import (  # noqa: F401 - the door re-exports
    WARM_IMPORTS,
    can_launch_cubins,
    cpp_binding_source,
    cubins_from_memory,
    cuda_capability,
    extern_kernel_location,
    is_triton_driver_helper,
    launch_cubin,
    light_inductor_cache_dir,
    load_cpp_kernel,
    load_cubin,
    load_cubin_bytes,
    profiler_module,
    record_function_fast,
    relocate_cache_file,
    resolve_torch_path,
    triton_binaries_only,
    triton_cache_dir,
    warm_module_attrs,
)

# The capture's and the lowering's side of the door, imported at the first use of one of its
# names (Note [a load imports no stage] in core/__init__.py): NAME -> (module, its name there).
_LAZY_NAMES: dict[str, tuple[str, ...]] = {
    "inductor": ("SKIP_CACHE_PARTS", "in_process_kernel_loads", "inductor_cache_dir",
                 "inductor_compile", "isa_probe_sources", "isa_probes_in_process",
                 "private_compile_cache", "recording_triton_launchers", "reproducible_comment",
                 "reproducible_inductor_source", "run_isa_probes_fresh", "running_artifact",
                 "same_kernel_keys", "strip_inductor_main", "triton_launch_records"),
    "answers": ("tracing_as_a_compiler",),
    "backward_nodes": ("graph_runs_backward",),
    "result_sizes": ("size_expression",),
    "module_attrs": ("attribute_reads",),
    "tree_nodes": ("namedtuple_class", "structseq_class", "structseq_fields",
                   "treespec_children"),
    "autotune": ("SizeChoice", "autotune_now", "tuning_at_sizes"),
    "compile_pool": ("end_build_workers", "forked_worker_count", "import_lowering",
                     "start_compile_workers", "start_triton_setup", "workers_for_graph"),
    "conv_layout": ("backward_convolutions_in_channels_last",
                    "backward_convolutions_see_channels_last",
                    "has_depthwise_conv_and_no_backward", "layout_optimized",
                    "training_step_layout"),
    "kernel_store": ("kernel_store_dir", "reusing_built_kernels"),
    "kernel_threads": ("kernel_thread_counts",),
    "pieces": ("compile_dirs", "fake_inputs", "join_modules", "kernel_names_tagged",
               "load_module", "warm_inductor"),
    "triton_store": ("keeping_triton_kernels", "triton_store_dir"),
    "batch_norm": ("batch_norm_writes_unsaid",),
    "lowering_key": ("graph_and_setting_key", "lowering_may_be_stored", "lowering_reuse_on",
                     "lowering_store_dir", "captured_records_on"),
    "realdata": (
        "Decision", "assume_nonnegative_bounds", "fake_with_real_values", "forget_real_values",
        "real_values",
    ),
    "tracing": (
        "DimMarks", "ambient_trace", "assume", "autocast_enabled_devices",
        "backward_op_origins", "condition_at", "condition_source",
        "data_dependent_errors",
        "decided_random_draws", "dim_marks", "dtensor_from_local", "dtensor_local",
        "dtensor_mesh", "fake_with_unbacked", "functionalize", "fused_fast_paths",
        "guard_condition", "has_effects", "is_aten_op", "is_carried_placement",
        "is_collective", "is_dtensor", "is_nested", "is_tensor_subclass",
        "lowering_guard_condition", "make_fx_trace", "mark_dynamic", "mark_unbacked",
        "may_stop_midway", "mesh_groups", "no_autocast",
        "optimizer_scalar_dtype", "optimizer_step_tracing", "preserved_rng_state",
        "reads_into_numpy", "rename_node", "reparametrize", "runtime_asserts",
        "storage_key",
    ),
    "parallel": (
        "DdpSettings", "FsdpParam", "FsdpUnit", "all_reduce_sum", "broadcast", "cast_floating",
        "collective_groups", "data_parallel_wrapper", "ddp_forward_is_the_module",
        "ddp_settings", "fsdp2_hooks_removed", "fsdp2_units", "fsdp_mesh_of", "group_name",
        "job_store", "queue_end_of_backward", "store_wait", "swap_param", "unsharded",
    ),
}
_LAZY: dict[str, tuple[str, str]] = {
    "conv_1x1_plan": ("conv_as_mm", "plan_for"),
    "data_decisions": ("realdata", "decisions"),
    "insert_data_checks": ("realdata", "insert_checks"),
    "is_random_op": ("realdata", "is_random"),
    "unbacked_producers": ("realdata", "producers"),
    **{name: (module, name) for module, names in _LAZY_NAMES.items() for name in names},
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where[0]}"), where[1])
    globals()[name] = value  # the next use is a plain global
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

# One lock for everything that touches process-global compiler state: the inductor cache dir
# environment, module reparametrization of shared example models, the RNG save/restore. torch
# 2.14.1's own precompile is not thread-safe; we serialize capture+lower and the cache
# unpacking in load.
GLOBAL_LOCK = threading.RLock()


def torch_build_id() -> str:
    """Identifies the torch build a cache was made with: version + git revision + CUDA."""
    git = getattr(torch.version, "git_version", "") or ""
    return f"{torch.__version__}+{git[:12]}+cuda={torch.version.cuda}"


