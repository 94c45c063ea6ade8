"""Run in a child process by test_fuzz_load.py: hypothesis mutates valid (python_code, cache)
pairs, hands each mutant to precompile.load and checks the outcome against the contract below.
A crash (segfault, abort) kills only this process; the parent sees its exit status. A hang is
cut by faulthandler (stack dump, exit) and by the parent's timeout.

usage: python -m tests.reliability.fuzz_child PAIR_DIR N_CASES SEED OUT_JSON
PAIR_DIR holds eager.py/.cache, eager_other.py/.cache, inductor.py/.cache (see conftest).
On success writes {"cases", "outcomes": {"kind/outcome": n}, "max_case_seconds"} to OUT_JSON;
a broken promise fails hypothesis (the falsifying example is printed) and exits non-zero.

The contract (what "never silently wrong" means here). Every case ends in exactly one of:
  rejected     load raises PrecompileError (and nothing else: no other exception type)
  accepted     load returns a callable. Allowed only when the pair is one load must accept:
               python_code is a base python_code unchanged and the cache is absent (b""),
               byte-identical to a valid cache made for that python_code, or a well-formed
               cache from another torch build (then a CacheWarning is raised and the cache is
               not used). A forged envelope (valid checksums, hostile field values) may also
               be accepted. An accepted callable must return exactly eager's result for the
               example (torch.equal) and raise PrecompileError for a wrong shape.
  loaded-code  a mutated python_code with cache=None loaded: python_code is code (invariant 7),
               an edited artifact is different code; not called.
A callable from any other cache is "silently accepted corruption"; a result that differs from
eager is "silently wrong"; both fail. So does a pickle call, and a case that hangs: past
CASE_SECONDS * 3 faulthandler dumps the stacks and ends the child (no test bounds how long a
case may take; the slowest is reported as max_case_seconds).
"""
from __future__ import annotations

import faulthandler
import hashlib
import importlib
import json
import os
import pickle
import pprint
import struct
import sys
import time
import warnings
from collections import Counter

import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from precompile_nb import PrecompileError, precompile
from precompile_nb.core import _compat
from precompile_nb.core import cache as cache_mod
from precompile_nb.core.emit import META_NAME
from precompile_nb.core.load import CacheWarning
from tests.reliability.conftest import (example_inputs, forge, gather_double_relu,
                                        gather_triple_relu, shipped_files)

CASE_SECONDS = 20.0


class PickleUsed(BaseException):
    """Raised by the patched pickle entry points: a BaseException, so that no `except
    Exception` on the way (load wraps errors of python_code) can turn it into a rejection."""


def _no_pickle(*args, **kwargs):
    raise PickleUsed("pickle was used while loading a fuzzed artifact")


class Base:
    """A valid pair and what its callable computes."""

    def __init__(self, name: str, code: str, cache: bytes, backend: str, ref) -> None:
        self.name, self.code, self.cache, self.backend, self.ref = (name, code, cache,
                                                                    backend, ref)
        self.files = shipped_files(cache)
        # the other well-formed caches of this code: another torch build's (accepted, warned)
        self.foreign = forge(code, backend, self.files, torch_build="0.0.1+fuzz+cuda=None")


def envelope(cache: bytes) -> tuple[dict, bytes]:
    """(header dict, payload) of a valid envelope."""
    _, header = cache_mod.read_tag(cache)
    payload = cache[header.pop("_payload_offset"):]
    return header, payload


def repack(header_bytes: bytes, payload: bytes) -> bytes:
    """An envelope with valid length and header checksum around any header bytes."""
    return (cache_mod.MAGIC + struct.pack(">Q", len(header_bytes))
            + hashlib.sha256(header_bytes).digest() + header_bytes + payload)


def regions(cache: bytes) -> dict[str, tuple[int, int]]:
    m = len(cache_mod.MAGIC)
    (hlen,) = struct.unpack(">Q", cache[m:m + 8])
    h0 = m + 8 + 32
    return {"magic": (0, m), "length": (m, m + 8), "header_hash": (m + 8, h0),
            "header": (h0, h0 + hlen), "payload": (h0 + hlen, len(cache)),
            "anywhere": (0, len(cache))}


class Case(tuple):
    """(kind, python_code, cache, base, expect), shown compactly when hypothesis reports a
    falsifying example (the python_code is 16-20 KB)."""

    def __repr__(self) -> str:
        kind, code, cache, base, expect = self
        at = next((i for i, (a, b) in enumerate(zip(code, base.code)) if a != b),
                  min(len(code), len(base.code)))
        diff = ("python_code unchanged" if code == base.code else
                f"python_code differs at {at}: {base.code[max(at - 30, 0):at + 30]!r} -> "
                f"{code[max(at - 30, 0):at + 30]!r} ({len(code)} chars)")
        return (f"Case({kind}, base={base.name}, expect={expect}, {diff}, cache "
                f"{len(cache)} B sha256 {hashlib.sha256(cache).hexdigest()[:12]}, "
                f"head {cache[:80]!r})")


# ---------------------------------------------------------------------------------------------
# strategies: each draws Case(kind, python_code, cache, base, expect)
#   expect: "reject" | "accept" | "accept-foreign" | "either" (forged) | "code" (cache None)

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                      st.floats(allow_nan=False), st.text(max_size=20))
json_value = st.recursive(json_leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                                         st.dictionaries(st.text(max_size=8),
                                                                         c, max_size=4)),
                          max_leaves=8)


@st.composite
def byte_mutant(draw, data: bytes, other: bytes) -> bytes:
    spans = regions(data) if data.startswith(cache_mod.MAGIC) else {"anywhere": (0, len(data))}
    # an eager cache's payload is empty (cache v3 stores the files as they are; it has none)
    spans = {k: v for k, v in spans.items() if v[1] > v[0]} or {"anywhere": (0, len(data))}
    lo, hi = spans[draw(st.sampled_from(sorted(spans)))]
    hi = max(hi, lo + 1)
    pos = draw(st.integers(lo, hi - 1))
    op = draw(st.sampled_from(["truncate", "flip", "flips", "insert", "delete", "overwrite",
                               "duplicate", "splice", "append"]))
    if op == "truncate":
        return data[:pos]
    if op == "flip":
        b = bytearray(data)
        b[pos] ^= 1 << draw(st.integers(0, 7))
        return bytes(b)
    if op == "flips":
        b = bytearray(data)
        for p in draw(st.lists(st.integers(lo, hi - 1), min_size=2, max_size=8)):
            b[p] ^= 1 << draw(st.integers(0, 7))
        return bytes(b)
    if op == "insert":
        return data[:pos] + draw(st.binary(min_size=1, max_size=64)) + data[pos:]
    if op == "delete":
        return data[:pos] + data[pos + draw(st.integers(1, 64)):]
    if op == "overwrite":
        junk = draw(st.binary(min_size=1, max_size=64))
        return data[:pos] + junk + data[pos + len(junk):]
    if op == "duplicate":
        return data[:pos] + data[pos:pos + draw(st.integers(1, 64))] + data[pos:]
    if op == "splice":
        return data[:pos] + other[draw(st.integers(0, max(len(other) - 1, 0))):]
    return data + draw(st.binary(min_size=1, max_size=64))  # append


def cache_mutations(bases):
    @st.composite
    def strat(draw):
        b = draw(st.sampled_from(bases))
        foreign = draw(st.booleans())
        src = b.foreign if foreign else b.cache
        other = draw(st.sampled_from(bases)).cache
        mutant = draw(byte_mutant(src, other))
        if mutant == b"":
            expect = "accept"  # an empty cache is no cache
        elif mutant == b.cache:
            expect = "accept"
        elif mutant == b.foreign:
            expect = "accept-foreign"
        else:
            expect = "reject"
        return Case(("cache-bytes", b.code, mutant, b, expect))
    return strat()


def swaps(bases):
    @st.composite
    def strat(draw):
        i, j = draw(st.permutations(range(len(bases))))[:2]
        cache = draw(st.sampled_from([bases[j].cache, bases[j].foreign]))
        return Case(("swapped-pair", bases[i].code, cache, bases[i], "reject"))
    return strat()


def other_backends(bases):
    @st.composite
    def strat(draw):
        b = draw(st.sampled_from(bases))
        other = "eager" if b.backend == "inductor" else "inductor"
        build = draw(st.sampled_from([None, "0.0.1+fuzz+cuda=None"]))
        return Case(("other-backend", b.code, forge(b.code, other, b.files, torch_build=build),
                     b, "reject"))
    return strat()


def foreign_builds(bases):
    @st.composite
    def strat(draw):
        b = draw(st.sampled_from(bases))
        build = draw(st.text(min_size=1, max_size=40).filter(
            lambda s: s != _compat.torch_build_id()))
        return Case(("foreign-torch", b.code,
                     forge(b.code, b.backend, b.files, torch_build=build), b, "accept-foreign"))
    return strat()


def random_caches(bases):
    @st.composite
    def strat(draw):
        b = draw(st.sampled_from(bases))
        junk = draw(st.binary(max_size=4096))
        prefix = draw(st.sampled_from(["", "magic", "magic+length"]))
        if prefix == "magic":
            junk = cache_mod.MAGIC + junk
        elif prefix == "magic+length":
            junk = cache_mod.MAGIC + struct.pack(">Q", draw(st.integers(0, 2**64 - 1))) + junk
        return Case(("random-bytes", b.code, junk, b, "accept" if junk == b"" else "reject"))
    return strat()


def forged_headers(bases):
    @st.composite
    def strat(draw):
        b = draw(st.sampled_from(bases))
        header, payload = envelope(b.cache)
        op = draw(st.sampled_from(["set", "delete", "entry-field", "entry-drop", "entry-dup",
                                   "entry-junk", "raw"]))
        files = [list(e) for e in header["files"]]
        if op == "set":
            header[draw(st.sampled_from(sorted(header) + ["extra"]))] = draw(json_value)
        elif op == "delete":
            header.pop(draw(st.sampled_from(sorted(header))))
        elif op == "entry-field" and files:
            e = draw(st.sampled_from(files))
            e[draw(st.integers(0, 3))] = draw(json_value)
        elif op == "entry-drop" and files:
            files.pop(draw(st.integers(0, len(files) - 1)))
        elif op == "entry-dup" and files:
            files.insert(draw(st.integers(0, len(files))), list(draw(st.sampled_from(files))))
        elif op == "entry-junk":
            files.insert(draw(st.integers(0, len(files))), draw(json_value))
        if "files" in header and op.startswith("entry"):
            header["files"] = files
        if op == "raw":  # any bytes at all as the header, with a valid checksum
            hb = draw(st.binary(max_size=512))
        else:
            hb = json.dumps(header, sort_keys=True).encode("utf-8")
        mutant = repack(hb, payload)
        return Case(("forged-header", b.code, mutant, b,
                     "accept" if mutant == b.cache else "either"))
    return strat()


@st.composite
def meta_edit(draw, code: str) -> str:
    """python_code with its _PC_META literal edited at one random place."""
    import ast

    node = next(n for n in ast.parse(code).body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", None) == META_NAME)
    lines = code.splitlines(True)
    start = sum(len(ln) for ln in lines[:node.lineno - 1])
    end = sum(len(ln) for ln in lines[:node.end_lineno - 1]) + node.end_col_offset
    meta = ast.literal_eval(node.value)
    target = meta
    for _ in range(draw(st.integers(0, 3))):  # walk down a random path
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        if not keys:
            break
        k = draw(st.sampled_from(keys))
        if not isinstance(target[k], (dict, list)) or not target[k]:
            break
        target = target[k]
    keys = list(target) if isinstance(target, dict) else list(range(len(target)))
    if keys and draw(st.booleans()):
        k = draw(st.sampled_from(keys))
        if draw(st.booleans()):
            del target[k]
        else:
            target[k] = draw(json_value)
    elif isinstance(target, dict):
        target[draw(st.text(max_size=8))] = draw(json_value)
    else:
        target.append(draw(json_value))
    return code[:start] + f"{META_NAME} = " + pprint.pformat(meta) + code[end:]


@st.composite
def text_mutant(draw, code: str) -> str:
    lines = code.splitlines(True)
    op = draw(st.sampled_from(["delete-line", "duplicate-line", "swap-lines", "delete-chars",
                               "insert-text", "replace-char", "truncate", "append", "meta"]))
    i = draw(st.integers(0, len(lines) - 1))
    pos = draw(st.integers(0, len(code)))
    if op == "delete-line":
        return "".join(lines[:i] + lines[i + 1:])
    if op == "duplicate-line":
        return "".join(lines[:i + 1] + lines[i:])
    if op == "swap-lines":
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    if op == "delete-chars":
        return code[:pos] + code[pos + draw(st.integers(1, 40)):]
    if op == "insert-text":
        return code[:pos] + draw(st.text(min_size=1, max_size=40)) + code[pos:]
    if op == "replace-char":
        return code[:pos] + draw(st.characters()) + code[pos + 1:]
    if op == "truncate":
        return code[:pos]
    if op == "append":
        return code + draw(st.text(min_size=1, max_size=40))
    return draw(meta_edit(code))


def code_mutations(bases):
    @st.composite
    def strat(draw):
        b = draw(st.sampled_from(bases))
        code = draw(text_mutant(b.code))
        # without a cache only the eager code is executed: a mutated inductor kernel source
        # would be handed to the C++ compiler (seconds per case, and it is different code)
        with_cache = b.backend == "inductor" or draw(st.booleans())
        if not with_cache:
            return Case(("code-no-cache", code, b"", b, "accept" if code == b.code else "code"))
        cache = draw(st.sampled_from([b.cache, b.foreign]))
        if code == b.code:
            return Case(("code+cache", code, cache, b,
                         "accept" if cache == b.cache else "accept-foreign"))
        return Case(("code+cache", code, cache, b, "reject"))
    return strat()


# ---------------------------------------------------------------------------------------------


def check(case, outcomes: Counter, times: list[float]) -> None:
    kind, code, cache, base, expect = case
    x, idx = example_inputs()
    faulthandler.dump_traceback_later(CASE_SECONDS * 3, exit=True)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                f = precompile.load(code, cache)
            except PrecompileError as e:
                assert expect in ("reject", "either", "code"), (
                    f"{kind}: a pair load must accept was rejected: {e}")
                outcomes[f"{kind}/rejected"] += 1
                return
        foreign = [w for w in caught if issubclass(w.category, CacheWarning)]
        if expect == "reject":
            raise AssertionError(f"{kind}: silently accepted a corrupted or mismatched "
                                 f"pair (cache of {len(cache)} bytes)")
        if expect == "code":
            outcomes[f"{kind}/loaded-code"] += 1
            return
        if expect == "accept-foreign":
            assert foreign, f"{kind}: a cache from another torch build loaded without warning"
            assert f.__precompile_load__["used"] is False, "a foreign cache was installed"
        elif expect == "accept":
            assert not foreign, f"{kind}: unexpected CacheWarning {foreign[0].message}"
        # accepted: the callable must compute what eager computes, and keep its checks
        out = f(x, idx)
        assert torch.equal(out, base.ref(x, idx)), f"{kind}: silently wrong result"
        try:
            f(torch.randn(5, 4), idx)
        except PrecompileError:
            pass
        else:
            raise AssertionError(f"{kind}: a wrong shape was not rejected")
        outcomes[f"{kind}/accepted{'-warned' if foreign else ''}"] += 1
    finally:
        faulthandler.cancel_dump_traceback_later()
        dt = time.perf_counter() - t0
        times.append(dt)


def main() -> None:
    pair_dir, n, seed_value, out_path = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                         sys.argv[4])

    def read(name: str) -> tuple[str, bytes]:
        with open(os.path.join(pair_dir, f"{name}.py"), encoding="utf-8") as f:
            code = f.read()
        with open(os.path.join(pair_dir, f"{name}.cache"), "rb") as f:
            return code, f.read()

    bases = [Base("eager", *read("eager"), "eager", gather_double_relu),
             Base("eager_other", *read("eager_other"), "eager", gather_triple_relu),
             Base("inductor", *read("inductor"), "inductor", gather_double_relu)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in bases:  # each base loads and is right (installs the inductor kernels once)
            x, idx = example_inputs()
            assert torch.equal(precompile.load(b.code, b.cache)(x, idx), b.ref(x, idx))

    outcomes: Counter = Counter()
    times: list[float] = []
    cases = st.one_of(cache_mutations(bases), swaps(bases), other_backends(bases),
                      foreign_builds(bases), random_caches(bases), forged_headers(bases),
                      code_mutations(bases))

    @seed(seed_value)
    @settings(max_examples=n, deadline=None, database=None, print_blob=True,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck))
    @given(case=cases)
    def fuzz(case):
        check(case, outcomes, times)

    # A load on the compile path (the foreign-torch cases) imports Inductor, one of whose
    # modules subclasses pickle.Unpickler at import: import them before pickle is patched
    # (the bases above load on the warm path, without Inductor).
    for module in ("async_compile", "codegen.memory_planning", "select_algorithm"):
        importlib.import_module(f"torch._inductor.{module}")

    saved = pickle.load, pickle.loads, pickle.Unpickler
    pickle.load = pickle.loads = pickle.Unpickler = _no_pickle  # the envelope is never unpickled
    try:
        fuzz()
    finally:
        pickle.load, pickle.loads, pickle.Unpickler = saved
    with open(out_path, "w") as f:
        json.dump({"cases": sum(outcomes.values()), "outcomes": dict(sorted(outcomes.items())),
                   "max_case_seconds": max(times, default=0.0)}, f, indent=1)


if __name__ == "__main__":
    main()
