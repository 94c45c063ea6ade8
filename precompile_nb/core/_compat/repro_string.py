"""Inductor's runnable-repro string, written only where a structured trace reads it (Note [no
repro string nobody reads]); checked on 2.13 and 2.15, seen on 2.11 (the GPU machine)."""
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from .scoped_patch import ScopedPatch

# Note [no repro string nobody reads]
#   For every graph it compiles, Inductor (compile_fx's codegen_and_compile: 2.11, 2.13, 2.15)
#   writes a runnable repro of it (torch._dynamo.repro.after_aot.save_graph_repro: the
#   graph's code, its inputs, the settings, and on a machine with CUDA the output of `nvcc
#   --version`, a process started per graph) for the structured trace (TORCH_TRACE), whose
#   handler drops it where no trace is being written (2.15 builds it in the trace's payload
#   function, which torch's own handler still asks for). On round 40's H100 the nvcc run alone
#   was 53 ms of the tiny MLP's cold precompile (benchmarks/results/h100_round40/timeline); on
#   the CPU the string took 4-17 ms of a real-size training step's (GPT-2, timm's ResNet).
#   While precompile lowers, where no handler can write the structured trace (torch's own has
#   no directory, and none other is attached), the repro is left empty; with TORCH_TRACE set,
#   or on another thread (a torch.compile beside the precompile), Inductor writes it as
#   before. The string is kept nowhere else precompile uses: its graph cache is off while it
#   lowers (Note [no graph caches in a private dir]). Inductor's debug dumps
#   (TORCH_COMPILE_DEBUG) call their own copy of the function and are left alone.


def _after_aot() -> Any:
    import torch._dynamo.repro.after_aot as after_aot

    return after_aot


def _trace_listening() -> bool:
    """Whether a structured trace may be written (2.13, 2.15: trace_structured hands its payload
    to torch._logging._internal.trace_log's handlers at DEBUG; the one torch installs itself,
    LazyTraceHandler, writes only with a directory (TORCH_TRACE), or inside Meta's own builds
    and jobs, which its first write checks: counted as listening)."""
    try:
        import torch
        from torch._logging._internal import LazyTraceHandler, trace_log
    except ImportError:
        return True
    for h in trace_log.handlers:
        if h.level > logging.DEBUG:  # the trace's records are DEBUG: this one drops them
            continue
        if not isinstance(h, LazyTraceHandler) or h.root_dir is not None or \
                getattr(h, "stream", None) is not None or \
                not hasattr(torch.version, "git_version") or os.getenv("MAST_HPC_JOB_NAME"):
            return True
    return False


def _only_when_read(original: Any, patch: ScopedPatch) -> Any:
    def save_graph_repro(fd: Any, gm: Any, args: Any, compiler_name: str, *a: Any,
                         **kw: Any) -> Any:
        if patch.on() and compiler_name == "inductor" and kw.get("save_dir") is None \
                and not _trace_listening():
            return None
        return original(fd, gm, args, compiler_name, *a, **kw)

    return save_graph_repro


_PATCH = ScopedPatch(lambda: getattr(_after_aot(), "save_graph_repro", None),
                     lambda f: setattr(_after_aot(), "save_graph_repro", f), _only_when_read)


@contextlib.contextmanager
def repro_string_only_when_read() -> Iterator[None]:
    """While this thread lowers: Note [no repro string nobody reads]."""
    with _PATCH.active():
        yield
