"""Reproducible artifacts: the same function, inputs and torch build on the same machine give
a byte-identical python_code, in one process and in a fresh one (no temporary paths of the
build, no process-wide counters, no timestamps). The CUDA path comments cannot be produced
on a CPU machine: their normalisation is tested on a snippet in Inductor's CUDA layout."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from precompile_nb import precompile
from precompile_nb.core import _compat
from tests.core.models import bare_step

ROOT = Path(__file__).resolve().parents[2]


def linear_relu(m, x):
    return torch.relu(m(x))


# name -> (fn, backend)
CASES = {
    "inductor": (linear_relu, "inductor"),
    "inductor_training_step": (bare_step, "inductor"),
    "eager": (linear_relu, "eager"),
    "eager_training_step": (bare_step, "eager"),
}


def example_inputs() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Linear(8, 4), torch.randn(3, 8)


def python_code(case: str) -> str:
    fn, backend = CASES[case]
    code, _ = precompile(fn, *example_inputs(), backend=backend)
    return code


def child_main(out: str) -> None:
    """In a fresh process (see test_fresh_process_gives_the_same_python_code): precompile
    every case, after another graph and in reverse order so that process-wide counters
    differ from the test process's, and write {case: python_code} as JSON to `out`."""
    precompile(lambda x: (x * 3).sin(), torch.randn(5))
    codes = {case: python_code(case) for case in reversed(list(CASES))}
    Path(out).write_text(json.dumps(codes), encoding="utf-8")


@pytest.fixture(scope="module")
def first_codes() -> dict[str, str]:
    return {case: python_code(case) for case in CASES}


@pytest.mark.parametrize("case", list(CASES))
def test_precompiling_twice_in_one_process_gives_the_same_python_code(first_codes, case):
    # the second compile of a case comes after every case's first: Inductor's own counters
    # (AOTAutograd's graph id) have moved on
    assert python_code(case) == first_codes[case]


def test_fresh_process_gives_the_same_python_code(first_codes, tmp_path):
    # another temp dir (the private compile dirs live there) and another hash seed
    child_tmp = tmp_path / "child_tmp"
    child_tmp.mkdir()
    out = tmp_path / "codes.json"
    env = dict(os.environ, TMPDIR=str(child_tmp), PYTHONHASHSEED="12345")
    r = subprocess.run(
        [sys.executable, "-c", "import sys; from tests.core.test_reproducible import "
                               "child_main; child_main(sys.argv[1])", str(out)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    codes = json.loads(out.read_text(encoding="utf-8"))
    assert set(codes) == set(CASES)
    for case in CASES:
        assert codes[case] == first_codes[case], case
        assert str(child_tmp) not in codes[case]


def test_inductor_python_code_names_no_compile_dir_or_graph_counter(first_codes):
    code = first_codes["inductor"]
    assert not re.search(r"AOT ID: \['\d", code)
    # already normalised: normalising again changes nothing
    assert _compat.reproducible_inductor_source(code) == code


# Inductor's wrapper module for CUDA (2.11-2.14 layout): the kernel path comments name the
# private compile dir of the machine that built it; one line inside the kernel's source
# string looks like one, but is part of the compiled kernel and must stay.
CUDA_SOURCE = '''\
# AOT ID: ['7_inference']
from ctypes import c_void_p, c_long, c_int
import torch
from torch._inductor.async_compile import AsyncCompile
async_compile = AsyncCompile()


# kernel path: /tmp/tmpab12cd/ab/cabcdef.py
# Topologically Sorted Source Nodes: [relu], Original ATen: [aten.relu]
# Source node to ATen node mapping:
#   relu => relu
triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', \'\'\'
import triton
import triton.language as tl
# kernel path: /tmp/tmpab12cd/ab/cabcdef.py
@triton.jit
def triton_poi_fused_relu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
\'\'\', device_str='cuda')


# kernel path: /tmp/precompile_nb_x9/tmpzz99yy/q7/cq7abc.py
# Original path: /tmp/ipykernel_4242/2893473.py:12
triton_per_fused_sum_1 = async_compile.triton('triton_per_fused_sum_1', \'\'\'
@triton.jit
def triton_per_fused_sum_1(in_ptr0, out_ptr0, xnumel, r0_numel):
    pass
\'\'\', device_str='cuda')

async_compile.wait(globals())
del async_compile

def call(args):
    # kernel path: C:\\\\Users\\\\me\\\\AppData\\\\Local\\\\Temp\\\\tmpq\\\\zz\\\\czz1.py
    buf0 = args[0]  # kernel path: /tmp/tmpab12cd/ab/cabcdef.py
    return (buf0, )
'''


def test_cuda_kernel_path_comments_are_normalised_and_nothing_executed_changes():
    out = _compat.reproducible_inductor_source(CUDA_SOURCE)
    lines, new = CUDA_SOURCE.splitlines(), out.splitlines()
    assert len(new) == len(lines)
    changed = {old: n for old, n in zip(lines, new) if old != n}
    assert changed == {
        "# AOT ID: ['7_inference']": "# AOT ID: ['inference']",
        "# kernel path: /tmp/tmpab12cd/ab/cabcdef.py": "# kernel path: <cache>/cabcdef.py",
        "# kernel path: /tmp/precompile_nb_x9/tmpzz99yy/q7/cq7abc.py":
            "# kernel path: <cache>/cq7abc.py",
        "# Original path: /tmp/ipykernel_4242/2893473.py:12":
            "# Original path: <source>/2893473.py:12",
        "    # kernel path: C:\\\\Users\\\\me\\\\AppData\\\\Local\\\\Temp\\\\tmpq\\\\zz\\\\czz1.py":
            "    # kernel path: <cache>/czz1.py",
        "    buf0 = args[0]  # kernel path: /tmp/tmpab12cd/ab/cabcdef.py":
            "    buf0 = args[0]  # kernel path: <cache>/cabcdef.py",
    }
    # the line inside the first kernel's source string is code: kept as it is
    assert "\n# kernel path: /tmp/tmpab12cd/ab/cabcdef.py\n@triton.jit" in out
    # nothing that runs changed: same syntax tree (comments are not in it), same strings
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(CUDA_SOURCE))
    assert _compat.reproducible_inductor_source(out) == out
    # two builds in different compile dirs now agree
    other = (CUDA_SOURCE.replace("/tmp/precompile_nb_x9/tmpzz99yy/", "/var/tmp/tmpXY/")
             .replace("7_inference", "0_inference"))
    assert _compat.reproducible_inductor_source(other) == out


def test_strip_inductor_main_normalises_too():
    source = CUDA_SOURCE + ("\n\ndef get_args():\n    return []\n\n"
                            "if __name__ == '__main__':\n    pass\n")
    out = _compat.strip_inductor_main(source)
    assert "get_args" not in out and "__main__" not in out
    assert out == _compat.reproducible_inductor_source(CUDA_SOURCE)


def test_source_tokenize_cannot_read_is_kept_as_it_is():
    broken = "# kernel path: /tmp/tmpab12cd/ab/cabcdef.py\nx = '''unterminated\n"
    assert _compat.reproducible_inductor_source(broken) == broken


@pytest.mark.parametrize("comment", [
    "# Topologically Sorted Source Nodes: [t, addmm], Original ATen: [aten.t, aten.addmm]",
    "#   relu => relu",
    "# reuse",
    "# kernel path:",
])
def test_other_comments_are_kept(comment):
    assert _compat.reproducible_comment(comment) == comment
