"""torch internals of the lowering store (Note [a lowering made once], core/lowerings.py):
what decides the module Inductor makes of a functional graph, as one text to hash, and the
name of the store for this torch, compiler and Triton. Checked on 2.13 and 2.15 (2.11 and
2.14.1 have the same names: codecache.compiled_fx_graph_hash(gm, example_inputs, fx_kwargs,
inputs_to_check) -> (key, debug lines), a ShapeEnv's var_to_val / var_to_range /
replacements / divisible / guards)."""
from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Sequence
from typing import Any

import torch

from .compile_pool import wait_for_triton_hash
from .inductor import inductor_cache_dir
from .scoped_patch import switched_off


def graph_and_setting_key(gm: torch.fx.GraphModule, fake_inputs: Sequence[Any]) -> str | None:
    """Inductor's own FX graph key of `gm` with these inputs: the graph's code and constants,
    each input's size, stride, dtype and device (sizes as symbols where dynamic), Inductor's
    and AOTAutograd's configuration, the torch build, the GPU and Triton, deterministic and
    matmul settings, the default dtype, custom passes; plus what that key leaves to its
    callers: the hints and ranges of the symbols, the guards already taken on them, the CPU's
    vector ISA and thread count. None where Inductor cannot key it (an unpicklable constant
    or custom pass): such a graph is lowered every time."""
    wait_for_triton_hash()  # the key hashes Triton: once, on the set-up thread where it runs
    try:
        from torch._inductor.codecache import compiled_fx_graph_hash

        key, _ = compiled_fx_graph_hash(gm, list(fake_inputs), {}, [])
        parts = [key, _shape_env_state(fake_inputs), _cpu_state()]
    except Exception:  # noqa: BLE001 - BypassFxGraphCache, or any failure of torch's keying:
        return None  # the graph is lowered as if no store existed, never refused for it
    return "\n".join(parts)


def _shape_env_state(fake_inputs: Sequence[Any]) -> str:
    """The shape environment of dynamic inputs as text ("" where every size is static)."""
    env = next((t.fake_mode.shape_env for t in fake_inputs
                if isinstance(t, torch.Tensor) and getattr(t, "fake_mode", None) is not None
                and t.fake_mode.shape_env is not None), None)
    if env is None:
        return ""

    def table(d: Any) -> str:
        return repr(sorted((str(k), str(v)) for k, v in dict(d).items()))

    guards = [str(g.expr) for g in getattr(env, "guards", ())]
    hints = getattr(env, "backed_var_to_val", None)  # 2.15 (var_to_val, deprecated there)
    return "|".join((table(env.var_to_val if hints is None else hints),
                     table(env.var_to_range), table(env.replacements),
                     repr(sorted(map(str, getattr(env, "divisible", ())))), repr(guards)))


def _cpu_state() -> str:
    """What decides the vector ISA Inductor's C++ kernels are written for (the CPU's
    capability as ATen reads it, with the compiler in the store's name: Inductor's own probes
    build and run a program per ISA, seconds that a hit would not otherwise spend), and the
    thread count they may specialize on."""
    return "|".join((platform.machine(), str(torch.backends.cpu.get_cpu_capability()),
                     os.environ.get("ATEN_CPU_CAPABILITY", ""), str(torch.get_num_threads())))


def lowering_reuse_on() -> bool:
    """Whether a precompile may take an earlier lowering whole (Note [a lowering made once]):
    off with PRECOMPILE_NB_LOWERING_REUSE=0, or PRECOMPILE_NB_KERNEL_REUSE=0 (no kernel an
    earlier precompile made is taken). Where it is off, nothing keys a lowering."""
    return not (switched_off("PRECOMPILE_NB_LOWERING_REUSE")
                or switched_off("PRECOMPILE_NB_KERNEL_REUSE"))


def lowering_store_dir() -> str | None:
    """Where whole lowerings are kept for this torch build, C++ compiler and Triton (Note [a
    lowering made once]), or None where reuse is off (PRECOMPILE_NB_LOWERING_REUSE=0, or
    PRECOMPILE_NB_KERNEL_REUSE=0: no kernel an earlier precompile made is taken) or no compiler
    version can be read. Call it outside private_compile_cache (it names Inductor's own cache
    dir)."""
    if not lowering_reuse_on():
        return None
    try:
        from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler

        compiler = get_cpp_compiler()
        parts = [torch.__version__, str(torch.version.git_version), compiler,
                 str(get_compiler_version_info(compiler))]
    except Exception:  # noqa: BLE001 - no store: every graph is lowered, as before
        return None
    try:
        import triton

        parts.append(str(triton.__version__))
    except ImportError:
        parts.append("no triton")
    tag = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return os.path.join(inductor_cache_dir(), "precompile_nb_lowerings", tag)


def lowering_may_be_stored() -> bool:
    """Whether an earlier precompile may have kept a lowering this one could take whole: reuse
    is on and the store (for any torch build) holds anything. A build that finds one imports
    no more of Inductor than the key needs, so only a build that cannot imports the lowering's
    modules at its start (Note [the collector pauses for a build])."""
    if not lowering_reuse_on():
        return False
    try:
        with os.scandir(os.path.join(inductor_cache_dir(), "precompile_nb_lowerings")) as it:
            return any(True for _ in it)
    except OSError:  # no store yet
        return False


def captured_records_on() -> bool:
    """Whether the captured graphs' records are read and kept (Note [a hit before
    functionalizing]); PRECOMPILE_NB_CAPTURED_RECORD=0 functionalizes every captured graph
    before the lowering store is looked in."""
    return not switched_off("PRECOMPILE_NB_CAPTURED_RECORD")
