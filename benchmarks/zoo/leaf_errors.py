"""Leaf by leaf: how far precompile_nb's and torch.compile's results are from eager's on one
of beyond.py's cases, the worst leaves side by side (where the zoo's one number says
MISMATCH, which leaves make it and whether torch.compile is off there too).

usage: python benchmarks/zoo/leaf_errors.py MODEL[:WORKLOAD] [--device cuda] [--top N]
                                            [--no-tc] [--no-tf32] [--no-cudnn-bn]
                                            [--data-guards] [--eager-variants]

Each leaf (the result, every parameter's gradient, buffers a step writes) as the zoo's
rel_err measures it: ||a - b|| / max(||b||, 1e-3 x the largest leaf norm). Environment
switches (PRECOMPILE_NB_*) apply to the precompile as usual; --no-tf32 turns off TF32 in
cuDNN's convolutions (on by default in eager) for all three; --no-cudnn-bn runs BatchNorm
without cuDNN for all three (the one op F.batch_norm calls, native_batch_norm, where CUDA
eager calls cudnn_batch_norm); --data-guards precompiles with data_guards=True;
--eager-variants adds eager itself run another way as columns (TF32 off in cuDNN's
convolutions; model and 4-D inputs in channels_last): how far eager's own result moves with
rounding and layout, the yardstick for a compiler's distance on this case.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.zoo.beyond import case_runner, eager_nhwc_leaves  # noqa: E402
from benchmarks.zoo.run import _grad_ctx, leaf_errors  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("case", help="MODEL or MODEL:WORKLOAD (train by default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--no-tc", action="store_true")
    ap.add_argument("--no-tf32", action="store_true")
    ap.add_argument("--no-cudnn-bn", action="store_true")
    ap.add_argument("--data-guards", action="store_true")
    ap.add_argument("--eager-variants", action="store_true")
    a = ap.parse_args()
    if a.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
    warnings.filterwarnings("ignore")
    if a.no_cudnn_bn:
        _batch_norm_without_cudnn()
    name, _, workload = a.case.partition(":")
    workload = workload or "train"
    from precompile_nb import precompile

    r, fn = case_runner(name, workload, a.device)
    ref = r.call(fn)[1]
    r.reset()
    with _grad_ctx(workload):
        f = precompile.load(*precompile(fn, r.m, *r.args, data_guards=a.data_guards))
    errs = {"precompile_nb": leaf_errors(r.call(f)[1], ref)}
    if not a.no_tc:
        errs["torch.compile"] = leaf_errors(r.call(torch.compile(fn))[1], ref)
    if a.eager_variants:
        errs.update(_eager_variants(r, fn, ref))
    ours = errs["precompile_nb"]
    print(f"{name} {workload} on {a.device}: worst leaves by precompile_nb's error")
    print(f"{'leaf':70} {'|eager|':>9} " + " ".join(f"{k:>14}" for k in errs))
    for k in sorted(ours, key=lambda k: -ours[k])[:a.top]:
        print(f"{k[:70]:70} {float(ref[k].norm()):9.2e} "
              + " ".join(f"{e[k]:14.2e}" for e in errs.values()))


def _eager_variants(r, fn, ref: dict) -> dict:
    """{column: per-leaf errors} of eager with TF32 off, then in channels_last (last: it
    changes the model's and inputs' memory format)."""
    out = {}
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        out["eager no-tf32"] = leaf_errors(r.call(fn)[1], ref)
    out["eager NHWC"] = leaf_errors(eager_nhwc_leaves(r, fn), ref)
    return out


def _batch_norm_without_cudnn() -> None:
    """F.batch_norm with cuDNN off around it (convolutions keep cuDNN), from here on."""
    import torch.nn.functional as F

    plain = F.batch_norm

    def batch_norm(*args, **kwargs):
        with torch.backends.cudnn.flags(enabled=False):
            return plain(*args, **kwargs)
    F.batch_norm = batch_norm


if __name__ == "__main__":
    main()
