"""A zoo model's training step under bf16 autocast *on CPU* (the zoo's own steps use autocast
only on CUDA): python autocast_cpu_zoo.py MODEL BACKEND. Used to check whether the
'expected scalar type Float but found BFloat16' failure seen under CUDA autocast (timm swin)
shows on CPU too."""
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0])
from benchmarks.zoo import models as Z  # noqa: E402
from benchmarks.zoo.run import _Runner, rel_err  # noqa: E402
from precompile_nb import precompile  # noqa: E402

warnings.filterwarnings("ignore")
name, backend = (sys.argv[1:] + ["timm_swin", "inductor"][len(sys.argv) - 1:])[:2]


def step(m, x, y):
    with torch.autocast("cpu", torch.bfloat16):
        loss = F.cross_entropy(m(x), y)
    loss.backward()
    return loss


spec = Z.build(name, "tiny", "cpu")
m, args = spec.model.train(), spec.args["train"]
r = _Runner(m, args, "train", "cpu")
_, ref = r.call(step)
r.reset()
code, cache = precompile(step, m, *args, backend=backend)
_, got = r.call(precompile.load(code, cache))
print(name, backend, "rel err vs eager:", rel_err(got, ref))
