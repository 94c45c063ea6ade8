import json, os, subprocess, sys, tempfile, difflib
sys.path.insert(0, os.getcwd())
from tests.core.models import CUDA_MLP_SCRIPT
CHILD = CUDA_MLP_SCRIPT + r"""
from precompile_nb.core import build
art = build(fn, m, x)
print(json.dumps({"builds": dict(art.lowered.builds), "code": art.python_code,
  "binaries": sorted(rel for root, rel, _ in art.lowered.files if root == "triton")}))
"""
def run(cache, extra):
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TORCHINDUCTOR_CACHE_DIR=cache, PRECOMPILE_NB_LOWERING_REUSE="0", **extra)
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
t = tempfile.mkdtemp()
a = run(t + "/a", {}); b = run(t + "/a", {})          # store: cold then reuse
c = run(t + "/c", {"PRECOMPILE_NB_KERNEL_REUSE": "0"}); d = run(t + "/d", {"PRECOMPILE_NB_KERNEL_REUSE": "0"})  # two colds
for name, x, y in (("cold vs reuse", a, b), ("cold vs cold", c, d)):
    print("==", name, x["builds"], y["builds"])
    print("binaries same:", x["binaries"] == y["binaries"], "code same:", x["code"] == y["code"])
    print("only first:", sorted(set(x["binaries"]) - set(y["binaries"]))[:8])
    print("only second:", sorted(set(y["binaries"]) - set(x["binaries"]))[:8])
    print("\n".join(list(difflib.unified_diff(x["code"].splitlines(), y["code"].splitlines(), lineterm="", n=0))[:24]))
