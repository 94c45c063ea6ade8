"""Crash-safe saves: precompile_nb.tools.store.save_pair / load_pair (protocol in store.py).

A save killed at any moment (SIGKILL: no cleanup runs) leaves a whole pair that load_pair
loads: the previous one, or the new one once its cache was committed. A pair that does not
belong together is a PrecompileError. Kills use os.fork (POSIX): the child is a copy of this
process that is already past its imports, so it is saving within microseconds.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time

import pytest
import torch

from precompile_nb import PrecompileError
from precompile_nb.core import cache as cache_mod
from precompile_nb.tools.store import load_pair, save_pair

from .conftest import Pair, example_inputs, forge, gather_double_relu, gather_triple_relu

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")

NAME = "model"
KILL_ROUNDS = 20


def padded(pair: Pair, tag: str) -> Pair:
    """`pair` made big (~5 MB of python_code, a 3 MB incompressible file in the cache), so a
    save takes long enough to be killed in the middle of each of its steps."""
    code = pair.python_code + f"\n# padding {tag}\n" + ("#" + tag * 99 + "\n") * 50_000
    cache = forge(code, pair.backend, [("inductor", f"pcnb-test/pad_{tag}.bin",
                                        os.urandom(3 << 20))])
    return Pair(pair.name + "_big", code, cache, pair.backend)


@pytest.fixture(scope="module")
def big(eager_pair, other_eager_pair):
    """{"double": big pair computing (x[idx]*2).relu(), "triple": ... *3}"""
    return {"double": padded(eager_pair, "a"), "triple": padded(other_eager_pair, "b")}


REFS = {"double": gather_double_relu, "triple": gather_triple_relu}


def loaded_kind(directory) -> str:
    """Which pair load_pair gives: 'double' or 'triple' (anything else fails the test)."""
    x, idx = example_inputs()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = load_pair(directory, NAME)(x, idx)
    for kind, ref in REFS.items():
        if torch.equal(out, ref(x, idx)):
            return kind
    raise AssertionError("load_pair returned a callable that computes neither pair")


def on_disk(directory) -> str:
    """'whole' when NAME.py and NAME.cache belong together, else 'torn'."""
    code = (directory / f"{NAME}.py").read_text(encoding="utf-8")
    tag, _ = cache_mod.read_tag((directory / f"{NAME}.cache").read_bytes())
    return "whole" if tag.code_hash == cache_mod.code_hash(code) else "torn"


def temps(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def fork_save(directory, pair: Pair, crash_before_event: int | None = None) -> int:
    """Start save_pair in a forked child; with crash_before_event=k the child SIGKILLs itself
    just before its k-th durable step (an os.fsync or os.replace call)."""
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: never returns into pytest
        if crash_before_event is not None:
            count = [0]

            def crashing(real):
                def step(*args, **kwargs):
                    count[0] += 1
                    if count[0] == crash_before_event:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return real(*args, **kwargs)
                return step

            os.fsync, os.replace = crashing(os.fsync), crashing(os.replace)
        save_pair(directory, NAME, pair.python_code, pair.cache)
        os._exit(0)
    except BaseException:
        os._exit(3)


def wait(pid: int) -> int:
    """The child's exit status: 0 finished, -9 killed."""
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def test_saved_pair_loads_back(eager_pair, tmp_path):
    py, cache = save_pair(tmp_path / "new" / "dir", NAME, eager_pair.python_code,
                          eager_pair.cache)
    assert py.read_text(encoding="utf-8") == eager_pair.python_code
    assert cache.read_bytes() == eager_pair.cache
    assert loaded_kind(tmp_path / "new" / "dir") == "double"
    assert temps(tmp_path / "new" / "dir") == []


# events of a save into a clean directory: fsync(cache tmp), fsync(py tmp), fsync(dir),
# replace(cache) = the commit point, replace(py), fsync(dir)
@pytest.mark.parametrize("event", [1, 2, 3, 4, 5, 6])
def test_save_killed_before_each_durable_step_leaves_a_whole_pair(big, tmp_path, event):
    save_pair(tmp_path, NAME, big["double"].python_code, big["double"].cache)
    status = wait(fork_save(tmp_path, big["triple"], crash_before_event=event))
    assert status == -signal.SIGKILL
    expected = "double" if event <= 4 else "triple"  # committed once the cache is replaced
    assert on_disk(tmp_path) == ("torn" if event == 5 else "whole")
    assert loaded_kind(tmp_path) == expected
    assert on_disk(tmp_path) == "whole"  # load_pair completed a committed save
    # the next save cleans up what the killed one left
    save_pair(tmp_path, NAME, big["double"].python_code, big["double"].cache)
    assert temps(tmp_path) == [] and loaded_kind(tmp_path) == "double"


def test_process_killed_at_random_points_of_a_save_leaves_a_whole_loadable_pair(big, tmp_path):
    save_pair(tmp_path, NAME, big["double"].python_code, big["double"].cache)
    t0 = time.perf_counter()  # how long a forked save takes here: the window to kill in
    assert wait(fork_save(tmp_path / "timing", big["triple"])) == 0
    save_seconds = time.perf_counter() - t0
    shutil.rmtree(tmp_path / "timing")
    rng = random.Random(1234)
    current = "double"
    seen = {"killed": 0, "killed after commit": 0, "finished": 0, "left temps": 0, "torn": 0}
    for _ in range(KILL_ROUNDS):
        new = "triple" if current == "double" else "double"
        pid = fork_save(tmp_path, big[new])
        time.sleep(rng.uniform(0, 1.2 * save_seconds))
        os.kill(pid, signal.SIGKILL)
        status = wait(pid)
        seen["finished" if status == 0 else "killed"] += 1
        seen["left temps"] += bool(temps(tmp_path))
        seen["torn"] += on_disk(tmp_path) == "torn"
        # never a half-written file under the real names
        assert (tmp_path / f"{NAME}.py").read_text(encoding="utf-8") in (
            big["double"].python_code, big["triple"].python_code)
        assert (tmp_path / f"{NAME}.cache").read_bytes() in (big["double"].cache,
                                                             big["triple"].cache)
        got = loaded_kind(tmp_path)
        assert got in (current, new)
        if status == 0:
            assert got == new
        else:
            seen["killed after commit"] += got == new
        current = got
    print(f"\nforked save of an 8 MB pair: {save_seconds * 1000:.0f} ms; {KILL_ROUNDS} rounds: "
          f"{seen}")
    assert seen["killed"] > 0


def test_mismatched_pair_on_disk_is_a_precompile_error(eager_pair, other_eager_pair, tmp_path):
    save_pair(tmp_path, NAME, eager_pair.python_code, eager_pair.cache)
    (tmp_path / f"{NAME}.cache").write_bytes(other_eager_pair.cache)  # copied by hand
    with pytest.raises(PrecompileError, match="another python_code") as ei:
        load_pair(tmp_path, NAME)
    assert ei.value.invariant == 7
    # a stray temporary file that belongs to neither does not "repair" it
    (tmp_path / f".{NAME}.py.zzzz1234.tmp").write_text("junk")
    with pytest.raises(PrecompileError, match="another python_code"):
        load_pair(tmp_path, NAME)


@pytest.mark.parametrize("missing", ["py", "cache"])
def test_half_a_pair_on_disk_is_a_precompile_error(eager_pair, tmp_path, missing):
    save_pair(tmp_path, NAME, eager_pair.python_code, eager_pair.cache)
    (tmp_path / f"{NAME}.{missing}").unlink()
    with pytest.raises(PrecompileError, match="no "):
        load_pair(tmp_path, NAME)


def test_a_name_or_directory_with_nothing_saved_is_named_with_the_pairs_there(eager_pair,
                                                                             tmp_path):
    save_pair(tmp_path, NAME, eager_pair.python_code, eager_pair.cache)
    with pytest.raises(PrecompileError) as ei:
        load_pair(tmp_path, "other")
    assert "no saved pair 'other'" in ei.value.what and NAME in ei.value.actual
    with pytest.raises(PrecompileError) as ei:
        load_pair(tmp_path / "absent", NAME)
    assert ei.value.actual == "the directory does not exist"
    # a failed load leaves nothing behind: no directory made, no lock file of the name
    assert not (tmp_path / "absent").exists()
    assert not any(f.startswith(".other") for f in os.listdir(tmp_path))


def test_concurrent_saves_and_loads_of_one_name_never_see_a_torn_pair(eager_pair,
                                                                     other_eager_pair,
                                                                     tmp_path):
    pairs = {"double": eager_pair, "triple": other_eager_pair}
    save_pair(tmp_path, NAME, eager_pair.python_code, eager_pair.cache)
    errors: list[BaseException] = []
    loaded: list[str] = []
    stop = threading.Event()

    def saver(kind: str) -> None:
        try:
            for _ in range(25):
                save_pair(tmp_path, NAME, pairs[kind].python_code, pairs[kind].cache)
        except BaseException as e:
            errors.append(e)

    def reader() -> None:
        try:
            while not stop.is_set():
                loaded.append(loaded_kind(tmp_path))
        except BaseException as e:
            errors.append(e)

    savers = [threading.Thread(target=saver, args=(k,)) for k in pairs]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in savers + readers:
        t.start()
    for t in savers:
        t.join(timeout=120)
    stop.set()
    for t in readers:
        t.join(timeout=120)
    assert not errors, errors
    assert loaded and set(loaded) <= set(pairs)
    assert on_disk(tmp_path) == "whole" and temps(tmp_path) == []


@pytest.mark.parametrize("name", ["", "a/b", "../x", ".hidden", "a\\b"])
def test_pair_name_must_be_a_plain_file_name(eager_pair, tmp_path, name):
    with pytest.raises(PrecompileError, match="plain file name") as ei:
        save_pair(tmp_path, name, eager_pair.python_code, eager_pair.cache)
    assert isinstance(ei.value, ValueError) and "name" in ei.value.where
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_pair_saved_the_wrong_way_round_is_named(eager_pair, tmp_path):
    with pytest.raises(PrecompileError, match="python_code must be a str, got bytes") as ei:
        save_pair(tmp_path, "p", eager_pair.cache, eager_pair.python_code)
    assert "save_pair(directory, name, *precompile(" in ei.value.hint
    with pytest.raises(PrecompileError, match="cache must be bytes, got str"):
        save_pair(tmp_path, "p", eager_pair.python_code, eager_pair.python_code)
    assert list(tmp_path.iterdir()) == []


def test_first_save_killed_after_its_commit_point_still_loads(big, tmp_path):
    status = wait(fork_save(tmp_path, big["triple"], crash_before_event=5))
    assert status == -signal.SIGKILL
    assert not (tmp_path / f"{NAME}.py").exists()  # only the cache made it under its name
    assert loaded_kind(tmp_path) == "triple"
    assert on_disk(tmp_path) == "whole" and temps(tmp_path) == []
