"""Stage 2's memory: what an Inductor lowering made, kept between precompiles and processes
and taken whole by a later precompile of the same graph (Note [a lowering made once]).

    store = _compat.lowering_store_dir()       # None: nothing is kept
    early = captured_entry(store, captured, asked)   # Note [a hit before functionalizing]
    lowered = taken_early(early, t0) or <functionalize, then:>
    entry = lowering_entry(store, fgm, fake_inputs, convention, asked, tracing_mode)
    lowered = taken(entry, convention, rewrites, t0) or <lower with Inductor>
    keep(entry, lowered); keep_early(early, entry, lowered)
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import struct
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from . import _compat
from . import cache as _cache
from ._compat.scoped_patch import SWITCHES
from .errors import PrecompileError
from ..runtime.convention import decode
from .schemas import Captured, KernelInfo, Lowered, Split, Tuning

# Note [a lowering made once]
#   The kernel stores (Notes [C++ kernels built once], [Triton kernels compiled once]) spare
#   a precompile the compilers, not the Python of a lowering: Inductor's passes, scheduling
#   and code generation ran again on every precompile of the same graph (a notebook cell run
#   again, a script's new process), 4.9 s of gpt2's tiny training step on the 2-core
#   development machine where the capture took 0.5 s; torch.compile finds such a graph in its
#   FX graph cache. Now what a lowering made (the module's source, its kernels, the compiled
#   files, the CUDA launch records and autotuning, how it was compiled) is kept in a store
#   beside Inductor's cache (<its cache dir>/precompile_nb_lowerings/<torch, C++ compiler and
#   Triton>), and a precompile whose key finds an entry takes it whole: Inductor does not run,
#   and the artifact is the one the first precompile made, byte for byte.
#   The key is Inductor's own FX graph key of the graph precompile hands to Inductor (its code
#   and constants; the inputs' sizes, strides, dtypes, devices; Inductor's and AOTAutograd's
#   configuration, torch's build, the GPU and Triton, the deterministic, matmul and default-
#   dtype settings, custom passes), plus what that key leaves to its callers (the hints,
#   ranges and guards of dynamic sizes, the CPU's vector ISA and thread count), the calling
#   convention as lowering refined it, the sizes asked to tune at, every switch that is set
#   (the documented PRECOMPILE_NB_ switches; another such variable changes nothing), and a
#   hash of precompile_nb's own source. A graph Inductor cannot key (an unpicklable constant
#   or custom pass) is lowered every time. An entry is one file: the
#   recorded fields as a Python literal (read with ast.literal_eval, never unpickled) and the
#   files in a cache envelope (core/cache.py) checked against their sha256 when read; an
#   entry that fails to read is removed and the graph lowered. When the store passes
#   _STORE_BYTES, the entries used longest ago go. A store under a TORCHINDUCTOR_CACHE_DIR is
#   emptied with it, so "empty compiler caches" still means cold.
#   PRECOMPILE_NB_LOWERING_REUSE=0 (or off, false, no) turns it off; so does
#   PRECOMPILE_NB_KERNEL_REUSE=0, which asks that no kernel an earlier precompile made be taken.

# Note [a hit before functionalizing]
#   The entry's key is of the functional graph, so a precompile that found its entry had
#   still re-traced the captured graph to make it functional (and rewritten its boundary for
#   the driver) only to compute the key: 0.68 s of the 2.8 s that t5's tiny training step's
#   hit took on the development machine, most of what was left beside the capture. Now each
#   kept entry has a small record beside it, keyed by the captured graph as lowering receives
#   it (Inductor's key of that graph and its inputs with the same additions, and everything
#   capture recorded that lowering reads: the convention, tracing mode, results that view
#   inputs, inputs written, which inputs share memory), that names the entry and holds the
#   convention and rewrites lowering made for it (the convention as its literal, read back
#   with the artifact's own decoder). A precompile whose captured graph finds one takes the
#   entry it names without functionalizing. Where that entry is gone (the store trimmed it)
#   or fails to read, the record is ignored and the graph goes the whole way, which keeps
#   both afresh. Functionalizing and the boundary's rewrite are functions of what that key
#   holds, so what the record says is what they would make again; a record whose convention
#   does not read back equal is not kept.

_MAGIC = b"PRECOMPILE_NB-LOWERING\n"
_EARLY_MAGIC = b"PRECOMPILE_NB-CAPTURED\n"
_STORE_BYTES = 2 << 30
_SUFFIX = ".lowering"
_EARLY_SUFFIX = ".captured"
REUSED = "lowering_reused"  # Lowered.builds' key on an entry taken whole


def lowering_entry(store: str | None, fgm: Any, fake_inputs: Sequence[Any], convention: Any,
                   asked: Sequence[Mapping[int, int]], tracing_mode: str) -> str | None:
    """The path of the entry for lowering `fgm` in `store` (Note [a lowering made once]),
    None where it has none or the store is off (None). Call it before Inductor, which changes
    the graph it is given."""
    return _keyed(store, fgm, fake_inputs,
                  (repr(convention), repr(list(asked)), tracing_mode), _SUFFIX)


def captured_entry(store: str | None, c: Captured,
                   asked: Sequence[Mapping[int, int]]) -> str | None:
    """The path of the record for the captured graph of `c` in `store` (Note [a hit before
    functionalizing]), None where it has none or the store or the records are off. Call it
    before functionalizing, which may change the captured graph."""
    first: dict[Any, int] = {}  # which inputs share memory (Inductor's key does not say)
    try:
        sharing = [first.setdefault(_compat.storage_key(t), i)
                   if isinstance(t, torch.Tensor) else i for i, t in enumerate(c.fake_inputs)]
    except Exception:  # noqa: BLE001 - e.g. a tensor subclass without a storage: no record,
        return None  # the graph goes the whole way
    captured = (c.convention, c.tracing_mode, c.n_user_outputs, c.aliases, c.mutated, c.baked,
                sorted(c.unbacked), sharing)
    return _keyed(store if _compat.captured_records_on() else None, c.graph, c.fake_inputs,
                  ("captured", repr(captured), repr(list(asked))), _EARLY_SUFFIX)


def _keyed(store: str | None, gm: Any, fake_inputs: Sequence[Any], parts: tuple[str, ...],
           suffix: str) -> str | None:
    """The path in `store` for `gm` with these inputs and `parts`, with every switch that is
    set (but the one that decides only whether records are read; other PRECOMPILE_NB_
    variables change no lowering) and precompile_nb's own source in the key; None where the
    store is off or Inductor cannot key the graph."""
    if store is None:
        return None
    graph = _compat.graph_and_setting_key(gm, fake_inputs)
    if graph is None:
        return None
    switches = sorted((k, os.environ[k]) for k in SWITCHES
                      if k in os.environ and k != "PRECOMPILE_NB_CAPTURED_RECORD")
    text = "\n".join((graph, *parts, repr(switches), _own_source()))
    return entry_path(store, hashlib.sha256(text.encode("utf-8")).hexdigest(), suffix)


def entry_path(store: str, key: str, suffix: str = _SUFFIX) -> str:
    """Where the entry named `key` lives in `store`."""
    return os.path.join(store, key[:2], key + suffix)


@functools.cache
def _own_source() -> str:
    """sha256 of precompile_nb's source files: another version lowers afresh."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def taken(path: str | None, convention: Any, rewrites: Mapping[str, tuple[str, ...]],
          t0: float) -> Lowered | None:
    """The Lowered kept in the entry at `path`, with this precompile's convention and
    rewrites (equal to the first's: they are in the key); None where there is none or it
    cannot be read."""
    if path is None or not os.path.exists(path):
        return None
    try:
        fields = _read(path)
    except (OSError, ValueError, TypeError, KeyError, SyntaxError, struct.error,
            PrecompileError):
        with contextlib.suppress(OSError):
            os.unlink(path)  # unreadable: lowered again and kept afresh
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used now: the last to go when the store is trimmed
    return Lowered(backend="inductor", convention=convention, rewrites=dict(rewrites),
                   seconds=time.perf_counter() - t0, builds={REUSED: 1}, **fields)


def keep(path: str | None, lowered: Lowered) -> None:
    """Keep what `lowered` made in the entry at `path` (nothing where it is None). A store
    that cannot be written loses only the saving."""
    if path is None:
        return
    literal = _literal(lowered)
    text = _read_back(literal)
    if text is None:
        return
    envelope = _cache.pack(text, "inductor", lowered.files)
    data = text.encode("utf-8")
    if _written(path, "entry-", b"".join((_MAGIC, struct.pack(">Q", len(data)), data,
                                          envelope))):
        with contextlib.suppress(OSError):
            _trim(os.path.dirname(os.path.dirname(path)))


def _read_back(literal: dict[str, Any]) -> str | None:
    """`literal` as the text an entry or record holds; None where that text does not read
    back equal (e.g. a float inf): only what reads back is kept."""
    text = repr(literal)
    try:
        return text if ast.literal_eval(text) == literal else None
    except (ValueError, SyntaxError):
        return None


def _written(path: str, prefix: str, data: bytes) -> bool:
    """Whether `data` is now the file at `path`, whole (written beside it, then moved); a
    store that cannot be written loses only the saving."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.replace(_cache.write_temp(os.path.dirname(path), prefix, data), path)
    except OSError:
        return False
    return True


def taken_early(path: str | None, t0: float) -> Lowered | None:
    """The Lowered of the entry that the captured graph's record at `path` names, with the
    convention and rewrites the record holds (Note [a hit before functionalizing]); None
    where there is no record, or it or its entry cannot be read."""
    if path is None or not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(_EARLY_MAGIC):
            raise ValueError("not a captured graph's record")
        d = ast.literal_eval(data[len(_EARLY_MAGIC):].decode("utf-8"))
        convention = decode(d["convention"])
        rewrites = {str(k): tuple(v) for k, v in d["rewrites"].items()}
        if not re.fullmatch(r"[0-9a-f]{64}", str(d["entry"])):
            raise ValueError("not an entry's key")
        entry = entry_path(os.path.dirname(os.path.dirname(path)), d["entry"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError, SyntaxError,
            UnicodeDecodeError, PrecompileError):
        with contextlib.suppress(OSError):
            os.unlink(path)  # unreadable: the graph goes the whole way and keeps it afresh
        return None
    lowered = taken(entry, convention, rewrites, t0)
    if lowered is not None:
        with contextlib.suppress(OSError):
            os.utime(path)
    return lowered


def keep_early(path: str | None, entry: str | None, lowered: Lowered) -> None:
    """Keep the record that takes the captured graph at `path` to the entry at `entry`
    (Note [a hit before functionalizing]); nothing where either is None, the entry was not
    kept, or the convention does not read back equal."""
    if path is None or entry is None or not os.path.exists(entry):
        return
    literal = {"entry": os.path.basename(entry)[:-len(_SUFFIX)],
               "convention": lowered.convention.to_literal(),
               "rewrites": {k: list(v) for k, v in lowered.rewrites.items()}}
    text = _read_back(literal)
    try:
        if text is None or decode(literal["convention"]) != lowered.convention:
            return
    except (ValueError, PrecompileError):
        return
    _written(path, "record-", _EARLY_MAGIC + text.encode("utf-8"))


def _literal(lw: Lowered) -> dict[str, Any]:
    """The fields an entry records, as plain literals."""
    return {"source": lw.source, "kernels": [dataclasses.astuple(k) for k in lw.kernels],
            "launches": {k: dict(v) for k, v in lw.launches.items()},
            "tuning": dataclasses.asdict(lw.tuning) if lw.tuning is not None else None,
            "split": dataclasses.asdict(lw.split) if lw.split is not None else None}


def _read(path: str) -> dict[str, Any]:
    """An entry's fields, its files checked against their sha256 (raises where they fail)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(_MAGIC):
        raise ValueError("not a lowering entry")
    (n,) = struct.unpack(">Q", data[len(_MAGIC):len(_MAGIC) + 8])
    start = len(_MAGIC) + 8
    text = data[start:start + n].decode("utf-8")
    envelope = data[start + n:]
    tag, header = _cache.read_tag(envelope)
    if tag.code_hash != _cache.code_hash(text):
        raise ValueError("the entry's files are not its record's")
    files = tuple((root, rel, bytes(b)) for root, rel, b in _cache.read_files(envelope, header))
    d = ast.literal_eval(text)
    return {"source": d["source"], "kernels": tuple(KernelInfo(*k) for k in d["kernels"]),
            "files": files, "launches": d["launches"],
            "tuning": Tuning(**d["tuning"]) if d["tuning"] is not None else None,
            "split": Split(**d["split"]) if d["split"] is not None else None}


def _trim(store: str) -> None:
    """Remove the entries used longest ago while the store holds more than _STORE_BYTES."""
    entries = []
    for sub in os.scandir(store):
        if sub.is_dir():
            entries += [(e.stat().st_mtime, e.stat().st_size, e.path)
                        for e in os.scandir(sub.path)
                        if e.name.endswith((_SUFFIX, _EARLY_SUFFIX))]
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= _STORE_BYTES:
            break
        with contextlib.suppress(OSError):
            os.unlink(path)
        total -= size
