"""torch internals of the Triton kernels' names a CUDA lowering gives (Note [kernel names
Inductor's launcher check can find]); checked on 2.13 and 2.15 (Triton 3.9), measured on
2.11 with Triton 3.6 (the H100, benchmarks/results/h100_round43)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .scoped_patch import ScopedPatch, switched_off

# Note [kernel names Inductor's launcher check can find]
#   Triton writes a compiled kernel's binary to its cache under the kernel's name cut to 150
#   characters (triton.compiler.compile: file_name = src.name[:150], Triton 3.6-3.9), while
#   Inductor, deciding whether torch's static CUDA launcher can launch the kernel, looks for
#   the binary under the whole name (StaticTritonCompileResult.can_statically_launch,
#   2.11-2.15). A longer name (Inductor's descriptive names list up to ten fused aten ops:
#   a transformer's backward fuses _scaled_dot_product_..._backward with native_layer_norm_
#   backward and eight more) is never found, so that kernel takes Triton's own launcher,
#   whose C stub gcc builds in the compiling process, one signature after another, on the
#   main thread (0.40 s of the transformer training step's cold precompile on the H100,
#   benchmarks/results/h100_round42 section 5; torch.compile paid 0.55 s the same way).
#   While precompile lowers for a GPU, the fused-op part of a Triton kernel's name is cut to
#   _FUSED_CHARS characters (at an op boundary where one is near), which keeps the whole name
#   (triton_, the kind, the fused ops, the kernel's number) under Triton's cut: every binary
#   is found where Inductor looks and every kernel gets the static launcher, in the compile
#   workers (who compile the source with the name in it) as in this process. Only the name
#   changes: the kernel's body, and so what it computes, is the same; names stay unique (the
#   number Inductor appends) and still list the kernel's first ops; the report shows the
#   names as compiled. On the H100 (benchmarks/results/h100_round43) the transformer step's
#   three such kernels (178-179 characters) took Triton's launcher, 0.28 s of gcc, and none
#   with the names cut. CPU kernels (no such cut) and a torch.compile beside the precompile
#   (another thread) keep Inductor's names. PRECOMPILE_NB_SHORT_KERNEL_NAMES=0 (or off,
#   false, no) keeps Inductor's names.
_FUSED_CHARS = 120  # the whole name: "triton_", a kind of 3, two "_", these, the number


def shortened(fused: str, limit: int = _FUSED_CHARS) -> str:
    """`fused` (Inductor's fused-op part of a kernel name) cut to at most `limit` characters,
    at the last op boundary ("_") past two thirds of it, else at `limit`."""
    if len(fused) <= limit:
        return fused
    cut = fused[:limit]
    boundary = cut.rfind("_")
    if boundary >= limit * 2 // 3:
        cut = cut[:boundary]
    return cut.rstrip("_")


def _triton_codegen() -> Any:
    """Inductor's Triton code generation module (2.11-2.15: torch._inductor.codegen.triton,
    which calls get_fused_kernel_name by its module-level name), or None."""
    try:
        import torch._inductor.codegen.triton as codegen
    except ImportError:
        return None
    return codegen if hasattr(codegen, "get_fused_kernel_name") else None


def _cut_names(original: Any, patch: ScopedPatch) -> Any:
    def get_fused_kernel_name(*args: Any, **kwargs: Any) -> str:
        name = original(*args, **kwargs)
        return shortened(name) if patch.on() and isinstance(name, str) else name

    return get_fused_kernel_name


_PATCH = ScopedPatch(
    lambda: getattr(_triton_codegen(), "get_fused_kernel_name", None),
    lambda f: setattr(_triton_codegen(), "get_fused_kernel_name", f),
    _cut_names)


@contextlib.contextmanager
def kernel_names_found_by_inductor(gpu: bool = True) -> Iterator[None]:
    """While this thread lowers a graph for a GPU (`gpu`): Note [kernel names Inductor's
    launcher check can find]."""
    if not gpu or switched_off("PRECOMPILE_NB_SHORT_KERNEL_NAMES"):
        yield
        return
    with _PATCH.active():
        yield
