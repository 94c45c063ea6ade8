"""Rewrite report_eager.json and report_inductor.json from the real `report_data(...)`.

    .venv/bin/python tests/viewers/data/regenerate.py            # both
    .venv/bin/python tests/viewers/data/regenerate.py eager      # one
    .venv/bin/python tests/viewers/data/regenerate.py --out DIR  # somewhere else (to diff)
    .venv/bin/python tests/viewers/data/regenerate.py trim FILE...  # only cut the driver out

The viewer tests render these files without torch; tests/test_viewer_fixtures.py builds the
same reports with torch and fails when their structure (keys, types) no longer matches the
files. Run this after changing report_data, then re-run tests/viewers: values the tests read
(node names, kernel lines) may have moved with it.

The artifact's driver section (the same ~100 KB of runtime code in every artifact, after the
graph and metadata sections that the viewers' tests read) is left out of each file's
python_code: a fixture holds data for the viewers, not a second copy of the runtime's source.
`trim FILE...` does only that to files made elsewhere (report_cuda_*.json, made on a GPU).

Both are a training step of a small MLP with a BatchNorm (parameters, buffers, a mutated
buffer, gradients) on CPU; report_cuda_*.json were made on a GPU and are not rewritten here.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
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


DRIVER_LEFT_OUT = ("# (left out of this fixture: the driver, copied verbatim into every artifact;"
                   " see tests/viewers/data/regenerate.py)\n")


def without_driver(report: dict[str, Any]) -> dict[str, Any]:
    """The report with its python_code cut after the driver section's marker line."""
    from precompile_nb.core.emit import marker

    driver, code = marker("driver"), report.get("python_code")
    if isinstance(code, str) and driver in code:
        head = code[:code.index(driver) + len(driver)]
        report = dict(report, python_code=head + "\n" + DRIVER_LEFT_OUT)
    return report


def write(backend: str, out: pathlib.Path = HERE) -> pathlib.Path:
    path = out / f"report_{backend}.json"
    path.write_text(json.dumps(without_driver(build_report(backend)), indent=1))
    return path


def trim(path: pathlib.Path) -> None:
    path.write_text(json.dumps(without_driver(json.loads(path.read_text())), indent=1))


def main(argv: list[str] | None = None) -> None:
    argv = list(argv) if argv is not None else sys.argv[1:]
    if argv[:1] == ["trim"]:
        for name in argv[1:]:
            trim(pathlib.Path(name))
            print(f"trimmed {name}")
        return
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
