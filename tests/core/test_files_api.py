"""torch 2.15's shape of the API, beside the seed's: `precompile.capture(fn, artifact_path=,
cache_path=)` as a one-call context manager, and `precompile.load` of two file paths into a
runnable that can be entered and unloaded (tools/files.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from precompile_nb import PrecompileError, precompile

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
ROOT = Path(__file__).resolve().parents[2]


def predict(m, x):
    return m(x).relu()


def _example():
    torch.manual_seed(0)
    return nn.Linear(8, 4), torch.randn(3, 8)


@pytest.fixture(scope="module")
def inductor_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    m, x = _example()
    with precompile.capture(predict, artifact_path=d / "predict.py",
                            cache_path=d / "predict.cache") as cap:
        y = cap(m, x)
    return d, y


def test_the_one_call_returns_eager_s_result_and_the_clean_exit_writes_the_pair(inductor_files):
    d, y = inductor_files
    m, x = _example()
    torch.testing.assert_close(y, predict(m, x))
    assert (d / "predict.py").read_text().startswith("#")
    assert (d / "predict.cache").stat().st_size > 0


def test_a_capture_takes_exactly_one_call(tmp_path):
    m, x = _example()
    with precompile.capture(predict, artifact_path=tmp_path / "a.py",
                            cache_path=tmp_path / "a.cache", backend="eager") as cap:
        cap(m, x)
        with pytest.raises(PrecompileError, match="exactly one call"):
            cap(m, x)
    with pytest.raises(PrecompileError, match="already used"):
        with cap:
            pass


def _a_first_pair(art, cache):
    """A pair captured to `art` and `cache` (eager backend), and what the files hold."""
    m, x = _example()
    with precompile.capture(predict, artifact_path=art, cache_path=cache,
                            backend="eager") as cap:
        cap(m, x)
    return art, cache, (art.read_text(), cache.read_bytes())


def test_a_block_that_raises_writes_nothing_and_keeps_the_previous_pair(tmp_path):
    m, x = _example()
    art, cache, before = _a_first_pair(tmp_path / "a.py", tmp_path / "other" / "a.bin")
    with pytest.raises(KeyError):
        with precompile.capture(lambda m, x: m(x) * 2, artifact_path=art, cache_path=cache,
                                backend="eager") as cap:
            cap(m, x)
            raise KeyError("the user's own failure")
    assert (art.read_text(), cache.read_bytes()) == before


def test_a_block_that_made_no_call_is_an_error_not_an_empty_pair(tmp_path):
    with pytest.raises(PrecompileError, match="made no call"):
        with precompile.capture(predict, artifact_path=tmp_path / "a.py",
                                cache_path=tmp_path / "a.cache"):
            pass
    assert not (tmp_path / "a.py").exists()


def test_loaded_files_run_as_fn_and_unload_lets_them_go(inductor_files):
    d, _ = inductor_files
    m, x = _example()
    with precompile.load(d / "predict.py", d / "predict.cache") as f:
        torch.testing.assert_close(f(m, x), predict(m, x))
        assert f.__precompile_load__["path"] == "warm"
    with pytest.raises(PrecompileError, match="unloaded"):
        f(m, x)
    g = precompile.load(str(d / "predict.py"), str(d / "predict.cache"))
    g.unload()
    with pytest.raises(PrecompileError, match="unloaded"):
        g(m, x)


def test_the_wrong_mix_of_text_and_paths_says_which_shape_to_use(inductor_files):
    d, _ = inductor_files
    code = (d / "predict.py").read_text()
    with pytest.raises(PrecompileError, match="one shape's artifact and the other's cache"):
        precompile.load(code, d / "predict.cache")
    with pytest.raises(PrecompileError, match="one shape's artifact and the other's cache"):
        precompile.load(d / "predict.py", (d / "predict.cache").read_bytes())
    with pytest.raises(PrecompileError, match="no artifact file") as e:
        precompile.load(d / "missing.py", d / "predict.cache")
    assert "pass the string itself" in e.value.hint
    m, x = _example()  # the seed's shape is unchanged
    torch.testing.assert_close(precompile.load(code, (d / "predict.cache").read_bytes())(m, x),
                               predict(m, x))


CHILD = """
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
from precompile_nb import precompile
d = sys.argv[1]
with precompile.load(d + "/predict.py", d + "/predict.cache") as f:
    ref = torch.load(d + "/ref.pt", weights_only=False)
    out = f(ref["m"], ref["x"])
    print(json.dumps({"path": f.__precompile_load__["path"],
                      "match": bool(torch.allclose(out, ref["y"])),
                      "inductor": "torch._inductor.codecache" in sys.modules}))
"""


def test_the_pair_reloads_in_a_fresh_process_on_the_warm_path(inductor_files):
    d, _ = inductor_files
    m, x = _example()
    torch.save({"m": m, "x": x, "y": predict(m, x)}, d / "ref.pt")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(),
           "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", CHILD, str(d)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"path": "warm", "match": True, "inductor": False}


def test_a_failed_write_keeps_the_previous_pair_whole(tmp_path, monkeypatch):
    from precompile_nb.tools import files

    m, x = _example()
    art, cache, before = _a_first_pair(tmp_path / "a.py", tmp_path / "c" / "a.bin")
    real_replace = os.replace

    def fail_on_the_code(src, dst):
        if str(dst) == str(art):
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", fail_on_the_code)
    with pytest.raises(OSError, match="disk full"):
        with precompile.capture(lambda m, x: m(x) * 3, artifact_path=art, cache_path=cache,
                                backend="eager") as cap:
            cap(m, x)
    assert (art.read_text(), cache.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.bin", "a.py", "c"]  # no temp left
    f = precompile.load(art, cache)
    torch.testing.assert_close(f(m, x), predict(m, x))
