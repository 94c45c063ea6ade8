"""The viewers render plain data: they must import and run where torch cannot be imported."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import precompile_nb

PACKAGE_DIR = pathlib.Path(precompile_nb.__file__).parent
DATA_DIR = pathlib.Path(__file__).parent / "data"

SCRIPT = """
import importlib.abc, json, pathlib, sys, types

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("the viewers imported " + name)

sys.meta_path.insert(0, NoTorch())
# the package's __init__ imports the core (torch): load the viewers package on its own
pkg = types.ModuleType("precompile_nb")
pkg.__path__ = [{package!r}]
sys.modules["precompile_nb"] = pkg

from precompile_nb.viewers import render_report_page, render_violation_html, report_widget
for name in ("eager", "inductor"):
    data = json.loads(pathlib.Path({data!r}, f"report_{{name}}.json").read_text())
    assert "Invariants" in render_report_page(data)
    assert report_widget(data).titles[-1] == "Invariants"
assert '<td class="pcnb-mismatch">[2]</td><td class="pcnb-mismatch">[3]</td>' in \
    render_violation_html({{"what": "w", "invariant": 3, "where": "x",
        "expected": {{"shape": [2], "dtype": "float32"}},
        "actual": {{"shape": [3], "dtype": "float32"}}, "hint": "h", "extra": {{}},
        "message": "m"}})
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_viewers_import_and_render_without_torch():
    script = SCRIPT.format(package=str(PACKAGE_DIR), data=str(DATA_DIR))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
