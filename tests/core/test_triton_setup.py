"""Note [Triton's set-up while the capture runs]: a CUDA precompile starts Triton's
per-process set-up (its CUDA driver, the hash of its sources) on a thread of its own with the
capture; the artifact computes what eager does, and the switch leaves the set-up to the
lowering. Each case runs in a fresh process: the set-up happens once per process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# these tests watch or change what happens inside a lowering
pytestmark = pytest.mark.usefixtures("lowering_afresh")

_CHILD = r"""
import json, torch
from precompile_nb import precompile
from precompile_nb.core._compat import compile_pool

def fn(x, w):
    return torch.relu(x @ w).sum(dim=1)

x, w = torch.randn(32, 64, device="cuda"), torch.randn(64, 16, device="cuda")
code, cache = precompile(fn, x, w)
threads = [t.name for t in compile_pool._SETUP]
for t in compile_pool._SETUP:
    t.join(60)
x2 = torch.randn(32, 64, device="cuda")
same = torch.allclose(precompile.load(code, cache)(x2, w), fn(x2, w), atol=1e-4, rtol=1e-4)
print(json.dumps({"threads": threads, "same": bool(same)}))
"""


def _run(env_extra: dict[str, str]) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, **env_extra)
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.cuda
def test_a_cuda_precompile_sets_triton_up_on_its_own_thread_and_computes_what_eager_does():
    got = _run({})
    assert got == {"threads": ["precompile_nb-triton-setup"], "same": True}


@pytest.mark.cuda
def test_the_switch_leaves_tritons_set_up_to_the_lowering():
    got = _run({"PRECOMPILE_NB_TRITON_SETUP": "0"})
    assert got == {"threads": [], "same": True}
