"""benchmarks/site_bytecode.py: the installed packages a benchmark imports get their bytecode,
lazily imported submodules too, as pip writes it at install."""
from __future__ import annotations

import sys
import types

from benchmarks import site_bytecode
from tests.test_bench_first_calls import _run_module  # run.py as a module


def test_the_packages_a_benchmark_imported_from_site_packages_are_compiled_whole(
        tmp_path, monkeypatch):
    site, elsewhere = tmp_path / "site", tmp_path / "work"
    (site / "pkg" / "inner").mkdir(parents=True)
    elsewhere.mkdir()
    for f in ("pkg/__init__.py", "pkg/sub.py", "pkg/inner/__init__.py", "single.py"):
        (site / f).write_text("X = 1\n")
    (elsewhere / "mine.py").write_text("Y = 2\n")
    monkeypatch.setattr(site_bytecode.sysconfig, "get_paths",
                        lambda: {"purelib": str(site), "platlib": str(site)})
    mods = {"pkg": types.SimpleNamespace(__file__=str(site / "pkg/__init__.py")),
            "pkg.inner": types.SimpleNamespace(__file__=str(site / "pkg/inner/__init__.py")),
            "single": types.SimpleNamespace(__file__=str(site / "single.py")),
            "mine": types.SimpleNamespace(__file__=str(elsewhere / "mine.py")),
            "builtin": types.SimpleNamespace()}
    paths = site_bytecode.site_packages_of(mods)
    assert paths == [str(site / "pkg"), str(site / "single.py")]

    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert site_bytecode.compile_packages(paths) == 4
    tag = sys.implementation.cache_tag
    for pyc in ("pkg/__pycache__/sub", "pkg/inner/__pycache__/__init__", "__pycache__/single"):
        assert (site / f"{pyc}.{tag}.pyc").exists(), pyc  # sub.py was never imported
    assert not (elsewhere / "__pycache__").exists()


def test_run_py_compiles_torchs_bytecode_only_where_it_is_missing_and_says_which(monkeypatch):
    run = _run_module()
    for have, after, expected in ((True, True, "installed"),
                                  (False, True, "compiled by run.py (site_bytecode.py)"),
                                  (False, False, "none: compiled from source in every process")):
        calls = []
        state = {"present": have}

        def fake(cmd, **kw):
            calls.append(cmd[1] if cmd[1] != "-m" else cmd[2])
            if cmd[1].endswith("site_bytecode.py"):
                state["present"] = after
            return types.SimpleNamespace(returncode=0, stdout=f"{state['present']}\n")

        monkeypatch.setattr(run.subprocess, "run", fake)
        assert run.ensure_bytecode("python") == expected
        compiled = [c for c in calls if c.endswith("site_bytecode.py")]
        assert calls[0] == "compileall" and len(compiled) == (0 if have else 1), calls
