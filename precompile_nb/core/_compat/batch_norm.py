"""torch internals of BatchNorm's hidden writes: the ops whose schema does not say that they
write the running statistics, and how the functional re-trace makes those writes visible
(Note [BatchNorm's writes said before functionalizing]; checked versions beside each name).
"""
from __future__ import annotations

from typing import Any

import torch
from torch._decomp import decomposition_table

# BatchNorm ops whose schema does not say that they write the running statistics (training;
# args 3 and 4, training flag args[5]): functionalization leaves those writes where they are
# (lower.py moves them for the eager backend's data guards). _native_batch_norm_legit's
# schema does say it (2.11-2.15).
_WRITES_UNSAID = frozenset({"native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm",
                            "_batch_norm_impl_index", "batch_norm"})

# Note [BatchNorm's writes said before functionalizing]
#   A training BatchNorm writes its module's running statistics, but the op a trace records
#   (native_batch_norm on CPU, cudnn_batch_norm on CUDA) does not say so in its schema, so
#   functionalization cannot see those writes and leaves the op as it is; a graph holding
#   one is not functional, and Inductor got it through AOTAutograd, whose decompositions
#   run before its functionalization sees the ops. The functional re-trace does the same
#   for native_batch_norm, in the one trace it makes: the graph is run node by node and that
#   op is called as the op whose schema says what it writes (torch._decomp's decomposition
#   of native_batch_norm, 2.11-2.15: _native_batch_norm_legit in training,
#   _native_batch_norm_legit_no_training in eval), above functionalization, which then moves
#   the writes to the graph's end as copy_ into the inputs like any other write. The graph
#   is then plainly functional (Note [one trace between capture and Inductor]): the zoo's
#   CNNs on CPU (resnet, mobilenet, efficientnet, segformer, deeplab), in training and in
#   eval, took AOTAutograd's two traces before. Inductor's code is the same: AOTAutograd
#   applied the same decompositions. A GPU graph's BatchNorm keeps the old way (lower.py
#   asks for this only on the CPU, and under data guards as before): cudnn_batch_norm, what
#   a CUDA graph holds, said the same way (native_batch_norm plus an empty reserve buffer, which
#   cudnn_batch_norm_backward's decomposition never reads) gave a small CNN's training step
#   the same kernels on the H200, but SegFormer's real-size step then failed a stride assert
#   of Inductor's code at its first run, where AOTAutograd's way passes
#   (benchmarks/results/h200_round18): not understood yet, so not taken. miopen_batch_norm
#   (ROCm) and the composite ops (batch_norm, _batch_norm_impl_index, seen only in
#   pre-dispatch traces) keep the old way too.


def batch_norm_writes_unsaid(target: Any) -> bool:
    """Whether a node's target is one of the BatchNorm ops whose schema hides its writes of
    the running statistics (read by the functional copy's check and lower.py's data guards)."""
    return isinstance(target, torch._ops.OpOverload) and \
        target.__name__.split(".")[0] in _WRITES_UNSAID


_NATIVE = torch.ops.aten.native_batch_norm.default


class _WritesSaid(torch.fx.Interpreter):
    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target is not _NATIVE or kwargs:
            return super().call_function(target, args, kwargs)
        return decomposition_table[_NATIVE](*args)  # _native_batch_norm_legit(_no_training)


def writes_said(gm: torch.fx.GraphModule) -> Any:
    """`gm` as a function that calls its native_batch_norm nodes as the op whose schema says
    what they write, for functionalization to see (Note [BatchNorm's writes said before
    functionalizing]); `gm` itself where it has none."""
    if not any(n.op == "call_function" and n.target is _NATIVE for n in gm.graph.nodes):
        return gm
    interpreter = _WritesSaid(gm)
    return lambda *args: interpreter.run(*args)
