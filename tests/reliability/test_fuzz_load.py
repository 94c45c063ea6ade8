"""precompile.load on bad artifacts: damaged, mismatched, forged, huge (invariant 7).

What must hold, precisely (the fuzz child's docstring has the full contract):
  - load ends in a callable or a PrecompileError; never another exception type, a crash or
    a hang;
  - a cache never goes with a python_code it was not made for (code_hash), nor with another
    backend; a damaged cache is always detected (every byte of the envelope is checksummed);
  - a callable comes back only for a pair load must accept (the valid pair, no cache, or a
    well-formed cache of another torch build: CacheWarning, cache ignored), and then computes
    exactly what eager computes ("silently wrong" = any other result);
  - the envelope is never unpickled.
The hypothesis run is in a child process (a segfault there fails the test instead of killing
pytest): `PRECOMPILE_NB_FUZZ_CASES=5000 pytest -m slow tests/reliability -s` for a long run.
"""
from __future__ import annotations

import ast
import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import cache as cache_mod
from precompile_nb.core.load import CacheWarning

from .conftest import ROOT, example_inputs, forge, gather_double_relu, load_quietly

FUZZ_CASES = int(os.environ.get("PRECOMPILE_NB_FUZZ_CASES", "300"))
FUZZ_SEED = int(os.environ.get("PRECOMPILE_NB_FUZZ_SEED", "20240607"))


@pytest.fixture(scope="module")
def pairs(eager_pair, other_eager_pair, inductor_pair):
    return [eager_pair, other_eager_pair, inductor_pair]


def assert_rejected(code, cache, match=None):
    with pytest.raises(PrecompileError, match=match) as ei:
        load_quietly(code, cache)
    assert ei.value.invariant == 7 and ei.value.stage == "load"
    return ei.value


def assert_right(f):
    x, idx = example_inputs()
    assert torch.equal(f(x, idx), gather_double_relu(x, idx))


def _regions(cache: bytes) -> dict[str, tuple[int, int]]:
    m = len(cache_mod.MAGIC)
    (hlen,) = struct.unpack(">Q", cache[m:m + 8])
    return {"magic": (0, m), "length": (m, m + 8), "header hash": (m + 8, m + 40),
            "header": (m + 40, m + 40 + hlen), "payload": (m + 40 + hlen, len(cache))}


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_damage_in_every_part_of_the_cache_is_a_precompile_error_naming_the_fix(
        backend, eager_pair, inductor_pair):
    pair = eager_pair if backend == "eager" else inductor_pair
    cache = pair.cache
    for part, (lo, hi) in _regions(cache).items():
        if lo == hi:  # an eager cache's payload holds no file: no byte there to damage
            continue
        for pos in sorted({lo, (lo + hi) // 2, hi - 1}):
            for bit in (0, 7):
                bad = bytearray(cache)
                bad[pos] ^= 1 << bit
                err = assert_rejected(pair.python_code, bytes(bad))
                assert "cache=None" in err.hint, part
            assert_rejected(pair.python_code, cache[:max(pos, 1)])  # truncated in `part`
    assert_rejected(pair.python_code, cache + b"\0")  # trailing garbage


def test_flipped_byte_in_a_cached_file_name_is_detected(inductor_pair):
    # cache format v1 did not checksum its header: this flip installed a verified kernel
    # under a wrong name, silently, and the kernel then compiled again at load
    code, cache = inductor_pair.python_code, inductor_pair.cache
    _, header = cache_mod.read_tag(cache)
    rel = header["files"][0][1].encode()
    pos = cache.index(rel) + len(rel) - 5
    bad = bytearray(cache)
    bad[pos] ^= 0x01
    assert_rejected(code, bytes(bad), match="checksum")


def test_cache_never_goes_with_a_python_code_it_was_not_made_for(pairs):
    for a in pairs:
        for b in pairs:
            if a is not b:
                err = assert_rejected(a.python_code, b.cache, match="another python_code")
                assert err.where == "cache code_hash"
                foreign = forge(b.python_code, b.backend, torch_build="0.1+other")
                assert_rejected(a.python_code, foreign, match="another python_code")


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cache_made_for_the_other_backend_is_a_precompile_error(backend, eager_pair,
                                                                inductor_pair):
    pair = eager_pair if backend == "eager" else inductor_pair
    other = "inductor" if backend == "eager" else "eager"
    assert_rejected(pair.python_code, forge(pair.python_code, other), match="another backend")


def test_inductor_cache_from_another_torch_build_warns_is_ignored_and_loads_right(
        inductor_pair):
    files = cache_mod.read_files(inductor_pair.cache, cache_mod.read_tag(inductor_pair.cache)[1])
    foreign = forge(inductor_pair.python_code, "inductor", files, torch_build="2.99.0+abc+cuda=13")
    with pytest.warns(CacheWarning, match="2.99.0"):
        f = precompile.load(inductor_pair.python_code, foreign)
    assert f.__precompile_load__["used"] is False
    assert_right(f)


def test_huge_inputs_are_rejected_quickly(eager_pair, inductor_pair):
    random_50mb = os.urandom(50 << 20)
    code = inductor_pair.python_code
    cases = {
        "50 MB of random bytes": (code, random_50mb),
        "50 MB after the marker": (code, cache_mod.MAGIC + random_50mb),
        "header length 2**63": (code, cache_mod.MAGIC + struct.pack(">Q", 2**63) + random_50mb),
        "valid header, 50 MB payload": (code, inductor_pair.cache + random_50mb),
        "10 MB python_code, its cache": (code + "#" * (10 << 20), inductor_pair.cache),
        "10 MB of random text": (os.urandom(5 << 20).hex(), None),
        "10 MB _PC_META": (eager_pair.python_code.replace(
            "_PC_META = {", "_PC_META = {'pad': '" + "x" * (10 << 20) + "', ", 1),
            eager_pair.cache),
    }
    for what, (c, cache) in cases.items():
        assert_rejected(c, cache)


def test_hostile_envelope_with_valid_checksums_is_a_precompile_error(eager_pair):
    # fields a corrupted file cannot produce (the checksums hold) but a hand-made one can;
    # each of these raised ValueError / RecursionError / OverflowError before
    code = eager_pair.python_code
    _, header = cache_mod.read_tag(eager_pair.cache)
    payload = eager_pair.cache[header.pop("_payload_offset"):]

    def envelope(header_bytes: bytes, body: bytes = payload) -> bytes:
        import hashlib

        return (cache_mod.MAGIC + struct.pack(">Q", len(header_bytes))
                + hashlib.sha256(header_bytes).digest() + header_bytes + body)

    def with_files(files, body=payload):
        h = dict(header, files=files)
        return envelope(json.dumps(h).encode(), body)

    digest = "0" * 64
    hostile = {
        "too many digits": envelope(b"1" * 5000),
        "deep nesting": envelope(b"[" * 100_000 + b"]" * 100_000),
        "version inf": envelope(json.dumps(header).replace(f'"version": {cache_mod.VERSION}',
                                                               '"version": 1e999')
                                .encode()),
        "version true": envelope(json.dumps(dict(header, version=True)).encode()),
        "not an object": envelope(b"[1, 2]"),
        "five fields": with_files([["inductor", "ab/x.so", 0, digest, "x"]]),
        "size inf": envelope(json.dumps(dict(header, files=[["inductor", "ab/x", 0, digest]]))
                             .replace('0, "0000', '1e999, "0000').encode()),
        "negative size": with_files([["inductor", "ab/x", -1, digest]]),
        "nul in path": with_files([["inductor", "ab/\0x", 0, digest]]),
        "newline in path": with_files([["inductor", "ab/x\n", 0, digest]]),
        "absolute path": with_files([["inductor", "/etc/passwd", 0, digest]]),
        "other root": with_files([["home", "ab/x", 0, digest]]),
        "path twice": with_files([["inductor", "ab/x", 0, digest]] * 2),
        "file and dir": with_files([["inductor", "ab", 0, digest],
                                    ["inductor", "ab/x", 0, digest]]),
        "digest not hex": with_files([["inductor", "ab/x", 0, "z" * 64]]),
        "files not a list": envelope(json.dumps(dict(header, files={"a": 1})).encode()),
    }
    for what, cache in hostile.items():
        err = assert_rejected(code, cache)
        assert "cache=None" in err.hint, what


@pytest.mark.parametrize("edit", ["delete the graph", "edit _PC_META", "append a line",
                                  "one character"])
def test_edited_python_code_never_runs_with_the_cache_of_the_original(eager_pair, edit):
    code = eager_pair.python_code
    edited = {
        "delete the graph": code.replace("def call(args):", "def _gone(args):"),
        "edit _PC_META": code.replace("'shape': [4, 4]", "'shape': [4, 5]"),
        "append a line": code + "\nprint('hello')\n",
        "one character": code.replace("aten.mul.Tensor(", "aten.add.Tensor(", 1),
    }[edit]
    assert edited != code
    assert_rejected(edited, eager_pair.cache, match="another python_code")


@pytest.mark.parametrize("bad", ["nonlocal x\n", "_PC_META['dtype'] = 'float33'\n",
                                 "forward = None\n", "import torch_not_installed_module\n"])
def test_python_code_that_fails_while_executing_is_a_precompile_error(eager_pair, bad):
    # an edited artifact that parses but breaks when compiled or run (load with no cache:
    # that is allowed to run different code, but must fail as a PrecompileError)
    code = eager_pair.python_code
    if "dtype" in bad:
        code = code.replace("'dtype': 'float32'", "'dtype': 'float33'")
    else:
        code = code + bad
    err = assert_rejected(code, None)
    # where in python_code: its line, or the metadata field the driver found wrong itself
    assert err.where.startswith(("python_code", "_PC_META"))
    if "dtype" in bad:
        assert err.where == "_PC_META['inputs'][0]['dtype']" and err.actual == "float33"


@pytest.mark.parametrize("meta", ["{1: 'int key', 'format': 'x'}", "{(1,): 2, None: 3}"])
def test_metadata_literal_with_keys_of_mixed_types_is_a_precompile_error(meta):
    # found by the fuzzer: the "incomplete metadata" message sorted the keys and raised
    # TypeError for an edited literal with an int key next to str keys
    err = assert_rejected(f"_PC_META = {meta}\n", None, match="metadata is incomplete")
    assert err.where == "_PC_META"


@pytest.mark.parametrize("cache", [0, "", "PRECOMPILE_NB-CACHE", [], 1.5])
def test_cache_that_is_not_bytes_is_a_precompile_error(eager_pair, cache):
    assert_rejected(eager_pair.python_code, cache, match="bytes")


def test_cache_envelope_is_read_without_pickle(pairs, monkeypatch):
    for mod in ("core/cache", "core/load", "tools/store"):
        src = (ROOT / "precompile_nb" / f"{mod}.py").read_text()
        imported = {a.name.split(".")[0] for n in ast.walk(ast.parse(src))
                    if isinstance(n, (ast.Import, ast.ImportFrom))
                    for a in (n.names if isinstance(n, ast.Import) else [ast.alias(n.module
                                                                                    or "")])}
        assert not imported & {"pickle", "_pickle", "shelve", "dill"}, mod
        # marshal reads two things: python_code's own bytecode and literals entries, after
        # the envelope and every file's checksum were verified (Notes [bytecode in the cache]
        # and [the literals in the cache] in core/load.py)
        users = {f.name for f in ast.walk(ast.parse(src)) if isinstance(f, ast.FunctionDef)
                 for n in ast.walk(f) if isinstance(n, ast.Name) and n.id == "marshal"}
        assert users <= ({"python_entries", "unmarshalled"} if mod == "core/cache" else set())
        assert "marshal" not in imported or mod == "core/cache", mod

    def no_pickle(*args, **kwargs):
        raise AssertionError("pickle used while reading a cache")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, no_pickle)
    x, idx = example_inputs()
    for p in pairs:
        f = load_quietly(p.python_code, p.cache)
        assert f(x, idx).shape == (3, 4)
        assert_rejected(p.python_code, p.cache[:-3])


@pytest.mark.slow
def test_fuzzed_artifacts_never_crash_hang_or_load_silently_wrong(pair_dir, tmp_path):
    """PRECOMPILE_NB_FUZZ_CASES hypothesis cases (default 300) in a child process."""
    out = tmp_path / "fuzz.json"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "tests.reliability.fuzz_child", str(pair_dir),
                           str(FUZZ_CASES), str(FUZZ_SEED), str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120 + FUZZ_CASES)
    assert proc.returncode == 0, (
        f"fuzz child exited with {proc.returncode} (negative: killed by signal "
        f"{-proc.returncode})\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    report = json.loads(Path(out).read_text())
    print(f"\nfuzz: {report['cases']} cases, slowest {report['max_case_seconds']:.2f} s")
    for k, v in report["outcomes"].items():
        print(f"  {k:40s} {v}")
    kinds = {k.split("/")[0] for k in report["outcomes"]}
    assert kinds == {"cache-bytes", "swapped-pair", "other-backend", "foreign-torch",
                     "random-bytes", "forged-header", "code+cache", "code-no-cache"}
    assert report["cases"] >= 0.9 * FUZZ_CASES


def test_damaged_kernel_file_in_the_compiler_cache_is_repaired_on_load(inductor_pair,
                                                                       tmp_path, monkeypatch):
    # a file already in the cache dir is trusted only if it has the shipped bytes (cache
    # format v1 trusted any file of the right size)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    files = [e for e in cache_mod.read_files(inductor_pair.cache,
                                             cache_mod.read_tag(inductor_pair.cache)[1])
             if e[0] != cache_mod.BYTECODE_ROOT]  # python_code's bytecode: never installed
    f = load_quietly(inductor_pair.python_code, inductor_pair.cache)
    load = f.__precompile_load__
    assert load["written"] + load["deferred"] == len(files) and load["present"] == 0
    # a library the warm path loads (replaced by a rename: this process's mapping stays)
    root, rel, data = next(e for e in files if e[1].endswith(".so")
                           and tmp_path.joinpath(*e[1].split("/")).exists())
    damaged = tmp_path.joinpath(*rel.split("/"))
    damaged.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])  # same size, other bytes
    f = load_quietly(inductor_pair.python_code, inductor_pair.cache)
    assert (f.__precompile_load__["written"], f.__precompile_load__["present"]) == (
        1, load["written"] - 1)
    assert damaged.read_bytes() == data
    assert_right(f)
