"""precompile.load: the artifact format, the cache envelope and its integrity tag."""
from __future__ import annotations


import pytest
import torch

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import cache as cache_mod
from precompile_nb.core.load import CacheWarning
from tests.core.models import mlp


@pytest.fixture(scope="module")
def pair():
    return precompile(lambda m, x: m(x), mlp(), torch.randn(3, 8), backend="eager")


def test_load_warns_on_every_call_that_it_executes_code(pair):
    for _ in range(2):
        with pytest.warns(UserWarning, match="executes python_code"):
            precompile.load(*pair)


def test_load_rejects_cache_from_other_python_code(pair):
    code, cache = pair
    other_code, other_cache = precompile(lambda m, x: m(x) * 2, mlp(), torch.randn(3, 8),
                                         backend="eager")
    with pytest.raises(PrecompileError, match="another python_code") as ei:
        precompile.load(code, other_cache)
    assert ei.value.invariant == 7


def test_load_rejects_cache_from_other_backend(pair):
    code, _ = pair
    forged = cache_mod.pack(code, "inductor", ())
    with pytest.raises(PrecompileError, match="another backend"):
        precompile.load(code, forged)


@pytest.mark.parametrize("bad", ["", "def (:", "x = 1\n", "_PC_META = open('x')\n",
                                 "_PC_META = {'format': 'other'}\n"])
def test_load_rejects_python_code_that_is_not_an_artifact(bad):
    with pytest.raises(PrecompileError) as ei:
        precompile.load(bad, None)
    assert ei.value.invariant == 7 and ei.value.stage == "load"


def test_load_never_executes_code_before_validating_it(tmp_path):
    marker = tmp_path / "ran"
    evil = f"open({str(marker)!r}, 'w').write('x')\n"
    with pytest.raises(PrecompileError):
        precompile.load(evil, None)
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "header"])
def test_unreadable_cache_is_a_precompile_error_naming_the_fix(pair, damage):
    code, cache = pair
    bad = {"truncate": cache[: len(cache) // 2],
           "flip": cache[:-1] + bytes([cache[-1] ^ 0xFF]),
           "garbage": b"\x00" * 64,
           "header": cache[:len(cache_mod.MAGIC) + 8] + b"{not json" + cache[-10:]}[damage]
    with pytest.raises(PrecompileError) as ei:
        precompile.load(code, bad)
    assert ei.value.invariant == 7 and "cache=None" in ei.value.hint


def test_cache_from_another_torch_build_warns_and_still_loads(pair, monkeypatch):
    code, cache = pair
    monkeypatch.setattr(cache_mod._compat, "torch_build_id", lambda: "9.9.9+other")
    foreign = cache_mod.pack(code, "eager", (("inductor", "ab/x.so", b"ELF"),))
    monkeypatch.undo()
    with pytest.warns(CacheWarning, match="9.9.9"):
        f = precompile.load(code, foreign)
    m, x = mlp(), torch.randn(3, 8)
    torch.testing.assert_close(f(m, x), m(x))


def test_load_without_cache_works(pair):
    code, _ = pair
    for empty in (None, b""):
        f = precompile.load(code, empty)
        m, x = mlp(), torch.randn(3, 8)
        torch.testing.assert_close(f(m, x), m(x))


def test_cache_envelope_is_never_unpickled(pair):
    _, cache = pair
    assert b"pickle" not in cache and b"\x80\x04" not in cache[:64]
    tag, header = cache_mod.read_tag(cache)
    assert tag.backend == "eager" and len(tag.code_hash) == 64 and header["files"] == []


def test_cache_file_entries_cannot_escape_the_cache_dir(pair):
    code, _ = pair
    evil = cache_mod.pack(code, "eager", (("inductor", "../../etc/x", b"boom"),))
    with pytest.raises(PrecompileError, match="escapes"):
        precompile.load(code, evil)


def test_triton_group_files_point_at_where_the_cache_installs_them(tmp_path, monkeypatch):
    # Triton's __grp__<kernel>.json lists the kernel's files by absolute path and treats a
    # missing one as a cache miss: installed verbatim, it would point into the compiling
    # process's deleted private dir and every kernel would compile again on load.
    import json
    import os

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    old = "/tmp/precompile_nb_gone/tmpx/triton/ABC"
    group = {"child_paths": {"k.cubin": f"{old}/k.cubin", "k.json": f"{old}/k.json"}}
    files = [("triton", "ABC/__grp__k.json", json.dumps(group).encode()),
             ("triton", "ABC/k.cubin", b"\x7fELF cubin"), ("triton", "ABC/k.json", b"{}")]
    assert cache_mod.install(files, 0) == (3, 0)
    installed = json.loads((tmp_path / "triton" / "ABC" / "__grp__k.json").read_text())
    for child, path in installed["child_paths"].items():
        assert path == str(tmp_path / "triton" / "ABC" / child)
        assert os.path.exists(path)
    # installing again finds everything in place
    assert cache_mod.install(files, 0) == (0, 3)


@pytest.mark.parametrize("text", [
    "{'a': [1, -2.5, None, True], 'b': (1, 'x'), 'c': {3}, 'd': {'e': []}}", "[]", "-1",
    "'" + "x" * 10 + "'", "[" + ", ".join(f"{{'k': {i}}}" for i in range(300)) + "]"])
def test_a_records_literal_read_fast_is_the_value_literal_eval_reads(text):
    # Note [literals read as bytecode]: the same value as ast.literal_eval, without Python
    # AST objects
    import ast
    import importlib

    load_mod = importlib.import_module("precompile_nb.core.load")
    assert load_mod._constant_value(text) == (True, ast.literal_eval(text))


@pytest.mark.parametrize("text", [
    "__import__('os').getcwd()", "[1] * 3", "{1: x for x in ()}", "(lambda: 1)()", "x",
    "'a'.upper()", "{[1]: 2}", "1 +"])
def test_a_record_that_is_more_than_a_literal_is_never_evaluated_to_read_it(text):
    # anything that reads a name, calls, computes or holds code is left to ast.literal_eval,
    # which refuses it
    import importlib

    load_mod = importlib.import_module("precompile_nb.core.load")
    assert load_mod._constant_value(text) == (False, None)
