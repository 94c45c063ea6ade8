"""BEiT's relative-position interpolation on its own: F.interpolate(bilinear) of a permuted
(channels-last-like) tensor, through precompile_nb and torch.compile, on the device given.

usage: python benchmarks/zoo/upsample_probe.py [cpu|cuda]

Prints each system's result against eager (or its error), whether Inductor's decomposition
table holds aten.upsample_bilinear2d.default, and whether precompile_nb's python_code calls
that ATen op (it did before Note [the upsampling torch.compile decomposes]).
"""
from __future__ import annotations

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def fn(table):
    sub = table.reshape(1, 5, 5, -1).permute(0, 3, 1, 2)
    return F.interpolate(sub, size=(7, 7), mode="bilinear").flatten(1) * 2


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    from torch._inductor.decomposition import decompositions, select_decomp_table

    op = torch.ops.aten.upsample_bilinear2d.default
    print("torch", torch.__version__, "| .default in decompositions:", op in decompositions,
          "| in select_decomp_table():", op in select_decomp_table())
    table = torch.randn(25, 4, device=device)
    ref = fn(table)
    print("eager out strides", ref.stride(), "interp strides",
          F.interpolate(table.reshape(1, 5, 5, -1).permute(0, 3, 1, 2), size=(7, 7),
                        mode="bilinear").stride())
    from precompile_nb import precompile

    def precompiled():
        code, cache = precompile(fn, table)
        print("precompile_nb's python_code calls the ATen op:",
              "aten.upsample_bilinear2d.default" in code)
        return precompile.load(code, cache)

    for name, build in (("precompile_nb", precompiled),
                        ("torch.compile", lambda: torch.compile(fn))):
        try:
            got = build()(table)
            print(name, "ok, max abs diff", float((got - ref).abs().max()))
        except Exception as e:  # noqa: BLE001 - the probe reports every failure
            print(name, "FAILED", type(e).__name__, str(e).splitlines()[:3])
            if e.__cause__ is not None:
                print("  cause:", type(e.__cause__).__name__, str(e.__cause__).splitlines()[:2])
            traceback.print_exc(limit=3)


if __name__ == "__main__":
    main()
