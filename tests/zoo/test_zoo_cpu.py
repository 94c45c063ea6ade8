"""A CI subset of the model zoo (benchmarks/zoo): tiny models from transformers, timm and
torchvision, built from config with random init, precompiled with both backends on CPU; each
artifact's result (outputs, or loss + every .grad for a training step) must equal eager's.

The full zoo, with timings, is `python benchmarks/zoo/run.py` (see benchmarks/zoo/README.md).
Skipped with a reason where transformers / timm / torchvision are not installed.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# (model, workload, package it needs): a spread of families that pass on CPU with both
# backends today; ~4-5 minutes on 2 cores in all
CASES = [
    ("gpt2", "train", "transformers"),
    ("llama", "infer", "transformers"),
    ("bert", "train", "transformers"),
    ("hf_vit", "infer", "transformers"),
    ("timm_convnext", "train", "timm"),
    ("tv_resnet18", "infer", "torchvision"),
]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("model,workload,package", CASES,
                         ids=[f"{m}-{w}" for m, w, _ in CASES])
def test_zoo_case_matches_eager(model, workload, package, backend):
    pytest.importorskip("torchvision" if package == "timm" else package)
    pytest.importorskip(package)  # e.g. timm, transformers
    import torch

    from benchmarks.zoo import models as Z
    from benchmarks.zoo.run import TOL, _grad_ctx, _Runner, rel_err
    from precompile_nb import precompile

    torch.set_num_threads(1)
    spec = Z.build(model, "tiny", "cpu")
    m, args, fn = spec.model, spec.args[workload], spec.fns[workload]
    m.train() if workload == "train" else m.eval()
    r = _Runner(m, args, workload, "cpu")
    _, ref = r.call(fn)
    r.reset()
    with _grad_ctx(workload), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, cache = precompile(fn, m, *args, backend=backend)
        f = precompile.load(code, cache)
    _, got = r.call(f)
    err, where = rel_err(got, ref)
    assert err <= TOL[workload], f"{model} {workload} ({backend}): rel err {err:.2e} at {where}"
