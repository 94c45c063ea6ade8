"""Stage 4: pack / unpack the cache envelope (invariant 7).

    MAGIC | 8-byte header length | sha256 of the header (32 bytes) | header | payload

The header is JSON: the integrity tag (format, version, backend, torch build, code_hash) and
the file table [root, relative path, size, sha256]. The payload is the concatenation of the
compiled binaries of one artifact, stored as they are (Note [cache read in place]).

Nothing is ever unpickled. See Note [reading an envelope] for the order of the checks: every
byte of the envelope is covered by a checksum that is verified before the bytes are used
(the header's before it is parsed, each file's before it is written anywhere), so a
corrupted cache is always a PrecompileError, never a silently misplaced or misread file. A
hand-made envelope with valid checksums (hostile, or a bug) is held to the same bounds: the
file table is validated field by field.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import re
import stat
import struct
import sys
import tempfile
import threading
from typing import Any, Literal

from . import _compat
from .errors import PrecompileError

MAGIC = b"PRECOMPILE_NB-CACHE\n"
FORMAT = "precompile_nb.cache"
# v2: the header is covered by its own sha256 (v1 had none: a flipped byte in a file path
# installed a verified binary under the wrong name, silently).
# v3: the payload is the files as they are, not zlib-compressed, and has no digest of its own
# (each file's covers it): Note [cache read in place].
VERSION = 3
_HASH_LEN = 32
# Bounds a hostile or corrupt envelope cannot make us exceed.
MAX_HEADER = 16 << 20
MAX_FILES = 100_000
MAX_PAYLOAD = 4 << 30
MAX_REL = 1024
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
# relative paths as inductor / triton name their cache files: no control characters, no
# backslashes, no empty / '.' / '..' parts, not absolute (checked in _safe_rel)
_REL_CHARS = re.compile(r"[A-Za-z0-9._+=@,~/-]+\Z")

_FIX = ("use the cache file saved together with this python_code, or load without it: "
        "precompile.load(python_code, cache=None) compiles the kernels instead")

# Note [reading an envelope]
# read_tag: type, MAGIC, header length in bounds, header sha256, then JSON (any decode error,
# including too-deep nesting and too-long integers, is "unreadable"), then every tag field
# with its exact type. read_files (only once load accepted the tag): the file table field by
# field (root, safe relative path, no path listed twice or both as a file and a directory,
# size, digest), the declared total equal to the payload's length (so every payload byte
# belongs to exactly one file), then each file's sha256. install writes only what passed all
# of it.
#
# Note [cache read in place]
# A cache is read at memory speed: nothing in it is decompressed or copied. Up to v2 the
# payload was zlib-compressed; inflating it ran at ~160 MB/s of output on the 2-core
# development machine and, with a digest of the payload and then one of each file, a second
# and third pass over the bytes, was most of a load's cost per MB (efficientnet_b0's 31 MB
# cache took 1.0 s to read on the H200 host). Since v3 each file is stored as it is and
# read_files hands out memoryview slices of the caller's bytes; the one pass over them is
# each file's sha256, and install writes the same slices. The price is size: a cache is about 3x its
# v2 size (compiled code compresses to ~35% with zlib), and precompile no longer spends
# ~14 ms per MB compressing it. A cache given as a bytearray (or a view of one) is copied
# once into bytes first, so the bytes verified are the bytes written.


def code_hash(python_code: str) -> str:
    return hashlib.sha256(python_code.encode("utf-8")).hexdigest()


def pack(python_code: str, backend: str, files: tuple[tuple[str, str, bytes], ...]) -> bytes:
    """The cache for `python_code`: its tag plus the compiled binaries (none for eager)."""
    blobs = [data for _, _, data in files]
    digests = _sha256_all([memoryview(b) for b in blobs])
    table = [[root, rel, len(data), digest]
             for (root, rel, data), digest in zip(files, digests)]
    header = {
        "format": FORMAT, "version": VERSION, "backend": backend,
        "torch": _compat.torch_build_id(), "code_hash": code_hash(python_code), "files": table,
    }
    hb = json.dumps(header, sort_keys=True).encode("utf-8")
    return b"".join([MAGIC, struct.pack(">Q", len(hb)), hashlib.sha256(hb).digest(), hb,
                     *blobs])


def _sha256_all(views: list[memoryview]) -> list[str]:
    """The sha256 hex digest of each buffer (one pass; ~0.8-1.3 GB/s with the CPU's SHA
    instructions. Hashing on a thread pool was tried: its first use in a process cost
    ~0.3 s on the 2-core development machine, six times the whole pass)."""
    return [hashlib.sha256(v).hexdigest() for v in views]


def frozen(cache: bytes | bytearray | memoryview) -> bytes | memoryview:
    """`cache` as bytes nobody can change while it is verified and installed: bytes (or a
    read-only view of bytes) as they are, anything else copied once."""
    if isinstance(cache, memoryview) and isinstance(cache.obj, bytes) and cache.c_contiguous:
        return cache.cast("B")
    return cache if isinstance(cache, bytes) else bytes(cache)


def _bad(what: str, actual: str) -> PrecompileError:
    return PrecompileError(f"the cache is unreadable: {what}", invariant=7, stage="load",
                           where="cache", expected="a cache made by precompile for this "
                           "python_code", actual=actual, hint=_FIX)


def _field(header: dict, key: str, kind: type) -> object:
    value = header.get(key)
    # bool is an int subclass: a version of `true` is as wrong as a missing one
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _bad(f"header field {key!r} is missing or of the wrong type",
                   f"{type(value).__name__}: {repr(value)[:80]}")
    return value


class CacheTag:
    """The integrity tag at the head of a cache envelope (invariant 7). Here, not in
    schemas.py with the stages' records: every load reads it, and a load imports no stage's
    record (Note [a load imports no stage]). A plain class, as warm._Calls says."""

    __slots__ = ("format", "version", "backend", "torch", "code_hash", "n_files",
                 "payload_bytes")

    def __init__(self, *, format: str, version: int, backend: str, torch: str, code_hash: str,
                 n_files: int, payload_bytes: int) -> None:
        self.format, self.version, self.backend = format, version, backend
        self.torch = torch  # torch build id
        self.code_hash = code_hash  # sha256 of python_code
        self.n_files, self.payload_bytes = n_files, payload_bytes

    def __repr__(self) -> str:
        return (f"CacheTag(backend={self.backend!r}, torch={self.torch!r}, "
                f"code_hash={self.code_hash[:16]!r}, n_files={self.n_files})")


def read_tag(cache: bytes) -> tuple[CacheTag, dict]:
    """Parse and validate the envelope's header. Raises PrecompileError (invariant 7).
    See Note [reading an envelope]."""
    if not isinstance(cache, (bytes, bytearray, memoryview)):
        raise PrecompileError("cache must be bytes", invariant=7, stage="load", where="cache",
                              expected="bytes (or None)", actual=type(cache).__name__,
                              hint="pass the bytes precompile returned (open(path, 'rb'))")
    cache = memoryview(cache).cast("B")  # no copy: only the header is read here
    if cache[:len(MAGIC)] != MAGIC:
        raise _bad("it does not start with the precompile_nb cache marker",
                   repr(bytes(cache[:24])))
    off = len(MAGIC)
    if len(cache) < off + 8 + _HASH_LEN:
        raise _bad("truncated header", f"{len(cache)} bytes")
    (hlen,) = struct.unpack(">Q", cache[off:off + 8])
    start = off + 8 + _HASH_LEN
    in_range = hlen <= MAX_HEADER and start + hlen <= len(cache)
    hb = bytes(cache[start:start + hlen]) if in_range else b""
    if not in_range or hashlib.sha256(hb).digest() != cache[off + 8:start]:
        if cache[off + 8:off + 10] == b'{"':  # v1 had the JSON header right here
            raise _bad("unknown format/version (made by an older precompile_nb, cache "
                       "format v1)", repr(bytes(cache[off + 8:off + 40])))
        if not in_range:
            raise _bad("header length out of range", str(hlen))
        raise _bad("header checksum mismatch (corrupted or tampered)", f"{hlen} bytes")
    try:
        header = json.loads(hb.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # JSONDecodeError is one
        raise _bad("header is not valid JSON", str(e)[:200]) from None
    if not isinstance(header, dict):
        raise _bad("header is not an object", type(header).__name__)
    fmt, version = _field(header, "format", str), _field(header, "version", int)
    if fmt != FORMAT or version != VERSION:
        raise _bad("unknown format/version", f"{fmt} v{version}")
    files = _field(header, "files", list)
    tag = CacheTag(format=fmt, version=version, backend=_field(header, "backend", str),
                   torch=_field(header, "torch", str),
                   code_hash=_field(header, "code_hash", str), n_files=len(files),
                   payload_bytes=len(cache) - start - hlen)
    header["_payload_offset"] = start + hlen
    return tag, header


# The root of python_code's own entries in the file table, verified like every file and never
# installed: its bytecode (Note [bytecode in the cache] in core/load.py) and its literals (Note
# [the literals in the cache] there), each named by python_code's hash and this Python's
# bytecode version. marshal reads these two and nothing else.
BYTECODE_ROOT = "python"
_ENTRY_SUFFIX = {"bytecode": "marshal", "literals": "literals.marshal"}


def python_entries(python_code: str, code: Any, literals: Any,
                   ) -> tuple[tuple[str, str, bytes], ...]:
    """python_code's own entries: `code`, its module compiled by this Python, and `literals`,
    its (metadata, warm record) as read from its text, unless None or not marshallable."""
    h = code_hash(python_code)
    out = [(BYTECODE_ROOT, _python_rel(h, "bytecode"), marshal.dumps(code))]
    if literals is not None:
        with contextlib.suppress(ValueError):
            out.append((BYTECODE_ROOT, _python_rel(h, "literals"), marshal.dumps(literals)))
    return tuple(out)


def python_entry(files: list[tuple[str, str, Any]], code_hash_: str,
                 kind: Literal["bytecode", "literals"]) -> Any:
    """The bytes of python_code's `kind` entry among the verified `files`, or None."""
    rel = _python_rel(code_hash_, kind)
    return next((data for root, r, data in files if root == BYTECODE_ROOT and r == rel), None)


def unmarshalled(data: Any) -> Any:
    """The value of a python_code entry's bytes (python_entry); None when it does not read."""
    if data is None:
        return None
    try:
        return marshal.loads(data)
    except (ValueError, EOFError, TypeError):
        return None


def _python_rel(code_hash_: str, kind: str) -> str:
    import importlib.util

    return (f"{code_hash_[:32]}.{sys.implementation.cache_tag}."
            f"{importlib.util.MAGIC_NUMBER.hex()}.{_ENTRY_SUFFIX[kind]}")


def read_files(cache: bytes | memoryview, header: dict) -> list[tuple[str, str, memoryview]]:
    """The verified binaries of an envelope whose tag was accepted: (root, rel, bytes) with
    the bytes a read-only view into `cache` (Note [cache read in place]; pass it through
    `frozen` first when it may change)."""
    payload = memoryview(cache).cast("B")[header["_payload_offset"]:].toreadonly()
    table = _check_table(header["files"])
    total = sum(size for _, _, size, _ in table)
    if total > MAX_PAYLOAD:
        raise _bad("file sizes out of range", str(total))
    if len(payload) != total:
        raise _bad("payload size differs from the file table", f"{len(payload)} != {total}")
    out, pos = [], 0
    for root, rel, size, _ in table:
        out.append((root, rel, payload[pos:pos + size]))
        pos += size
    for (_, rel, _), (_, _, _, want), got in zip(out, table, _sha256_all([d for *_, d in out])):
        if got != want:
            raise _bad("file checksum mismatch", rel)
    return out


def _check_table(table: object) -> list[tuple[str, str, int, str]]:
    """The file table, each entry validated: [root, rel, size, sha256 hex]."""
    if not isinstance(table, list) or len(table) > MAX_FILES:
        raise _bad("file table malformed", type(table).__name__)
    out: list[tuple[str, str, int, str]] = []
    files: set[tuple[str, str]] = set()
    dirs: set[tuple[str, str]] = set()
    for entry in table:
        if not isinstance(entry, list) or len(entry) != 4:
            raise _bad("file table entry malformed", repr(entry)[:120])
        root, rel, size, digest = entry
        if root not in ("inductor", "triton", BYTECODE_ROOT) or not _safe_rel(rel):
            raise _bad("file entry escapes the cache dirs", f"{root}:{rel!r}"[:200])
        if (not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_PAYLOAD
                or not isinstance(digest, str) or not _HEX64.match(digest)):
            raise _bad("file table entry malformed", repr(entry)[:120])
        parts = rel.split("/")
        parents = {(root, "/".join(parts[:i])) for i in range(1, len(parts))}
        # one path twice, or a path that is both a file and a directory, cannot be written
        if (root, rel) in files or (root, rel) in dirs or parents & files:
            raise _bad("file table lists a path twice", f"{root}:{rel}")
        files.add((root, rel))
        dirs |= parents
        out.append((root, rel, size, digest))
    return out


def _safe_rel(rel: object) -> bool:
    if not isinstance(rel, str) or not rel or len(rel) > MAX_REL or not _REL_CHARS.match(rel):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def install(files: list[tuple[str, str, bytes | memoryview]], device_index: int,
            ) -> tuple[int, int]:
    """Write the binaries where this process's compiler caches look for them (atomic
    rename, so a concurrent reader sees the whole file or none; a file already there with
    the same bytes is left alone, one with other bytes is replaced). Returns (written,
    already present)."""
    roots: dict[str, str] = {}  # each only where a file goes (no compiler import either way)
    if any(r == "inductor" for r, _, _ in files):
        roots["inductor"] = _compat.light_inductor_cache_dir()
    if any(r == "triton" for r, _, _ in files):
        roots["triton"] = _compat.triton_cache_dir(device_index)
    written = present = 0
    made: set[str] = set()  # directories known to exist (one makedirs each, not one a file)
    for root, rel, data in files:
        dest = os.path.join(roots[root], *rel.split("/"))
        data = _compat.relocate_cache_file(root, rel, data, dest)
        try:
            if _same_bytes(dest, data):
                present += 1
                continue
            parent = os.path.dirname(dest)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            _write_atomic(dest, data)
        except OSError as e:
            raise PrecompileError("could not install the cache's compiled binaries",
                                  invariant=7, stage="load", where=dest,
                                  expected="a writable compiler cache directory",
                                  actual=f"{type(e).__name__}: {e}",
                                  hint="check TORCHINDUCTOR_CACHE_DIR (permissions, free "
                                       "space), or load with cache=None") from e
        written += 1
    return written, present


def _same_bytes(path: str, data: bytes) -> bool:
    # size first (one stat); then the bytes, so a same-size damaged file is repaired, not trusted
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return False
    with open(path, "rb") as f:
        return f.read() == data


def write_temp(directory: str | os.PathLike[str], prefix: str, data: bytes, *,
               mode: int = 0o644, fsync: bool = False) -> str:
    """`data` in a new temporary file in `directory` (removed again if writing fails): the
    first half of an atomic write; the caller renames it into place. With `fsync`, the bytes
    are on disk before it returns (store's crash-safe saves)."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _write_atomic(dest: str, data: bytes) -> None:
    """`data` at `dest`, atomically: a temporary file beside it (named by process and thread,
    so concurrent installers never share one), written with its final mode, then renamed."""
    tmp = f"{dest}.pcnb-{os.getpid()}-{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                 0o755 if dest.endswith(".so") else 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
