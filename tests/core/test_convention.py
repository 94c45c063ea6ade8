"""The calling convention as one typed contract: the records round-trip through the artifact's
metadata literal, every malformed nested field is a PrecompileError at load, and the artifact
format version follows its written rule (Note [artifact version] in
runtime/artifact_format.py)."""
from __future__ import annotations

import ast
import copy
import pprint
import warnings

import pytest
import torch
from torch import nn

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import build
from precompile_nb.runtime.artifact_format import ARTIFACT_VERSION, FINGERPRINTS
from precompile_nb.runtime.convention import (AliasOut, ConstArg, Constant, ConstOut, GraphOut,
                                           InputOut, ModuleArg, PytreeArg, TensorArg, decode,
                                           schema_fingerprint)
from precompile_nb.core.emit import META_NAME
from precompile_nb.core.load import read_meta


def _every_kind(m, x, batch, k):
    """Touches every argument and output kind: a module, a tensor, a container with a baked
    leaf, a baked value; a graph output, an input returned as is, a view of an input, a
    value, a literal constant; a backward."""
    scale = torch.tensor([1.0, 2.0, 3.0, 4.0])  # a small literal constant
    y = m(x * scale) * k + batch["b"].sum()
    y.sum().backward()
    return {"y": y.detach(), "x": x, "row": batch["a"][0], "tag": batch["tag"]}


def _args():
    torch.manual_seed(0)
    return (nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)), torch.randn(5, 4),
            {"a": torch.randn(2, 3), "b": torch.randn(3), "tag": "train"}, 2.0)


@pytest.fixture(scope="module")
def eager_art():
    return build(_every_kind, *_args(), backend="eager")


def _meta_of(code: str) -> tuple[dict, int, int]:
    tree = ast.parse(code)
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", None) == META_NAME)
    lines = code.splitlines(True)
    start = sum(len(ln) for ln in lines[:node.lineno - 1]) + node.col_offset
    end = sum(len(ln) for ln in lines[:node.end_lineno - 1]) + node.end_col_offset
    return ast.literal_eval(node.value), start, end


def _with_meta(code: str, meta: dict, span: tuple[int, int] | None = None) -> str:
    start, end = span or _meta_of(code)[1:]
    return code[:start] + f"{META_NAME} = " + pprint.pformat(meta, sort_dicts=False) + code[end:]


def test_capture_builds_typed_records_for_every_argument_and_output_kind(eager_art):
    conv = eager_art.lowered.convention
    assert [type(a) for a in conv.args] == [ModuleArg, TensorArg, PytreeArg, ConstArg]
    assert conv.args[0].names == ("0.weight", "0.bias", "1.weight", "1.bias",
                                  "1.running_mean", "1.running_var", "1.num_batches_tracked")
    assert conv.args[0].n_params == 4 and conv.args[0].training is True
    assert [(lf.path, lf.tensor) for lf in conv.args[2].leaves] == [
        ("batch['a']", True), ("batch['b']", True), ("batch['tag']", False)]
    assert conv.args[3].value == 2.0
    assert {type(o) for o in conv.outputs} == {GraphOut, ConstOut}
    assert conv.constants == (Constant(shape=(4,), dtype="float32", device="cpu",
                                       data=[1.0, 2.0, 3.0, 4.0]),)
    assert [conv.inputs[g.input].where for g in conv.grads] == [
        "m.0.weight", "m.0.bias", "m.1.weight", "m.1.bias"]


def test_inductor_refines_outputs_into_input_and_alias_records():
    art = build(lambda x: (x, x[1:], x * 2), torch.randn(3, 4))
    outs = art.lowered.convention.outputs
    assert outs[0] == InputOut(index=0)
    assert outs[1] == AliasOut(index=0, size=(2, 4), stride=(4, 1), offset=4)
    assert outs[2] == GraphOut(index=0)
    assert art.captured.convention.outputs == (GraphOut(0), GraphOut(1), GraphOut(2))


def test_the_metadata_literal_decodes_to_the_lowered_convention(eager_art):
    meta = read_meta(eager_art.python_code)
    assert decode(meta) == eager_art.lowered.convention


def test_an_artifact_from_the_records_matches_eager(eager_art):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = precompile.load(eager_art.python_code, eager_art.cache)
    m1, x, batch, k = _args()
    m2 = copy.deepcopy(m1)
    got, want = f(m1, x, batch, k), _every_kind(m2, x, batch, k)
    torch.testing.assert_close(got["y"], want["y"])
    assert got["x"] is x and got["tag"] == "train"
    assert got["row"].data_ptr() == batch["a"].data_ptr()  # a view of the runtime input
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(p1.grad, p2.grad)
    torch.testing.assert_close(m1[1].running_mean, m2[1].running_mean)


# ---------------------------------------------------------------------------------------------
# a fuzz of the metadata literal: every nested field dropped, renamed and retyped


def _paths(v, at=()):
    """Every (path, is_dict_key) in a literal, depth first."""
    if isinstance(v, dict):
        for k, x in v.items():
            yield at + (k,), True
            yield from _paths(x, at + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield at + (i,), False
            yield from _paths(x, at + (i,))


def _edit(meta, path, how):
    meta = copy.deepcopy(meta)
    parent = meta
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    if how == "drop":
        del parent[key]
    elif how == "rename":
        parent[f"{key}_renamed"] = parent.pop(key)
    else:  # retype: a value of a type no field of that place accepts
        parent[key] = [] if isinstance(parent[key], dict) else {}
    return meta


def _cases(code):
    meta, _, _ = _meta_of(code)
    for path, is_key in _paths(meta):
        for how in (("drop", "rename", "retype") if is_key else ("retype",)):
            yield path, how, _edit(meta, path, how)


def test_every_dropped_renamed_or_retyped_metadata_field_is_a_precompile_error_at_load(
        eager_art):
    inductor_code = build(lambda x: (x.add_(1), x[1:], x * 2)[1:], torch.randn(3, 4)).python_code
    n = 0
    for code in (eager_art.python_code, inductor_code):
        span = _meta_of(code)[1:]
        for path, how, meta in _cases(code):
            edited = _with_meta(code, meta, span)
            with pytest.raises(PrecompileError) as ei:
                precompile.load(edited, None)
            assert ei.value.invariant == 7 and ei.value.stage == "load", (path, how)
            n += 1
    assert n > 300  # every field of both artifacts, not a sample


def test_a_malformed_field_is_named_with_its_full_path(eager_art):
    meta, _, _ = _meta_of(eager_art.python_code)
    meta["args"][2]["leaves"][1]["tensor"] = "yes"
    with pytest.raises(PrecompileError) as ei:
        read_meta(_with_meta(eager_art.python_code, meta))
    assert ei.value.where == "_PC_META['args'][2]['leaves'][1]['tensor']"
    assert ei.value.expected == "a bool" and ei.value.actual == "'yes'"


def test_every_record_literal_names_each_field_of_its_record_exactly():
    # a load builds each record from its literal's schema alone (no __init__ runs), so a
    # field missing from the schema would be left unset, and the first call would fail on it
    from precompile_nb.runtime import driver

    records = [c for c in vars(driver).values()
               if isinstance(c, type) and hasattr(c, "_pc_schema")]
    assert len(records) > 10
    for c in records:
        assert tuple(c._pc_schema) == c._pc_fields, c.__name__


def test_metadata_whose_indices_point_nowhere_is_rejected_at_load(eager_art):
    meta, _, _ = _meta_of(eager_art.python_code)
    meta["grads"][0]["input"] = 99
    with pytest.raises(PrecompileError, match="malformed") as ei:
        read_meta(_with_meta(eager_art.python_code, meta))
    assert ei.value.where == "_PC_META['grads'][0]['input']"


def test_an_unknown_dtype_in_the_metadata_is_an_error_at_load_not_at_the_first_call(eager_art):
    meta, _, _ = _meta_of(eager_art.python_code)
    meta["inputs"][0]["dtype"] = "float33"
    with pytest.raises(PrecompileError) as ei, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        precompile.load(_with_meta(eager_art.python_code, meta), None)
    assert ei.value.invariant == 7 and ei.value.stage == "load"


# ---------------------------------------------------------------------------------------------
# the artifact format version


def test_artifact_version_changes_exactly_when_the_format_does():
    got = schema_fingerprint()
    assert FINGERPRINTS.get(ARTIFACT_VERSION) == got, (
        "the artifact format (the metadata literal's records, their literal kinds, or the "
        "section markers) changed: bump ARTIFACT_VERSION in "
        "precompile_nb/runtime/artifact_format.py "
        f"and record FINGERPRINTS[{ARTIFACT_VERSION + 1}] = {got!r} "
        "(Note [artifact version])")
    assert len(set(FINGERPRINTS.values())) == len(FINGERPRINTS)  # each version its own format


def test_an_artifact_of_another_format_version_is_refused_with_the_fix(eager_art):
    meta, _, _ = _meta_of(eager_art.python_code)
    meta["version"] = ARTIFACT_VERSION - 1
    with pytest.raises(PrecompileError, match="unknown artifact format") as ei:
        read_meta(_with_meta(eager_art.python_code, meta))
    assert "re-create" in ei.value.hint
