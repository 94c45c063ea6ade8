"""torch internals of the decomposition table precompile lowers with (2.11-2.15)."""
from __future__ import annotations

from typing import Any

import torch

# Note [the upsampling torch.compile decomposes]
#   F.interpolate(mode="bilinear") calls aten.upsample_bilinear2d.vec, a composite op.
#   torch.compile's trace runs with Python kernels on (AOTAutograd's), and there the .vec op
#   has a Python decomposition of its own (torch._decomp, 2.11-2.15) into indexing and
#   arithmetic, which Inductor fuses. precompile's capture records what the C++ composite
#   calls, aten.upsample_bilinear2d.default, which Inductor's table does not decompose, so
#   Inductor called the ATen kernel as a fallback and checked its result's strides against
#   the fake kernel's: on CUDA these disagree for a permuted input (BEiT's relative-position
#   table, interpolated on every call: the fake kernel says channels-last, the CUDA kernel
#   returns contiguous), and BEiT failed at the lowering, on inference and training, where
#   torch.compile works (H100, torch 2.11; benchmarks/zoo/upsample_probe.py has it in three
#   lines). The lowering's table now holds torch._decomp's decompositions of the .default
#   ops behind those .vec ops (linear 1-d, bilinear 2-d, trilinear 3-d), so the graph Inductor
#   lowers has what torch.compile's has, on CPU and CUDA: kernels Inductor generates where it
#   had called ATen, results within rounding of eager's, as torch.compile's are.
_AS_TORCH_COMPILE_TRACES = ("upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d")


def lowering_decompositions() -> dict[Any, Any]:
    """Inductor's decomposition table (select_decomp_table, 2.11-2.15) with the upsampling
    ops of Note [the upsampling torch.compile decomposes]; an op or decomposition this torch
    lacks is left out."""
    from torch._decomp import decomposition_table
    from torch._inductor.decomposition import select_decomp_table

    table = dict(select_decomp_table())
    for name in _AS_TORCH_COMPILE_TRACES:
        op = getattr(getattr(torch.ops.aten, name, None), "default", None)
        if op is not None and op not in table and op in decomposition_table:
            table[op] = decomposition_table[op]
    return table
