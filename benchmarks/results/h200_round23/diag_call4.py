import json, os, subprocess, sys, tempfile, difflib
sys.path.insert(0, os.getcwd())
from tests.core.models import CUDA_MLP_SCRIPT
CHILD = CUDA_MLP_SCRIPT + r"""
from precompile_nb.core import build
out = []
for _ in range(2):
    art = build(fn, m, x)
    out.append({"builds": dict(art.lowered.builds), "code": art.python_code,
      "binaries": sorted(rel for root, rel, _ in art.lowered.files if root == "triton")})
print(json.dumps(out))
"""
ZOO = r"""
import json, sys, hashlib
sys.path.insert(0, ".")
from benchmarks.zoo import models
from precompile_nb.core import build
s = models.REGISTRY["gpt2"]("real", "cuda")
art = build(s.fns["train"], s.model, *s.args["train"])
print(json.dumps({"builds": dict(art.lowered.builds), "code": art.python_code,
  "binaries": sorted(rel for root, rel, _ in art.lowered.files if root == "triton")}))
"""
def run(src, cache, extra):
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TORCHINDUCTOR_CACHE_DIR=cache, PRECOMPILE_NB_LOWERING_REUSE="0", **extra)
    r = subprocess.run([sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
def show(name, x, y):
    print("==", name, x["builds"], y["builds"])
    print("binaries same:", x["binaries"] == y["binaries"], len(x["binaries"]), len(y["binaries"]), "code same:", x["code"] == y["code"])
    print("only first:", sorted(set(x["binaries"]) - set(y["binaries"]))[:6])
    print("only second:", sorted(set(y["binaries"]) - set(x["binaries"]))[:6])
    print("\n".join(l[:160] for l in list(difflib.unified_diff(x["code"].splitlines(), y["code"].splitlines(), lineterm="", n=0))[:16]))
t = tempfile.mkdtemp()
a, b = run(CHILD, t + "/a", {})
show("in-process cold vs again", a, b)
c = run(ZOO, t + "/c", {"PRECOMPILE_NB_KERNEL_REUSE": "0"}); d = run(ZOO, t + "/d", {"PRECOMPILE_NB_KERNEL_REUSE": "0"})
show("gpt2 real cold vs cold", c, d)
