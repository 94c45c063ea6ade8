"""Pytree nodes as fn's arguments and results hold them: a TreeSpec's children, and the class of
a namedtuple or of a structseq node (torch.return_types, what `x.max(1)` returns). Checked on
2.11, 2.13, 2.14 and 2.15."""
from __future__ import annotations

from typing import Any

from torch.utils._pytree import is_namedtuple_class, is_structseq_class


def treespec_children(spec: Any) -> list[Any]:
    """A TreeSpec's child specs: `children()` where it exists (2.13, 2.14: `children_specs`
    is deprecated there), else `children_specs` (2.11)."""
    children = getattr(spec, "children", None)
    if callable(children):
        return list(children())
    return list(spec.children_specs)


def namedtuple_class(spec: Any) -> type | None:
    """The namedtuple class of a TreeSpec node, or None: pytree keeps namedtuples under the
    type `collections.namedtuple` with the class as context (2.11-2.14), or under the class
    itself in older layouts."""
    for cand in (spec.context, spec.type):
        if isinstance(cand, type) and is_namedtuple_class(cand):
            return cand
    return None


def structseq_class(spec: Any) -> type | None:
    """The structseq class of a TreeSpec node (torch.return_types.max and the other results of
    torch's ops with named fields), or None. Pytree flattens them on every version; only 2.15
    serialises them (treespec_dumps raises for them on 2.11-2.14)."""
    return spec.type if is_structseq_class(spec.type) else None


def structseq_fields(cls: type) -> list[str]:
    """A structseq class's field names, in order (`__match_args__`: Python >= 3.10)."""
    return list(getattr(cls, "__match_args__", ()))
