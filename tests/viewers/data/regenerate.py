"""Rewrite report_eager.json and report_inductor.json from the real `report_data(...)`.

    .venv/bin/python tests/viewers/data/regenerate.py            # both
    .venv/bin/python tests/viewers/data/regenerate.py eager      # one
    .venv/bin/python tests/viewers/data/regenerate.py --out DIR  # somewhere else (to diff)

The viewer tests render these files without torch; tests/test_viewer_fixtures.py builds the
same reports with torch and fails when their structure (keys, types) no longer matches the
files. Run this after changing report_data, then re-run tests/viewers: values the tests read
(node names, kernel lines) may have moved with it.

Both are a training step of a small MLP with a BatchNorm (parameters, buffers, a mutated
buffer, gradients) on CPU; report_cuda_*.json were made on a GPU and are not rewritten here.
"""
from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
BACKENDS = ("eager", "inductor")


def step(m, x):
    loss = m(x).sum()
    loss.backward()
    return loss


def example() -> tuple[Any, Any]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    return m, torch.randn(5, 8)


def build_report(backend: str) -> dict[str, Any]:
    """report_data of `step` on the example, built now with the installed torch."""
    from precompile_nb.core import build
    from precompile_nb.tools.report import report_data

    m, x = example()
    data = report_data(build(step, m, x, backend=backend))
    return json.loads(json.dumps(data))  # exactly what the file will hold (tuples -> lists)


def write(backend: str, out: pathlib.Path = HERE) -> pathlib.Path:
    path = out / f"report_{backend}.json"
    path.write_text(json.dumps(build_report(backend), indent=1))
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backends", nargs="*", metavar="BACKEND",
                    help=f"any of {', '.join(BACKENDS)} (default: all)")
    ap.add_argument("--out", type=pathlib.Path, default=HERE)
    args = ap.parse_args(argv)
    for b in args.backends:
        if b not in BACKENDS:
            ap.error(f"unknown backend {b!r}; use {' or '.join(BACKENDS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for backend in args.backends or BACKENDS:
        print(f"wrote {write(backend, args.out)}")


if __name__ == "__main__":
    main()
