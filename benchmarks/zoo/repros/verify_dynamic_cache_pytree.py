"""Does registering transformers' DynamicCache as a pytree node (its own
transformers.integrations.executorch.register_dynamic_cache_export_support, made for
torch.export) let precompile carry a decoder's default output (logits + DynamicCache)?"""
import sys
import warnings

import torch

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0])
from benchmarks.zoo import models as Z  # noqa: E402
from benchmarks.zoo.run import _Runner, rel_err  # noqa: E402
from precompile_nb import precompile  # noqa: E402

warnings.filterwarnings("ignore")
name = sys.argv[1] if len(sys.argv) > 1 else "llama"
spec = Z.build(name, "tiny", "cpu")
from transformers.integrations.executorch import register_dynamic_cache_export_support  # noqa
register_dynamic_cache_export_support()
m, args, fn = spec.model.eval(), spec.args["infer_cache"], spec.fns["infer_cache"]
r = _Runner(m, args, "infer_cache", "cpu")
_, ref = r.call(fn)
with torch.no_grad():
    code, cache = precompile(fn, m, *args, backend="eager")
try:
    precompile.load(code, cache)
    print("loads as it is")
except Exception as e:  # noqa: BLE001
    print("load fails:", type(e).__name__, str(e).splitlines()[0])
    # the proposed fix, applied to the artifact's own driver: a TreeSpec is built from the
    # literal directly, never by unflattening int stand-ins through the node's unflatten fn
    old = """def _pc_treespec(lit, Err):
    \"\"\"The TreeSpec of a tree literal.\"\"\"
"""
    assert old in code
    code = code.replace(old, old + """    if lit["type"] == "pytree":
        return _pc_pytree.treespec_loads(lit["dumps"])
""")
    cache = None  # the code changed: its cache no longer belongs (eager backend: no kernels)
with torch.no_grad():
    out = precompile.load(code, cache)(m, *args)
print(type(out).__name__, type(out.past_key_values).__name__)
_, got = r.call(precompile.load(code, cache))
print(name, "rel err vs eager:", rel_err(got, ref))
