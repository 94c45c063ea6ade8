"""Checks the proposed fix for grouped_mm_fp32.py / the MoE models from outside the package:
capture with torch.compiler.is_compiling() True (what torch.export's non-strict mode does with
torch._export.utils._compiling_state_context). Usage: verify_is_compiling_fix.py MODEL WORKLOAD
BACKEND (default mixtral infer eager)."""
import sys
import warnings

import torch

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0])
from benchmarks.zoo import models as Z  # noqa: E402
from benchmarks.zoo.run import _grad_ctx, _Runner, rel_err  # noqa: E402
from precompile_nb import precompile  # noqa: E402

warnings.filterwarnings("ignore")
name, w, backend = (sys.argv[1:] + ["mixtral", "infer", "eager"][len(sys.argv) - 1:])[:3]
spec = Z.build(name, "tiny", "cpu")
m, args, fn = spec.model, spec.args[w], spec.fns[w]
m.train() if w == "train" else m.eval()
r = _Runner(m, args, w, "cpu")
_, ref = r.call(fn)
r.reset()
with _grad_ctx(w), torch.compiler._compile_session_context():  # the fix, from outside
    code, cache = precompile(fn, m, *args, backend=backend)
_, got = r.call(precompile.load(code, cache))
print(name, w, backend, "rel err vs eager:", rel_err(got, ref))
