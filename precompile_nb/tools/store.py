"""Save and load a (python_code, cache) pair as NAME.py + NAME.cache, crash-safely.

A pair on disk is two files, and no file system renames two files at once. The protocol makes
the cache the commit record: its tag names the python_code it belongs to (code_hash, invariant
7), so a reader can always tell a whole pair from a torn one, and finish a torn one.

save_pair(directory, name, python_code, cache):
  0. take the pair's lock (.NAME.lock, `fcntl.flock` where the platform has it): one saver of
     NAME at a time, and readers that found a torn pair wait for the saver to finish. Its
     holder removes the lock file before letting go (see _locked): a finished save leaves
     NAME.py and NAME.cache alone in the directory
  1. recover from an earlier save that was killed (see "after a crash" below), and remove its
     leftover temporary files
  2. write the new cache and python_code to temporary files in the same directory
     (.NAME.cache.*.tmp, .NAME.py.*.tmp), fsync both, fsync the directory
  3. os.replace the cache into NAME.cache                  <- the commit point
  4. os.replace python_code into NAME.py, fsync the directory

After a crash (SIGKILL, power loss) at any point:
  before 3   NAME.py + NAME.cache are the previous pair, untouched (temporary files are junk,
             removed by the next save)
  3 to 4     NAME.cache is new, NAME.py is old; the new python_code is complete and fsynced in
             its temporary file, found by the new cache's code_hash: load_pair (and the next
             save_pair) completes the save
  after 4    the new pair
So load_pair always sees a whole pair: the previous one, or the new one once its cache was
committed. A pair that does not belong together and cannot be completed (files copied by hand
from two saves) is a PrecompileError from load's code_hash check (invariant 7).

    >>> import tempfile, torch
    >>> from precompile_nb import precompile
    >>> code, cache = precompile(lambda x: x * 2, torch.ones(2), backend="eager")
    >>> d = tempfile.mkdtemp()
    >>> py_path, cache_path = save_pair(d, "double", code, cache)
    >>> load_pair(d, "double")(torch.ones(2))  # doctest: +SKIP
    tensor([2., 2.])
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..core import cache as _cache
from ..core.errors import PrecompileError, option_error
from ..core.load import load

try:  # POSIX; elsewhere saves of one NAME must not run concurrently (documented above)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["save_pair", "load_pair"]


def save_pair(directory: str | os.PathLike[str], name: str, python_code: str,
              cache: bytes) -> tuple[Path, Path]:
    """Write NAME.py and NAME.cache into `directory` (created if needed) so that a crash at
    any point leaves a loadable pair (protocol in the module docstring). Returns (py, cache)
    paths."""
    _check_name(name)
    for option, value, kind, want in (("python_code", python_code, str, "a str"), (
            "cache", cache, (bytes, bytearray, memoryview), "bytes")):
        if not isinstance(value, kind):
            raise option_error("save_pair", option, value, want, "pass the pair precompile "
                               "returned: save_pair(directory, name, *precompile(fn, ...))",
                               what=f"save_pair: {option} must be {want}, got "
                                    f"{type(value).__name__}", stage="load")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    py_path, cache_path = d / f"{name}.py", d / f"{name}.cache"
    with _locked(d, name):
        _recover(d, name)
        tmp_cache = _cache.write_temp(d, f".{name}.cache.", bytes(cache), fsync=True)
        try:
            tmp_py = _cache.write_temp(d, f".{name}.py.", python_code.encode("utf-8"),
                                fsync=True)
        except BaseException:
            os.unlink(tmp_cache)
            raise
        _fsync_dir(d)
        os.replace(tmp_cache, cache_path)  # the commit point
        os.replace(tmp_py, py_path)
        _fsync_dir(d)
    return py_path, cache_path


def load_pair(directory: str | os.PathLike[str], name: str) -> Callable[..., Any]:
    """precompile.load(NAME.py, NAME.cache) from `directory`, completing a save that was
    killed between its two renames. A pair that does not belong together is a PrecompileError
    (invariant 7)."""
    _check_name(name)
    d = Path(directory)
    py_path, cache_path = d / f"{name}.py", d / f"{name}.cache"
    if (missing := _nothing_saved(d, name)) is not None:
        raise missing
    try:
        code, cache = _read(py_path, cache_path)
        whole = _belongs(code, cache)
    except PrecompileError:  # a file is missing: maybe the first save of NAME was killed
        whole = False
    if not whole:
        # torn: a save is in flight (its lock makes us wait for it), or one was killed after
        # its commit point (complete it); under the lock nothing changes the files
        with _locked(d, name):
            _recover(d, name)
            code, cache = _read(py_path, cache_path)
    return load(code, cache)


def _nothing_saved(d: Path, name: str) -> PrecompileError | None:
    """Nothing of NAME in `d` to load or to recover (no file of it, no temporary file of a
    save in flight): named with the pairs that are there, before any lock file is made."""
    if d.is_dir() and ((d / f"{name}.py").exists() or (d / f"{name}.cache").exists()
                       or _temps(d, name, "py") or _temps(d, name, "cache")):
        return None
    there = sorted(p.stem for p in d.glob("*.py") if p.with_suffix(".cache").exists()
                   ) if d.is_dir() else []
    return PrecompileError(
        f"no saved pair {name!r} in {d}", invariant=7, stage="load", where=str(d / name),
        expected=f"{name}.py and {name}.cache, as save_pair wrote them",
        actual=("the directory does not exist" if not d.is_dir() else
                "pairs there: " + ", ".join(there[:20]) if there else "no pair there"),
        hint="pass the directory and name given to save_pair")


def _check_name(name: object) -> None:
    if (not isinstance(name, str) or not name or name.startswith(".")
            or any(c in name for c in "/\\\0")):
        raise option_error("save_pair/load_pair", "name", name,
                           "a plain file name (no path, not hidden)",
                           "give the directory as its own argument and a name such as 'step'",
                           what="save_pair/load_pair: name must be a plain file name (no "
                                f"path, not hidden), got {name!r}", stage="load")


def _read(py_path: Path, cache_path: Path) -> tuple[str, bytes]:
    # a save that commits between these two reads gives a torn pair: load_pair then waits
    # for the saver's lock and reads again
    try:
        cache = cache_path.read_bytes()
    except FileNotFoundError:
        raise PrecompileError(f"no saved cache {cache_path.name}", invariant=7, stage="load",
                              where=str(cache_path), expected="NAME.cache next to NAME.py",
                              actual="missing",
                              hint="save the pair with save_pair (or pass cache=None to "
                                   "precompile.load to compile the kernels)") from None
    try:
        code = py_path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError) as e:
        raise PrecompileError(f"no readable python_code {py_path.name}", invariant=7,
                              stage="load", where=str(py_path), expected="NAME.py (UTF-8)",
                              actual=f"{type(e).__name__}: {e}",
                              hint="save the pair with save_pair") from None
    return code, cache


def _belongs(code: str, cache: bytes) -> bool:
    """Whether `cache` names `code` (an empty or unreadable cache is left to load)."""
    if not cache:
        return True
    try:
        tag, _ = _cache.read_tag(cache)
    except PrecompileError:
        return True
    return tag.code_hash == _cache.code_hash(code)


def _temps(d: Path, name: str, kind: str) -> list[Path]:
    """Temporary files of saves of NAME (kind 'py' or 'cache'); mkstemp's random part has no
    dots, so NAME 'a' never matches the files of NAME 'a.py'."""
    pattern = re.compile(re.escape(f".{name}.{kind}.") + r"[A-Za-z0-9_]+\.tmp")
    return sorted(p for p in d.iterdir() if pattern.fullmatch(p.name))


def _recover(d: Path, name: str) -> None:
    """Under the lock: complete a save killed after its commit point, then remove the
    temporary files of killed saves (no live saver has any: it would hold the lock)."""
    py_path, cache_path = d / f"{name}.py", d / f"{name}.cache"
    pending = _temps(d, name, "py")
    if pending and cache_path.exists():
        try:
            want: str | None = _cache.read_tag(cache_path.read_bytes())[0].code_hash
        except PrecompileError:  # an unreadable cache names nothing; load reports it
            want = None
        have = (hashlib.sha256(py_path.read_bytes()).hexdigest() if py_path.exists()
                else None)
        if want is not None and want != have:
            for p in pending:
                if hashlib.sha256(p.read_bytes()).hexdigest() == want:
                    os.replace(p, py_path)  # roll forward: the committed python_code
                    _fsync_dir(d)
                    break
    for p in _temps(d, name, "py") + _temps(d, name, "cache"):
        p.unlink()


def _fsync_dir(d: Path) -> None:
    # makes the renames durable; directories cannot be opened for fsync on Windows
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(d: Path, name: str) -> Iterator[None]:
    """Hold NAME's lock: an flock on .NAME.lock in `d`, a file that lives only while it is
    held or waited for, so that a save leaves nothing but the pair behind.

    The holder unlinks the file before it lets go. A waiter may then win the lock on the
    unlinked file, which locks nothing any more (a newcomer creates a fresh file under the
    name and locks that): so a lock counts only when, once taken, the name still refers to
    the file we locked; otherwise try again. A lock file a killed holder left behind is
    simply taken over (the kernel released its flock) and removed by the next holder. The
    lock stays beside the pair rather than in a temp dir keyed by its path: the directory is
    the one place every saver and reader of the pair sees, whatever its TMPDIR or user."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = d / f".{name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # we locked a file its holder has since unlinked: take the new one
    try:
        yield
    finally:
        try:
            os.unlink(path)  # while still holding it: see above
        except FileNotFoundError:  # pragma: no cover - removed by hand meanwhile
            pass
        finally:
            os.close(fd)  # closing releases the lock
