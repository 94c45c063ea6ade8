"""Stage 4: pack / unpack the cache envelope (invariant 7).

    MAGIC | 8-byte header length | header (JSON, the integrity tag + file table) | payload

The payload is the zlib-compressed concatenation of the compiled binaries of one artifact.
Nothing is ever unpickled: the header is JSON, the payload is bytes at known offsets, and every
file is checked against its sha256 before it is written anywhere.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import zlib

from . import _compat
from .errors import PrecompileError
from .schemas import CacheTag

MAGIC = b"PRECOMPILE_NB-CACHE\n"
FORMAT = "precompile_nb.cache"
VERSION = 1
# Bounds a hostile or corrupt envelope cannot make us exceed.
MAX_HEADER = 16 << 20
MAX_FILES = 100_000
MAX_PAYLOAD = 4 << 30

_FIX = ("use the cache file saved together with this python_code, or load without it: "
        "precompile.load(python_code, cache=None) compiles the kernels instead")


def code_hash(python_code: str) -> str:
    return hashlib.sha256(python_code.encode("utf-8")).hexdigest()


def pack(python_code: str, backend: str, files: tuple[tuple[str, str, bytes], ...]) -> bytes:
    """The cache for `python_code`: its tag plus the compiled binaries (none for eager)."""
    table, blobs = [], []
    for root, rel, data in files:
        table.append([root, rel, len(data), hashlib.sha256(data).hexdigest()])
        blobs.append(data)
    payload = zlib.compress(b"".join(blobs), 1)
    header = {
        "format": FORMAT, "version": VERSION, "backend": backend,
        "torch": _compat.torch_build_id(), "code_hash": code_hash(python_code),
        "files": table, "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    hb = json.dumps(header, sort_keys=True).encode("utf-8")
    return MAGIC + struct.pack(">Q", len(hb)) + hb + payload


def _bad(what: str, actual: str) -> PrecompileError:
    return PrecompileError(f"the cache is unreadable: {what}", invariant=7, stage="load",
                           where="cache", expected="a cache made by precompile for this "
                           "python_code", actual=actual, hint=_FIX)


def read_tag(cache: bytes) -> tuple[CacheTag, dict]:
    """Parse and validate the envelope's header. Raises PrecompileError (invariant 7)."""
    if not isinstance(cache, (bytes, bytearray, memoryview)):
        raise PrecompileError("cache must be bytes", invariant=7, stage="load", where="cache",
                              expected="bytes (or None)", actual=type(cache).__name__,
                              hint="pass the bytes precompile returned (open(path, 'rb'))")
    cache = bytes(cache)
    if not cache.startswith(MAGIC):
        raise _bad("it does not start with the precompile_nb cache marker",
                   repr(cache[:24]))
    off = len(MAGIC)
    if len(cache) < off + 8:
        raise _bad("truncated header", f"{len(cache)} bytes")
    (hlen,) = struct.unpack(">Q", cache[off:off + 8])
    if hlen > MAX_HEADER or off + 8 + hlen > len(cache):
        raise _bad("header length out of range", str(hlen))
    try:
        header = json.loads(cache[off + 8:off + 8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad("header is not valid JSON", str(e)) from None
    if not isinstance(header, dict):
        raise _bad("header is not an object", type(header).__name__)
    try:
        tag = CacheTag(format=str(header["format"]), version=int(header["version"]),
                       backend=str(header["backend"]), torch=str(header["torch"]),
                       code_hash=str(header["code_hash"]), n_files=len(header["files"]),
                       payload_bytes=len(cache) - off - 8 - hlen)
    except (KeyError, TypeError, ValueError) as e:
        raise _bad("header misses tag fields", repr(e)) from None
    if tag.format != FORMAT or tag.version != VERSION:
        raise _bad("unknown format/version", f"{tag.format} v{tag.version}")
    header["_payload_offset"] = off + 8 + hlen
    return tag, header


def read_files(cache: bytes, header: dict) -> list[tuple[str, str, bytes]]:
    """The verified binaries of an envelope whose tag was accepted."""
    payload = bytes(cache)[header["_payload_offset"]:]
    if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
        raise _bad("payload checksum mismatch (corrupted or tampered)", f"{len(payload)} bytes")
    table = header["files"]
    if not isinstance(table, list) or len(table) > MAX_FILES:
        raise _bad("file table malformed", type(table).__name__)
    try:
        total = sum(int(e[2]) for e in table)
    except (TypeError, ValueError, IndexError):
        raise _bad("file table malformed", repr(table[:2])) from None
    if total < 0 or total > MAX_PAYLOAD:
        raise _bad("file sizes out of range", str(total))
    d = zlib.decompressobj()
    try:
        raw = d.decompress(payload, total + 1)
    except zlib.error as e:
        raise _bad("payload does not decompress", str(e)) from None
    if len(raw) != total:
        raise _bad("payload size differs from the file table", f"{len(raw)} != {total}")
    out, pos = [], 0
    for entry in table:
        root, rel, size, digest = entry
        if root not in ("inductor", "triton") or not _safe_rel(rel):
            raise _bad("file entry escapes the cache dirs", f"{root}:{rel}")
        data = raw[pos:pos + int(size)]
        pos += int(size)
        if hashlib.sha256(data).hexdigest() != digest:
            raise _bad("file checksum mismatch", rel)
        out.append((root, rel, data))
    return out


def _safe_rel(rel: object) -> bool:
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/"))


def install(files: list[tuple[str, str, bytes]], device_index: int) -> tuple[int, int]:
    """Write the binaries where this process's compiler caches look for them (atomic
    rename; files already present are left alone). Returns (written, already present)."""
    roots = {"inductor": _compat.inductor_cache_dir()}
    if any(r == "triton" for r, _, _ in files):
        roots["triton"] = _compat.triton_cache_dir(device_index)
    written = present = 0
    for root, rel, data in files:
        dest = os.path.join(roots[root], *rel.split("/"))
        if os.path.exists(dest) and os.path.getsize(dest) == len(data):
            present += 1
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".pcnb-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o755 if dest.endswith(".so") else 0o644)
            os.replace(tmp, dest)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        written += 1
    return written, present
