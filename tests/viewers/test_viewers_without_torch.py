"""The viewers render plain data: they must import and run where torch cannot be imported."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import precompile_nb

PACKAGE_DIR = pathlib.Path(precompile_nb.__file__).parent
DATA_DIR = pathlib.Path(__file__).parent / "data"

# where torch cannot be imported, with the viewers package loaded on its own (the package's
# __init__ imports the core, which needs torch)
NO_TORCH = """
import importlib.abc, json, pathlib, sys, types

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("the viewers imported " + name)

sys.meta_path.insert(0, NoTorch())
pkg = types.ModuleType("precompile_nb")
pkg.__path__ = [{package!r}]
sys.modules["precompile_nb"] = pkg
"""

REPORT = """
from precompile_nb.viewers import render_report_page, render_violation_html, report_widget
for name in ("eager", "inductor"):
    data = json.loads(pathlib.Path({data!r}, f"report_{{name}}.json").read_text())
    assert "Invariants" in render_report_page(data)
    assert report_widget(data).titles[-1] == "Invariants"
assert '<td class="pcnb-mismatch">[2]</td><td class="pcnb-mismatch">[3]</td>' in \\
    render_violation_html({{"what": "w", "invariant": 3, "where": "x",
        "expected": {{"shape": [2], "dtype": "float32"}},
        "actual": {{"shape": [3], "dtype": "float32"}}, "hint": "h", "extra": {{}},
        "message": "m"}})
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""

DIFF_AND_PROFILE = """
from precompile_nb.viewers.diff import render_diff_html
from precompile_nb.viewers.profile import render_profile_html
assert "pcnb-d-add" in render_diff_html(json.loads(sys.argv[1]))
assert "(unattributed)" in render_profile_html(json.loads(sys.argv[2]))
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def run_without_torch(body: str, *argv: str) -> subprocess.CompletedProcess:
    script = (NO_TORCH + body).format(package=str(PACKAGE_DIR), data=str(DATA_DIR))
    return subprocess.run([sys.executable, "-c", script, *argv], capture_output=True,
                          text=True, timeout=120)


def test_viewers_import_and_render_without_torch():
    proc = run_without_torch(REPORT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_diff_and_profile_views_render_without_torch():
    from test_diff_profile import diff_data, profile_data
    proc = run_without_torch(DIFF_AND_PROFILE, json.dumps(diff_data()),
                             json.dumps(profile_data()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
