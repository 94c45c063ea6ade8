"""hf_detr inference on CUDA: is its 1.4e-3 against eager (H200, every other HF inference case
<= 4e-6) TF32? cuDNN runs fp32 convolutions in TF32 by default
(torch.backends.cudnn.allow_tf32 = True) in eager, torch.compile and precompile_nb alike, and
which algorithm (so which rounding) each picks differs; DETR puts a ResNet-50 in front of its
transformer, so the backbone's rounding reaches the boxes. This runs the zoo's hf_detr infer
case (real size) with TF32 on (the default) and off, each time precompile_nb and torch.compile
against eager, and prints the six relative errors:

    python benchmarks/zoo/repros/detr_tf32.py [MODEL]     # MODEL default hf_detr; ~3 min

Expected if TF32 is the cause: with TF32 off both compilers drop to ~1e-6; with it on,
torch.compile's error is of the same order as precompile_nb's.
"""
import sys
import warnings

import torch

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0])
from benchmarks.zoo import models as Z  # noqa: E402
from benchmarks.zoo.run import _Runner, rel_err  # noqa: E402
from precompile_nb import precompile  # noqa: E402

warnings.filterwarnings("ignore")
name = sys.argv[1] if len(sys.argv) > 1 else "hf_detr"
for tf32 in (True, False):
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # torch's default for matmuls
    spec = Z.build(name, "real", "cuda")
    m, args, fn = spec.model.eval(), spec.args["infer"], spec.fns["infer"]
    r = _Runner(m, args, "infer", "cuda")
    _, ref = r.call(fn)
    with torch.no_grad():
        f = precompile.load(*precompile(fn, m, *args))
    _, got = r.call(f)
    torch._dynamo.reset()
    _, got_tc = r.call(torch.compile(fn))
    _, ref2 = r.call(fn)
    print(f"{name} cudnn.allow_tf32={tf32}: precompile_nb {rel_err(got, ref)[0]:.1e}, "
          f"torch.compile {rel_err(got_tc, ref)[0]:.1e}, eager twice {rel_err(ref2, ref)[0]:.1e}",
          flush=True)
