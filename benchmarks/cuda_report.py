"""Record the report data of a small CUDA artifact (inference and a training step) so the
viewers can be checked against real Triton output. Writes JSON files into the given folder.

usage: python benchmarks/cuda_report.py OUTDIR
"""
from __future__ import annotations

import json
import sys
import warnings

import torch
from torch import nn

from precompile_nb.core import build
from precompile_nb.core.load import load
from precompile_nb.tools.report import report_data


def main(out: str) -> None:
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.LayerNorm(128), nn.GELU(),
                          nn.Linear(128, 10)).cuda()
    x = torch.randn(32, 64, device="cuda")

    def step(m, x):
        loss = m(x).logsumexp(-1).mean()
        loss.backward()
        return loss

    for name, fn in (("inference", lambda m, x: m(x)), ("train_step", step)):
        art = build(fn, model, x)
        f = load(art.python_code, art.cache)
        f(model, x)
        data = report_data(art, load_stats=f.__precompile_load__)
        with open(f"{out}/report_cuda_{name}.json", "w") as fh:
            json.dump(data, fh)
        print(name, "kernels:", [(k["name"], k["kind"]) for k in data["kernels"]])


if __name__ == "__main__":
    main(sys.argv[1])
