"""Stage 5: load(python_code, cache) -> callable.

Reads the calling convention from python_code by AST (nothing runs before it validates),
checks the cache's tag against python_code, puts the compiled binaries where this process's
compiler caches look, then executes python_code (it is code: warned on every load).

What a cache does on load (documented policy):
  None or b""                      no cache: the kernels compile on load (slow, correct)
  tag of another python_code        PrecompileError (invariant 7)
  tag of another backend            PrecompileError (invariant 7)
  unreadable / corrupted / tampered PrecompileError (invariant 7) naming the fix: load with
                                    cache=None to compile instead
  made by another torch build       a loud RuntimeWarning, the cache is ignored, kernels compile
  not bytes (a str, a number, ...)  PrecompileError (invariant 7)
Every file of an accepted cache is verified; a warm load then installs only the files it
reads, the compile path all of them (Note [install what is read]).

Which path runs python_code (forward.__precompile_load__["path"] and ["reason"]):
  "warm"      the cache is in place and the module asks Inductor for nothing but its cached
              C++ kernels and Triton cubins: the libraries are imported and the cubins
              launched directly, no compiler module is imported and no process started
              (Notes [warm load] and [warm CUDA load] in core/warm.py)
  "compile"   anything else (no cache, another torch build or GPU architecture, a kernel
              autotuned at its first call, an artifact made before _PC_WARM): Inductor looks
              up, or compiles, every kernel as it always did

What python_code does on load: it must parse and hold the _PC_META literal (checked by AST,
before anything runs); then it is executed. Any exception while compiling or executing it
(an edited or damaged artifact) is a PrecompileError (invariant 7) chained to the original.
The source is registered in linecache for tracebacks while the returned callable lives.
"""
from __future__ import annotations

import ast
import contextlib
import dis
import linecache
import os
import sys
import threading
import time
import traceback
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..collector import collector_paused
from ..runtime.artifact_format import ARTIFACT_FORMAT, ARTIFACT_VERSION, META_NAME
from . import _compat, warm
from . import cache as _cache
from .errors import PrecompileError

# CPython 3.11's ast.parse is not thread-safe: a thread switch inside AST construction (a gc
# callback or finalizer running Python code) raises "SystemError: AST constructor recursion
# depth mismatch" (python/cpython#106905). Concurrent loads parse one at a time.
_AST_LOCK = threading.Lock()

_NOT_ARTIFACT = ("pass the python_code string that precompile returned (or the NAME.py file "
                 "saved next to NAME.cache)")


class CacheWarning(RuntimeWarning):
    """The cache was made by another torch build: it is ignored and the kernels compile."""


def read_meta(python_code: str) -> dict[str, Any]:
    """The metadata literal of an artifact, read without executing it; its header and every
    field of its calling convention are checked (convention.decode)."""
    return _read(python_code)[1]


def _read(python_code: str) -> tuple[ast.Module, dict[str, Any]]:
    """python_code's syntax tree and its checked metadata literal (read_meta)."""
    if not isinstance(python_code, str):
        raise PrecompileError("python_code must be a str", invariant=7, stage="load",
                              where="python_code", expected="str",
                              actual=type(python_code).__name__, hint=_NOT_ARTIFACT)
    try:
        with _AST_LOCK:
            tree = ast.parse(python_code)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        # MemoryError / RecursionError: the parser's "too complex" (deeply nested code)
        raise PrecompileError("python_code does not parse", invariant=7, stage="load",
                              where=f"python_code line {getattr(e, 'lineno', '?')}",
                              expected="a precompile_nb artifact", actual=str(e),
                              hint=_NOT_ARTIFACT) from None
    for node in tree.body:
        if _assigns(node, META_NAME):
            try:
                meta = ast.literal_eval(node.value)  # type: ignore[attr-defined]
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
                raise PrecompileError("the artifact's metadata is not a plain literal",
                                      invariant=7, stage="load", where=META_NAME,
                                      expected="a dict literal", actual=repr(e)[:200],
                                      hint=_NOT_ARTIFACT) from None
            break
    else:
        raise PrecompileError("python_code is not a precompile_nb artifact (no calling-"
                              "convention metadata)", invariant=7, stage="load",
                              where="python_code", expected=f"a module-level {META_NAME} = {{...}}",
                              actual="not found", hint=_NOT_ARTIFACT)
    return tree, _checked(meta)


def _checked(meta: Any, fields: bool = True) -> dict[str, Any]:
    """The metadata literal, its header and (`fields`) every field of its convention checked
    (Note [a load imports no driver])."""
    required = {"format", "version", "backend", "torch"}
    if not isinstance(meta, dict) or not required <= set(meta):
        raise PrecompileError("the artifact's metadata is incomplete", invariant=7,
                              stage="load", where=META_NAME, expected=sorted(required),
                              # keys of an edited literal can be of any (mixed) type
                              actual=(sorted(map(repr, meta)) if isinstance(meta, dict)
                                      else type(meta).__name__),
                              hint=_NOT_ARTIFACT)
    if meta["format"] != ARTIFACT_FORMAT or meta["version"] != ARTIFACT_VERSION:
        raise PrecompileError("unknown artifact format", invariant=7, stage="load",
                              where=META_NAME,
                              expected=f"{ARTIFACT_FORMAT} v{ARTIFACT_VERSION}",
                              actual=f"{meta['format']} v{meta['version']}",
                              hint="re-create the artifact with this precompile_nb version")
    for key, ok, want in (("backend", meta["backend"] in ("inductor", "eager"),
                           "'inductor' or 'eager'"),
                          ("torch", isinstance(meta["torch"], str), "a torch version str")):
        if not ok:
            raise PrecompileError("the artifact's metadata is malformed", invariant=7,
                                  stage="load", where=f"{META_NAME}[{key!r}]", expected=want,
                                  actual=repr(meta[key])[:80], hint=_NOT_ARTIFACT)
    if fields:  # every nested field, before anything runs (invariant 7), by the driver's decoder
        from ..runtime.convention import decode
        decode(meta)
    return meta


def _read_fast(python_code: str) -> tuple[dict[str, Any], Any] | None:
    """(metadata, _PC_WARM) read from the text of the two statements alone, as emit writes
    them (`NAME = <literal>` at the start of a line, continued by indented lines): a warm load
    then never builds the syntax tree of the whole module (a GPT step's is ~450 KB). None when
    python_code is not laid out so; `_read` then parses it all and says what is wrong. A
    metadata literal found so but wrong in a field is that field's PrecompileError at once:
    parsing the whole module would name the same field (only slower)."""
    if not isinstance(python_code, str):
        return None
    unreadable = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError, IndexError,
                  AttributeError)
    try:
        meta = _literal_statement(python_code, META_NAME)
    except unreadable:
        return None
    if not isinstance(meta, dict):
        return None
    checked = _checked(meta)  # a wrong field: its PrecompileError now, as _read would give
    try:
        return checked, _literal_statement(python_code, warm.WARM_NAME)
    except unreadable:
        return None


def _literal_statement(python_code: str, name: str) -> Any:
    """The literal assigned by the line-start statement `name = ...`; None if there is none."""
    start = python_code.find(f"\n{name} = ")
    if start < 0:
        return None
    start += 1
    end = python_code.find("\n", start)
    while end != -1 and python_code[end + 1:end + 2] in (" ", "\t"):
        end = python_code.find("\n", end + 1)
    statement = python_code[start:] if end == -1 else python_code[start:end]
    found, value = _constant_value(statement[len(name) + 3:])
    if found:
        return value
    with _AST_LOCK:
        node = ast.parse(statement).body[0]
    if not _assigns(node, name):
        raise ValueError(name)
    return ast.literal_eval(node.value)  # type: ignore[attr-defined]


# Note [literals read as bytecode]
#   The warm record of a large artifact is a large literal (a 343-kernel CUDA step: ~250 KB).
#   ast.parse builds a Python object per node of it: 75 ms of the load on the development
#   machine, where literal_eval's walk then takes 5. Compiled straight to bytecode (no Python
#   objects per node) and evaluated, it takes 38 ms. That is only done for bytecode that can
#   do nothing but build the value: it reads no name (so it reaches no function, module or
#   attribute), holds no nested code, and its every instruction is one of those that push a
#   constant or build a list, tuple, set or dict (_BUILDS, for this Python). Anything else,
#   e.g. an opcode a later Python emits for a literal, is read by ast.literal_eval as before.

_BUILDS = frozenset(dis.opmap[n] for n in (
    "CACHE", "NOP", "RESUME", "EXTENDED_ARG", "LOAD_CONST", "LOAD_SMALL_INT", "RETURN_VALUE",
    "RETURN_CONST", "BUILD_LIST", "BUILD_TUPLE", "BUILD_SET", "BUILD_MAP", "BUILD_CONST_KEY_MAP",
    "LIST_APPEND", "LIST_EXTEND", "SET_ADD", "SET_UPDATE", "MAP_ADD", "DICT_UPDATE")
    if n in dis.opmap)


def _constant_value(text: str) -> tuple[bool, Any]:
    """(True, the value of the literal expression `text`) where its bytecode only builds it
    (Note [literals read as bytecode]), else (False, None)."""
    try:
        code = compile(text, "<precompile_nb literal>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False, None
    if (code.co_names or any(isinstance(c, types.CodeType) for c in code.co_consts)
            or not set(code.co_code[0::2]) <= _BUILDS):
        return False, None
    try:
        return True, eval(code, {"__builtins__": {}})  # noqa: S307 - checked above
    except Exception:  # noqa: BLE001 - e.g. a dict of unhashable keys: literal_eval says
        return False, None


def _user_stacklevel() -> int:
    """The stacklevel of warnings.warn, called here, that names the user's line: the first
    frame outside precompile_nb (load is reached through precompile.load, load_pair, ...)."""
    f, level = sys._getframe(1), 1
    while f is not None and _PACKAGE_DIR in f.f_code.co_filename:
        f, level = f.f_back, level + 1
    return level


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(python_code: str, cache: bytes | None = None) -> Callable[..., Any]:
    """Rebuild the callable of a (python_code, cache) pair made by precompile.

    >>> import torch
    >>> from precompile_nb import precompile
    >>> code, cache = precompile(lambda m, x: m(x), torch.nn.Linear(2, 3), torch.randn(4, 2),
    ...                          backend="eager")
    >>> f = precompile.load(code, cache)  # doctest: +SKIP
    """
    try:
        with collector_paused():  # Note [the collector pauses for a build]
            return _load(python_code, cache)
    except PrecompileError:
        raise
    except Exception as e:  # noqa: BLE001 - no raw error reaches the user
        raise PrecompileError(
            f"precompile.load failed: {type(e).__name__}", stage="load",
            where=(traceback.format_exception_only(type(e), e)[-1].strip())[:200],
            expected="an artifact that loads", actual=f"{type(e).__name__}: {str(e)[:300]}",
            hint="the chained exception has the original error (e.g. the compiler cache "
                 "directory is not writable: set TORCHINDUCTOR_CACHE_DIR, or load with "
                 "cache=None)") from e


def _load(python_code: str, cache: bytes | None) -> Callable[..., Any]:
    clock = _Clock()
    envelope = _envelope(python_code, cache)  # Note [the literals in the cache]
    if envelope is not None:
        clock.lap("cache_read")
    tree, meta, record = _read_artifact(python_code, envelope)
    clock.lap("read")
    warnings.warn(f"precompile.load executes python_code of `{meta['fn_name']}` as code: only "
                  "load artifacts you trust (invariant 7)", UserWarning,
                  stacklevel=_user_stacklevel())
    stats: dict[str, Any] = {"cache_files": 0, "written": 0, "present": 0, "deferred": 0,
                             "used": False, "seconds": clock.seconds, "literals": "text"
                             if envelope is None or envelope.literals is None else "cache"}
    installed = _take_cache(python_code, cache, meta, stats, clock, envelope)
    calls = warm.recorded_calls(record)
    if calls is None and tree is None:  # no recorded scan (eager backend, older artifact)
        tree, _ = _read(python_code)
    with _compat.GLOBAL_LOCK:  # Note [a load's cache dirs are read once]
        plan = warm.plan(calls if calls is not None else _graph_section(tree), record,
                         cache_used=stats["used"], no_cache_reason=installed.why_not,
                         cached_files=installed.inductor, cached_triton=installed.triton,
                         triton_dir=(_compat.triton_cache_dir(meta["device_index"])
                                     if installed.triton else ""))
        stats["path"], stats["reason"] = plan.path, plan.reason
        clock.lap("plan")
        rest = _install(installed.files, plan, meta, stats)
        clock.lap("cache_install")
    try:
        return _run(python_code, tree, meta, plan, stats, clock, rest, installed.bytecode,
                    envelope.tag.code_hash if envelope is not None else None)
    finally:  # every kernel is loaded once the module ran: the artifact keeps no cache bytes
        if plan.cubins:
            plan.cubins.clear()


# Note [a load's cache dirs are read once]
#   The warm plan names each kernel binary by its path under the compiler cache dirs, and
#   install writes the binaries there; both read TORCHINDUCTOR_CACHE_DIR. A precompile in
#   another thread points that variable at its private compile dir for as long as it runs
#   (holding GLOBAL_LOCK), then deletes the dir. A load that planned meanwhile named paths in
#   that dir, installed (under the lock, after the precompile) into the user's dir, and found
#   no library to open: the warm path failed and the load compiled the kernels (seen in CI,
#   torch 2.15, two threads each precompiling and loading). Planning and installing under
#   the one lock reads the dirs once, when no private compile dir is set.


# Note [install what is read]
#   A cache holds every file Inductor and Triton keep for the artifact's kernels: for a C++
#   kernel its source and its library, for a Triton kernel its cubin beside the IR, PTX and
#   metadata files and a group file. The warm path reads only the libraries and the cubins
#   (WarmPlan.needs), and creating a file costs more than writing its bytes (~0.8 ms a file
#   on the development machine's disk, most of a large cache's load). So after every file
#   was verified, a warm load installs what it reads; the rest is installed only should the
#   warm path fail and the compile path run (Inductor and Triton look for all of them then).
#   The compile path installs everything, as before. `written` + `present` + `deferred` is
#   the cache's file count.


# Note [cubins from memory]
#   A warm load of a CUDA artifact launches each Triton kernel's cubin, which the cache holds
#   verified in memory. Installing each as a file first (its own directory under Triton's
#   cache, a temporary file, a rename) cost ~0.1 s of efficientnet_b0's 0.30 s load (326
#   kernels, H200). So the warm path hands the CUDA driver the bytes themselves, through an
#   anonymous memory file (_compat.load_cubin_bytes): no directory, no file on disk. The
#   cubins count as deferred: should the warm path fail, they are installed with the rest
#   for the compile path. Where the process cannot make memory files (not Linux), they are
#   installed as before.


def _install(files: Sequence[tuple[str, str, Any]], plan: warm.WarmPlan, meta: dict[str, Any],
             stats: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Install what `plan` runs on (Notes [install what is read], [cubins from memory]);
    returns the files left."""
    if not files:
        return []
    now, rest = list(files), []
    if plan.path == "warm":
        now = [f for f in files if (f[0], f[1]) in plan.needs]
        rest = [f for f in files if (f[0], f[1]) not in plan.needs]
        if plan.cubins is not None and _compat.cubins_from_memory():
            plan.cubins.update((rel, data) for root, rel, data in now if root == "triton")
            rest += [f for f in now if f[0] == "triton"]
            now = [f for f in now if f[0] != "triton"]
    _install_now(now, meta, stats)
    stats["deferred"] = len(rest)
    return rest


def _install_now(files: list[tuple[str, str, Any]], meta: dict[str, Any],
                 stats: dict[str, Any]) -> None:
    if files:
        with _compat.GLOBAL_LOCK:
            written, present = _cache.install(files, meta["device_index"])
        stats["written"] += written
        stats["present"] += present


def _read_artifact(python_code: str, envelope: _Envelope | None,
                   ) -> tuple[ast.Module | None, dict[str, Any], Any]:
    """(syntax tree or None, checked metadata, _PC_WARM literal): from the cache when it holds
    them (Note [the literals in the cache]), else from the two statements alone when they are
    laid out as emit writes them, else from the parsed module."""
    if envelope is not None and envelope.literals is not None:
        meta, record = envelope.literals  # decoded when packed: Note [a load imports no driver]
        return None, _checked(meta, fields=False), record
    fast = _read_fast(python_code)
    if fast is not None:
        return None, *fast
    tree, meta = _read(python_code)
    return tree, meta, _warm_record(tree)


class _Installed:
    """What the cache puts in place: its inductor and triton files' relative paths (empty when
    unused), why not when unused, its verified files (installed after the plan, Note [install
    what is read]), python_code's bytecode (Note [bytecode in the cache])."""

    __slots__ = ("inductor", "triton", "why_not", "files", "bytecode")

    def __init__(self, inductor: set[str], triton: set[str], why_not: str,
                 files: Sequence[tuple[str, str, Any]] = (), bytecode: Any = None) -> None:
        self.inductor, self.triton, self.why_not = inductor, triton, why_not
        self.files, self.bytecode = files, bytecode


# Note [a load imports no driver]
#   A load runs the artifact's own copy of the driver, which decodes the metadata as it
#   starts; the package's copy (runtime/driver.py and the records: 2.1 ms of a 10.7 ms import
#   + load of the CPU benchmark's transformer) only checked every field before anything ran.
#   Metadata from the cache (Note [the literals in the cache]) was checked so when packed,
#   with this reader and the driver the artifact carries, and its verified entry is tied to
#   python_code's text by hash: that path checks the header alone (runtime/violation.py,
#   artifact_format.py); metadata read from the text is decoded field by field, as ever.


# Note [the literals in the cache]
#   A load reads two literals before anything runs: the metadata (_PC_META) and the warm
#   record (_PC_WARM). Read from python_code's text they are compiled (Note [literals read as
#   bytecode]): 1.5 ms for the 6.5 KB metadata of the CPU benchmark's transformer on the
#   development machine, ~40 ms for the warm record of a CUDA step with hundreds of kernels.
#   So precompile packs both values, marshalled, in the cache beside python_code's bytecode
#   (root "python", under a name that holds python_code's hash and this Python's bytecode
#   tag), and a load whose cache is an envelope naming its python_code reads the cache
#   first and takes them from there (tens of microseconds); they are checked as ever
#   (_checked: the header and every field of the convention). Nothing else changes: the
#   values are the ones precompile read back from the text with the load's own readers,
#   the entry is verified like every file, and the tag's hash ties it to that text. Any
#   other load reads the text: no cache, another Python, a cache without the entry (made
#   before it, or eager), or a cache that does not read or names another python_code;
#   that cache is then refused after the text's checks, in the order it always was.


class _Envelope:
    """A cache read ahead of the text (Note [the literals in the cache]): its tag, which names
    python_code, its verified files, and the (metadata, warm record) it holds, or None."""

    __slots__ = ("tag", "files", "literals")

    def __init__(self, tag: _cache.CacheTag, files: list[tuple[str, str, Any]],
                 literals: tuple[dict[str, Any], Any] | None) -> None:
        self.tag, self.files, self.literals = tag, files, literals


def _envelope(python_code: Any, cache: Any) -> _Envelope | None:
    """The cache read and verified when it is an envelope whose tag names python_code, else
    None (_take_cache then refuses it after the text's checks)."""
    if (not isinstance(python_code, str) or not isinstance(cache, (bytes, bytearray, memoryview))
            or len(cache) == 0):
        return None
    try:
        tag, header = _cache.read_tag(cache)
        if tag.code_hash != _cache.code_hash(python_code):
            return None
        files = _cache.read_files(_cache.frozen(cache), header)
    except PrecompileError:
        return None
    value = _cache.unmarshalled(_cache.python_entry(files, tag.code_hash, "literals"))
    ok = isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict)
    return _Envelope(tag, files, value if ok else None)


def _check_code_hash(python_code: str, tag: _cache.CacheTag) -> None:
    if tag.code_hash != _cache.code_hash(python_code):
        raise PrecompileError("the cache belongs to another python_code", invariant=7,
                              stage="load", where="cache code_hash",
                              expected=_cache.code_hash(python_code)[:16],
                              actual=tag.code_hash[:16],
                              hint="load each python_code with the cache saved with it "
                                   "(NAME.py with NAME.cache), or with cache=None")


def _take_cache(python_code: str, cache: Any, meta: dict[str, Any], stats: dict[str, Any],
                clock: _Clock, envelope: _Envelope | None = None) -> _Installed:
    """Check the cache against python_code (tag, backend) and read its verified files, to be
    installed when it was made by this torch build (see the policy above). `envelope`: the
    cache already read and verified (_envelope), or None to read it here."""
    # None or empty bytes: no cache. Anything else must be an envelope (read_tag says so
    # when it is not even bytes: a falsy 0 or "" is not silently "no cache").
    if cache is None or (isinstance(cache, (bytes, bytearray, memoryview)) and len(cache) == 0):
        return _Installed(set(), set(), "no cache: Inductor compiles the kernels now")
    if envelope is None:
        tag, header = _cache.read_tag(cache)
        _check_code_hash(python_code, tag)
    else:
        tag = envelope.tag
    if tag.backend != meta["backend"]:
        raise PrecompileError("the cache was made for another backend", invariant=7,
                              stage="load", where="cache backend",
                              expected=meta["backend"], actual=tag.backend,
                              hint="load each python_code with the cache saved with it")
    files = (envelope.files if envelope is not None  # Note [cache read in place]
             else _cache.read_files(_cache.frozen(cache), header))
    clock.lap("cache_read")
    stats["cache_files"] = len(files)
    if tag.torch != _compat.torch_build_id():
        warnings.warn(f"the cache of `{meta['fn_name']}` was made by torch {tag.torch}, this is "
                      f"{_compat.torch_build_id()}: ignoring it, the kernels will compile now "
                      "(precompile again with this torch to get a matching cache)",
                      CacheWarning, stacklevel=_user_stacklevel())
        return _Installed(set(), set(),
                          f"the cache was made by another torch build ({tag.torch})")
    bytecode = _cache.python_entry(files, tag.code_hash, "bytecode")
    files = [f for f in files if f[0] != _cache.BYTECODE_ROOT]
    if not files:
        return _Installed(set(), set(), "no cache: Inductor compiles the kernels now",
                          bytecode=bytecode)
    stats["used"] = True
    return _Installed({rel for root, rel, _ in files if root == "inductor"},
                      {rel for root, rel, _ in files if root == "triton"}, "", files, bytecode)


def _run(python_code: str, tree: ast.Module | None, meta: dict[str, Any],
         plan: warm.WarmPlan, stats: dict[str, Any], clock: _Clock,
         rest: list[tuple[str, str, Any]], bytecode: Any = None,
         code_hash: str | None = None) -> Callable[..., Any]:
    """Compile and execute python_code on the planned path; its `forward`, which carries the
    metadata and the load's stats, and keeps python_code's lines for tracebacks."""
    filename = _source_name(meta["fn_name"], code_hash or _cache.code_hash(python_code))
    _hold_source(filename, python_code)  # tracebacks through the artifact show its lines
    code = None
    try:
        # dont_inherit: compiled as in a fresh process, whatever this module's __future__;
        # from the tree when it was parsed (the parse is half the cost), else from the text
        code = _from_bytecode(bytecode, filename)
        stats["bytecode"] = code is not None
        if code is None:
            code = _compile(tree, python_code, filename)
        clock.lap("compile")
        ns = _execute(code, meta, plan, stats, rest)
        clock.lap("execute")
    except Exception as e:
        if isinstance(e, PrecompileError):  # does not parse (as _read says), or the driver
            _drop_source(filename)  # named what is wrong and its fix itself
            raise
        err = _exec_failed(e, filename)  # reads the failing line from linecache
        _drop_source(filename)
        raise err from e
    forward = ns.get("forward")
    if not callable(forward):
        _drop_source(filename)
        raise PrecompileError("python_code defines no forward(*args)", invariant=7,
                              stage="load", where="python_code", expected="forward",
                              actual="missing", hint=_NOT_ARTIFACT)
    forward.__precompile_meta__ = meta
    forward.__precompile_load__ = stats
    # each load holds its source for tracebacks: let go with the callable, or a process that
    # loads many artifacts keeps every source it ever loaded
    weakref.finalize(forward, _drop_source, filename)
    return forward


# Note [one source name a python_code]
#   A loaded artifact's code objects are named after its function and python_code's hash,
#   the name under which linecache holds its lines for tracebacks. precompile compiles the
#   cache's bytecode under that very name, so a load runs the code objects as unmarshalled;
#   renaming them all (~250 for a small module) was ~1 ms of a fresh process's load. Loads
#   of one python_code share the name and the lines, which stay while any of them lives.
_SOURCES: dict[str, int] = {}  # source name -> live loads holding its lines
_SOURCES_LOCK = threading.Lock()


def _source_name(fn_name: str, code_hash: str) -> str:
    return f"<precompile_nb artifact {fn_name} {code_hash[:12]}>"


def _hold_source(filename: str, python_code: str) -> None:
    with _SOURCES_LOCK:
        _SOURCES[filename] = _SOURCES.get(filename, 0) + 1
        if filename not in linecache.cache:
            linecache.cache[filename] = (len(python_code), None, python_code.splitlines(True),
                                         filename)


def _drop_source(filename: str) -> None:
    with _SOURCES_LOCK:
        left = _SOURCES.pop(filename, 1) - 1
        if left > 0:
            _SOURCES[filename] = left
        else:
            linecache.cache.pop(filename, None)


class _Clock:
    """Where a load's time goes: `seconds` maps each stage (read, cache_read, cache_install,
    plan, compile, execute; the stages a load ran) to its wall time, summed per stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._t
        self._t = now


def _graph_section(tree: ast.Module) -> list[ast.stmt]:
    """The statements of python_code's graph section: every one before the metadata literal."""
    for i, node in enumerate(tree.body):
        if _assigns(node, META_NAME):
            return tree.body[:i]
    return []


def _warm_record(tree: ast.Module) -> Any:
    """The _PC_WARM literal (Note [warm load]), which follows the metadata literal; None if
    absent or not a literal (then plan says it found none, and compiles)."""
    for i, node in enumerate(tree.body):
        if _assigns(node, META_NAME):
            for after in tree.body[i + 1:i + 3]:
                if _assigns(after, warm.WARM_NAME):
                    try:
                        return ast.literal_eval(after.value)  # type: ignore[attr-defined]
                    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                        return None
            return None
    return None


def _assigns(node: ast.stmt, name: str) -> bool:
    return (isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name)


def _compile(tree: ast.Module | None, python_code: str, filename: str) -> Any:
    """python_code compiled, under the parse lock. Compiled from the text, a syntax error is
    the same PrecompileError `_read` gives; and the metadata read from the text must be the
    module's own (a module-level name), or `_read` decides."""
    with _AST_LOCK:
        if tree is not None:
            return compile(tree, filename, "exec", dont_inherit=True)
        try:
            code = compile(python_code, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            code = None
    if code is None or META_NAME not in code.co_names:
        return _compile(_read(python_code)[0], python_code, filename)  # raises if broken
    return code


# Note [bytecode in the cache]
#   Compiling python_code is most of a warm load of a module with many kernels (a CNN's
#   ~370 KB: 0.4 s of a 0.75 s load on the development machine): the kernels' sources, the
#   graph's call, the driver and the metadata literals, compiled anew by every loading
#   process, as an imported module would be without its .pyc. So precompile also packs the
#   module compiled by its own Python, marshalled, in the cache (root "python"), under a
#   name that holds the hash of the python_code it was compiled from and the bytecode's
#   version (the interpreter's cache tag and magic number). A load whose cache holds the
#   entry for its python_code and its Python runs that code object (verified like every
#   cache file; compiled under the name tracebacks find python_code's lines by, Note [one
#   source name a python_code]);
#   any other load compiles python_code as before: another Python, a cache repacked with
#   another python_code, an eager artifact (none packed). python_code stays the source of
#   truth: an edited one no longer matches its cache's tag and is refused (invariant 7).
def python_entries(python_code: str) -> tuple[tuple[str, str, bytes], ...]:
    """The cache entries precompile packs for python_code itself: its bytecode, compiled under
    the name loads give it (Note [bytecode in the cache]), and its literals as the load's own
    readers read them from the text (Note [the literals in the cache])."""
    literals = _read_fast(python_code)
    filename = ("<precompile_nb artifact>" if literals is None
                else _source_name(literals[0]["fn_name"], _cache.code_hash(python_code)))
    with _AST_LOCK:
        code = compile(python_code, filename, "exec", dont_inherit=True)
    return _cache.python_entries(python_code, code, literals)


def _from_bytecode(data: Any, filename: str) -> Any:
    """The code object of a bytecode entry, its every code object named `filename` (as
    compiled, or renamed: a cache of an older precompile_nb); None when there is none or it
    does not read as python_code's module."""
    code = _cache.unmarshalled(data)
    if not isinstance(code, types.CodeType) or META_NAME not in code.co_names:
        return None
    return code if code.co_filename == filename else _renamed(code, filename)


def _renamed(code: types.CodeType, filename: str) -> types.CodeType:
    consts = tuple(_renamed(c, filename) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _execute(code: Any, meta: dict[str, Any], plan: warm.WarmPlan, stats: dict,
             rest: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """Execute python_code on the planned path; returns its namespace. Should a warm load
    fail to import a cached kernel library (ImportError / OSError: a missing system library,
    a noexec cache dir) or to load a cubin (_compat.load_cubin: an OSError), it says so
    with a RuntimeWarning, installs the cache's other files (Note [install what is read])
    and runs the compile path."""
    fn_name = meta["fn_name"]
    if plan.path == "warm":
        try:
            return _exec_in(code, fn_name, plan.imports, contextlib.nullcontext())
        except (ImportError, OSError) as e:
            stats["path"] = "compile"
            stats["reason"] = f"the warm path failed ({type(e).__name__}: {str(e)[:200]})"
            warnings.warn(f"precompile.load of `{fn_name}`: {stats['reason']}; compiling the "
                          "kernels instead", RuntimeWarning, stacklevel=5)
            _install_now(rest, meta, stats)
            stats["deferred"] = 0
    return _exec_in(code, fn_name, None, _compat.running_artifact(stats["used"]))


def _exec_in(code: Any, fn_name: str, imports: dict[str, dict[str, Any]] | None,
             settings: contextlib.AbstractContextManager) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": f"precompile_nb_artifact_{fn_name}",
                          "__precompile_error__": PrecompileError}
    if imports:
        ns["__builtins__"] = warm.builtins_for(imports)
    with _compat.GLOBAL_LOCK, settings:
        exec(code, ns)  # noqa: S102
    return ns


def _exec_failed(e: Exception, filename: str) -> PrecompileError:
    """python_code raised while it was compiled or executed: an edited or damaged artifact
    (or one that needs what this process lacks, e.g. triton for a CUDA artifact)."""
    where = "python_code"
    if isinstance(e, SyntaxError) and e.lineno:
        text = e.text or linecache.getline(filename, e.lineno)
        where = f"python_code line {e.lineno}: {text.strip()[:120]}"
    for fs in traceback.extract_tb(e.__traceback__):
        if fs.filename == filename:  # the innermost frame in python_code
            where = f"python_code line {fs.lineno}: {(fs.line or '').strip()[:120]}"
    return PrecompileError("python_code failed while it was executed", invariant=7,
                           stage="load", where=where,
                           expected="the unmodified python_code precompile returned",
                           actual=f"{type(e).__name__}: {str(e)[:300]}",
                           hint="load the NAME.py file exactly as it was saved (precompile "
                                "again if it was edited); the chained exception shows the "
                                "original error")
