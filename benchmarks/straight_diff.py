"""The difference between the module Inductor writes for a graph through AOTAutograd and the
one it writes for the same graph handed to it directly (Note [one trace between capture and
Inductor]), as a unified diff, for the straight path's test cases on a device. Round 18 ran
it on CUDA with a first form that handed cuDNN's BatchNorm straight to Inductor: the CNN's two
modules differed in comments only (results/h200_round18/). The shipped form leaves a CUDA CNN
to AOTAutograd, so there both modules are AOTAutograd's:

    python benchmarks/straight_diff.py [cuda|cpu] [mlp|cnn_bn]
"""
from __future__ import annotations

import difflib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from precompile_nb.core import build  # noqa: E402
from tests.core import test_straight_to_inductor as t  # noqa: E402


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    example = {"mlp": t._example, "cnn_bn": t._cnn}[sys.argv[2] if len(sys.argv) > 2
                                                     else "cnn_bn"]
    out = {}
    for env in ("0", "1"):
        os.environ[t.ENV] = env
        m, x, y = example()
        art = build(t._train_step, m.to(device), x.to(device), y.to(device))
        out[env] = t._without_aot_id(art.lowered.source)
    diff = list(difflib.unified_diff(out["0"], out["1"], "through AOTAutograd", "straight",
                                     lineterm="", n=2))
    print(f"{len(diff)} diff lines")
    print("\n".join(diff[:400]))


if __name__ == "__main__":
    main()
