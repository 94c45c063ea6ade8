"""A result whose type a library registers with torch's pytree when it is imported (a Hugging
Face ModelOutput: `transformers` registers each one) loads in a fresh process that has not
imported that library yet: the load imports the type's module, as it does a namedtuple's (Note
[tree literal] in runtime/driver.py). A type whose module cannot be imported is a
PrecompileError that names the module to import, not a "malformed artifact"."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from precompile_nb import precompile

MODULE = textwrap.dedent('''
    import torch.utils._pytree as pytree

    class Out:
        def __init__(self, logits, hidden):
            self.logits, self.hidden = logits, hidden

    pytree.register_pytree_node(Out, lambda o: ([o.logits, o.hidden], None),
                                lambda v, _: Out(*v), serialized_type_name="pc_outs.Out")
''')

CHILD = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import torch
    from precompile_nb import PrecompileError, precompile
    code, cache = open(sys.argv[1]).read(), open(sys.argv[2], "rb").read()
    before = "pc_outs" in sys.modules
    try:
        f = precompile.load(code, cache)
    except PrecompileError as e:
        print(json.dumps({"error": str(e), "invariant": e.invariant, "hint": e.hint}))
        raise SystemExit(0)
    x = torch.arange(6.0).reshape(2, 3)
    out = f(x)
    print(json.dumps({"imported_before": before, "type": type(out).__module__ + "." +
                      type(out).__name__, "logits": out.logits.tolist()}))
''')


@pytest.fixture
def pair(tmp_path, monkeypatch):
    (tmp_path / "pc_outs.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import pc_outs

    def fn(x):
        return pc_outs.Out(x.sin() * 2, x.cos())

    code, cache = precompile(fn, torch.randn(2, 3), backend="eager")
    (tmp_path / "art.py").write_text(code)
    (tmp_path / "art.cache").write_bytes(cache)
    sys.modules.pop("pc_outs", None)
    return tmp_path


def _fresh_load(tmp_path: Path, module_dir: Path | None) -> dict:
    root = str(Path(__file__).parents[2])
    path = [root] + ([str(module_dir)] if module_dir else [])
    child = tmp_path / "child" / "child.py"  # not beside pc_outs.py (a script's own folder
    child.parent.mkdir(exist_ok=True)       # is on its sys.path)
    child.write_text(CHILD)
    done = subprocess.run([sys.executable, str(child), str(tmp_path / "art.py"),
                           str(tmp_path / "art.cache")], capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": ":".join(path), "PATH": "/usr/bin"},
                          cwd=str(tmp_path.parent))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_registered_result_type_loads_before_its_library_is_imported(pair):
    got = _fresh_load(pair, pair)
    assert got["imported_before"] is False
    assert got["type"] == "pc_outs.Out"
    assert got["logits"] == (torch.arange(6.0).reshape(2, 3).sin() * 2).tolist()


def test_a_result_type_whose_module_is_not_there_names_the_module_to_import(pair):
    got = _fresh_load(pair, None)
    assert "pc_outs.Out" in got["error"] and "malformed" not in got["error"]
    assert got["invariant"] == 7
    assert got["hint"].startswith("import pc_outs ")


def test_a_tree_spec_this_torch_cannot_read_says_to_precompile_again():
    """No container type to import (the spec itself is not torch's form here, e.g. an edited
    artifact or another torch's format): the error says so, not 'import ?'."""
    from precompile_nb import PrecompileError
    from precompile_nb.runtime import driver
    for dumps in ("not json", json.dumps([1, {"type": None, "children_spec": []}])):
        with pytest.raises(PrecompileError) as err:
            driver._pc_treespec_loads(dumps, PrecompileError)
        assert err.value.invariant == 7 and "precompile again" in err.value.hint
