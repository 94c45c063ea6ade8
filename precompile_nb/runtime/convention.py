"""The calling convention: one typed contract from capture to the artifact's driver.

What each positional argument of fn is (a module, a tensor, a container, a baked value), which
graph input each tensor is and what it is specialized to, what each result leaf is (a graph
output, an input returned as it is, a view of an input, a value), which inputs are written
back and which receive gradients. capture builds it, lower refines it
(`record._replace`), emit writes `convention.to_literal()` into the artifact, and both
`load.read_meta` and the driver read it back with the one decoder, `decode`.

The record classes are defined in `driver.py`, because every artifact carries the driver and
needs them to run (Note [one driver, two homes] in core/emit.py); this module is the package's
door to them (and to the artifact format's version, artifact_format.py).

    >>> from precompile_nb.core.convention import TensorArg, decode
    >>> TensorArg(path="x").to_literal()
    {'kind': 'tensor', 'path': 'x'}
"""
from __future__ import annotations

import hashlib
from typing import Any, Union

from . import driver as _driver
from .artifact_format import ARTIFACT_FORMAT, ARTIFACT_VERSION, META_NAME, SECTIONS
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
from .driver import PcModuleAttr as ModuleAttr
from .driver import PcOptimArg as OptimArg
from .driver import PcOptimGroup as OptimGroup
from .driver import PcOptimParam as OptimParam
from .driver import PcProcessGroup as ProcessGroup
from .driver import PcPytreeArg as PytreeArg
from .driver import PcSizeOut as SizeOut
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
# a baked value's comparison (same type and ==), and how a checked model attribute is named
same_value = _driver._pc_same_value
attribute_where = _driver._pc_attr_where
# the functions an artifact evaluates a size expression (a guard's, a size result's) with
size_functions = frozenset(_driver._PC_GUARD_FNS) - {"__builtins__"}

Argument = Union[ModuleArg, TensorArg, ConstArg, PytreeArg, OptimArg]
Output = Union[GraphOut, InputOut, AliasOut, ConstOut, SizeOut]

__all__ = ["AliasOut", "Argument", "ARTIFACT_FORMAT", "ARTIFACT_VERSION", "ConstArg",
           "ConstOut", "Constant", "Convention", "DataGuard", "DTensorLayout", "GraphOut",
           "Guard", "InputOut", "Leaf", "META_NAME", "Mesh", "ModuleArg", "ModuleAttr",
           "OptimArg", "OptimGroup", "OptimParam", "Output", "ProcessGroup", "PytreeArg",
           "SizeOut", "TensorArg", "TensorInput", "WriteBack",
           "attribute_where", "decode", "dense_order", "find_class", "mesh_text",
           "placement_text", "same_value", "schema_fingerprint", "SECTIONS", "size_functions"]


_RECORDS = (Convention, TensorInput, Constant, ModuleArg, ModuleAttr, TensorArg, ConstArg,
            PytreeArg, Leaf, GraphOut, InputOut, AliasOut, ConstOut, WriteBack, Guard, Mesh,
            DTensorLayout, OptimArg, OptimGroup, OptimParam, DataGuard, ProcessGroup, SizeOut)


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

    parts = [ARTIFACT_FORMAT, META_NAME, repr(SECTIONS), repr(_driver._PC_HEADER),
             repr(_driver._PC_TREE_TYPES)]
    for cls in _RECORDS:
        fields = list(cls._pc_fields)
        schema = {k: kind_text(v) for k, v in cls._pc_schema.items()}
        parts.append(f"{cls.__name__} kind={cls._pc_kind} fields={fields} schema={schema}")
    for name, members in sorted(_driver._PC_UNIONS.items()):
        parts.append(f"{name}={sorted((k, c.__name__) for k, c in members.items())}")
    for name, (_, text, _) in sorted(_driver._PC_KINDS.items()):
        parts.append(f"{name}: {text}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
