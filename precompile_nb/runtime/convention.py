"""The calling convention: one typed contract from capture to the artifact's driver.

What each positional argument of fn is (a module, a tensor, a container, a baked value), which
graph input each tensor is and what it is specialized to, what each result leaf is (a graph
output, an input returned as it is, a view of an input, a value), which inputs are written
back and which receive gradients. capture builds it, lower refines it
(`record._replace`), emit writes `convention.to_literal()` into the artifact, and both
`load.read_meta` and the driver read it back with the one decoder, `decode`.

The record classes are defined in `driver.py`, because every artifact carries the driver and
needs them to run (Note [one driver, two homes] in core/emit.py); this module is the package's
door to them, and it holds the artifact format version with its rule.

    >>> from precompile_nb.core.convention import TensorArg, decode
    >>> TensorArg(path="x").to_literal()
    {'kind': 'tensor', 'path': 'x'}
"""
from __future__ import annotations

import hashlib
from typing import Any, Union

from . import driver as _driver
from .driver import PcAliasOut as AliasOut
from .driver import PcConstant as Constant
from .driver import PcConstArg as ConstArg
from .driver import PcConstOut as ConstOut
from .driver import PcConvention as Convention
from .driver import PcDataGuard as DataGuard
from .driver import PcDTensor as DTensorLayout
from .driver import PcGraphOut as GraphOut
from .driver import PcGuard as Guard
from .driver import PcInputOut as InputOut
from .driver import PcLeaf as Leaf
from .driver import PcMesh as Mesh
from .driver import PcModuleArg as ModuleArg
from .driver import PcOptimArg as OptimArg
from .driver import PcOptimGroup as OptimGroup
from .driver import PcOptimParam as OptimParam
from .driver import PcProcessGroup as ProcessGroup
from .driver import PcPytreeArg as PytreeArg
from .driver import PcTensorArg as TensorArg
from .driver import PcTensorInput as TensorInput
from .driver import PcWriteBack as WriteBack

# the dims of a dense layout, outer to inner, or None (one rule for capture and the driver)
dense_order = _driver._pc_dense_order
# a class by module and qualified name, as an artifact finds a namedtuple again at load
find_class = _driver._pc_find_class
# how an artifact writes a DTensor placement and shows a device mesh (one text everywhere)
placement_text = _driver._pc_placement_text
mesh_text = _driver._pc_mesh_text

Argument = Union[ModuleArg, TensorArg, ConstArg, PytreeArg, OptimArg]
Output = Union[GraphOut, InputOut, AliasOut, ConstOut]

__all__ = ["AliasOut", "Argument", "ARTIFACT_FORMAT", "ARTIFACT_VERSION", "ConstArg",
           "ConstOut", "Constant", "Convention", "DataGuard", "DTensorLayout", "GraphOut", "Guard", "InputOut", "Leaf",
           "META_NAME", "Mesh", "ModuleArg", "OptimArg", "OptimGroup", "OptimParam", "Output", "ProcessGroup", "PytreeArg", "TensorArg", "TensorInput", "WriteBack",
           "decode", "dense_order", "find_class", "mesh_text", "placement_text",
           "schema_fingerprint", "SECTIONS"]

# Note [artifact version]
#   ARTIFACT_VERSION names the shape of what the package reads out of an artifact without
#   running it: the metadata literal (every record's fields and literal kinds, the union tags,
#   the header fields) and the section markers. It changes exactly when that shape changes, so
#   that this package never misreads an artifact written by another version of itself.
#   The driver's *code* is not part of it: each artifact carries its own copy and runs it.
#   The rule is enforced by tests/core/test_convention.py: it recomputes schema_fingerprint()
#   and compares it with FINGERPRINTS[ARTIFACT_VERSION]. When it fails, bump ARTIFACT_VERSION
#   and record the new fingerprint under it (keep the old ones: they document the history).
ARTIFACT_FORMAT = "precompile_nb.artifact"
# the metadata literal's name in python_code, and its sections in order (each opens with
# a marker line, emit.marker)
META_NAME = "_PC_META"
SECTIONS = ("graph", "metadata", "driver")
ARTIFACT_VERSION = 8
FINGERPRINTS = {
    2: "171e3cadd88976d991d90287a3f83fc7798119443ab51f09dd6200f436cdfda4",
    # 3: guards on dynamic sizes (mark_dynamic)
    3: "64e16d10a6757c970ee94d89d24c18c83177d2eb8188794d848dae453fc19b6f",
    # 4: DTensor inputs, results and gradients on device meshes
    4: "76a712b17cc14361ca4b7f89cd9efd55ac85b4f0b80ad7233ec0c4911c36c692",
    # 5: optimizer arguments (state and tensor hyperparameters as graph inputs)
    5: "0080f1d6cd244af266972bd68d08f19dbb04fb63bc3149d097a2a1c5f2de618c",
    # 6: data guards (branches on tensor data kept as the example took them)
    6: "4de3d779ea0a54d7acf37c4fc87dfaf1da58670e6cbd9fc56a14fee2e7d5cd87",
    # 7: process groups the graph's collectives name, with their sizes (checked at a call)
    7: "f8eb7186b204748b2280dc067bfae9cc3cdc9d95d2e7f9934336d9392743f484",
    # 8: the inputs the compiled graph writes in place (Note [writes inside the graph])
    8: "1e771f0eea1b7e47f54b44575113212ee871aa0e69c53801b62920575faf47f9",
}

_RECORDS = (Convention, TensorInput, Constant, ModuleArg, TensorArg, ConstArg, PytreeArg, Leaf,
            GraphOut, InputOut, AliasOut, ConstOut, WriteBack, Guard, Mesh, DTensorLayout,
            OptimArg, OptimGroup, OptimParam, DataGuard, ProcessGroup)


def decode(meta: Any) -> Convention:
    """The Convention in an artifact's metadata literal (the driver's own decoder); a
    malformed field at any depth is a PrecompileError (invariant 7) naming it."""
    return _driver._pc_decode(meta)


def schema_fingerprint() -> str:
    """sha256 of the artifact format's shape (Note [artifact version])."""
    def kind_text(kind: Any) -> str:
        if isinstance(kind, tuple) and kind and isinstance(kind[-1], type):
            return f"{kind[0]}:{kind[1].__name__}"
        if isinstance(kind, tuple) and kind and kind[0] == "record?":
            return f"record?:{kind[1]}"
        return repr(kind)

    parts = [ARTIFACT_FORMAT, META_NAME, repr(SECTIONS), repr(_driver._PC_HEADER)]
    for cls in _RECORDS:
        fields = list(cls._pc_fields)
        schema = {k: kind_text(v) for k, v in cls._pc_schema.items()}
        parts.append(f"{cls.__name__} kind={cls._pc_kind} fields={fields} schema={schema}")
    for name, members in sorted(_driver._PC_UNIONS.items()):
        parts.append(f"{name}={sorted((k, c.__name__) for k, c in members.items())}")
    for name, (_, text, _) in sorted(_driver._PC_KINDS.items()):
        parts.append(f"{name}: {text}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
