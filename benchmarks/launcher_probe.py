"""Which kernels of a cold CUDA precompile take Triton's own launcher (a C file built with gcc
on the main thread) instead of torch's static CUDA launcher, and why.

usage: python benchmarks/launcher_probe.py [--workloads transformer_train,cnn_bn_train]
                                           [--out DIR]

Round 42's timeline (benchmarks/results/h100_round42/README.md, section 5) found 0.40 s of gcc
on the main thread of the transformer training step's precompile, under Inductor's
TritonCompileResult.make_launcher (Triton's CudaLauncher), while the load of the same artifact
launches all its kernels with torch's static launcher. Each workload here is one fresh process
with empty compiler caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) that precompiles it
(benchmarks/workloads.py, its CUDA size) and records, in that process:

  static     kernels whose launcher was torch's static one
  triton     kernels that took Triton's launcher, each with the reason Inductor's own check
             (StaticTritonCompileResult.can_statically_launch, 2.11-2.15) gives in this
             process for refusing the static one, and the seconds its launcher took
  cuda_launcher_s  seconds in Triton's CudaLauncher constructions (the gcc builds among them)

Prints a line a workload and writes DIR/launcher_probe.json. Round 43
(benchmarks/results/h100_round43) found the reason: names over the 150 characters Triton files
binaries by (Note [kernel names Inductor's launcher check can find]); run it with
PRECOMPILE_NB_SHORT_KERNEL_NAMES=0 to see Inductor's names again.
"""
from __future__ import annotations

import argparse
import os

from fresh_child import run_fresh, save

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import json, logging, sys, time, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {bench!r}]
import torch
import torch._inductor.runtime.triton_heuristics as th
import workloads

rec = {{"static": 0, "triton": [], "cuda_launcher_s": 0.0, "cuda_launchers": 0}}
reasons = []

class Catch(logging.Handler):
    def emit(self, r):
        msg = r.getMessage()
        if "static" in msg.lower():  # "Bypassing StaticallyLaunchedCudaKernel due to ..."
            reasons.append(msg)

lg = logging.getLogger(th.__name__)
lg.addHandler(Catch()); lg.setLevel(logging.INFO); lg.propagate = False

made = getattr(th.CachingAutotuner, "_make_launchers", None)
if made is None:  # another torch's autotuner: nothing to wrap, said in the result
    rec["make_launchers"] = "CachingAutotuner._make_launchers not found"
def _make_launchers(self):
    for r in self.compile_results or ():
        if isinstance(r, th.StaticTritonCompileResult):
            rec["static"] += 1
            continue
        del reasons[:]
        check = th.StaticTritonCompileResult.can_statically_launch
        try:
            check(r.kernel, self.inductor_meta, self.triton_meta, self.heuristic_type)
        except TypeError:  # a torch whose check takes no heuristic type
            try:
                check(r.kernel, self.inductor_meta, self.triton_meta)
            except Exception as e:
                reasons.append(f"(the check raised {{e!r}})")
        except Exception as e:
            reasons.append(f"(the check raised {{e!r}})")
        rec["triton"].append({{"kernel": getattr(r.kernel.metadata, "name", "?"),
                              "why": list(reasons) or ["(no reason logged)"]}})
    return made(self)
if made is not None:
    th.CachingAutotuner._make_launchers = _make_launchers

try:
    from triton.backends.nvidia import driver as nv
    init = nv.CudaLauncher.__init__
    def timed(self, *a, **k):
        t = time.perf_counter()
        try:
            return init(self, *a, **k)
        finally:
            rec["cuda_launcher_s"] += time.perf_counter() - t
            rec["cuda_launchers"] += 1
    nv.CudaLauncher.__init__ = timed
except Exception as e:
    rec["cuda_launcher_wrap"] = repr(e)

from precompile_nb import precompile
w = workloads.build({workload!r}, "cuda")
t = time.perf_counter()
with (torch.no_grad() if w.inference else torch.enable_grad()):
    precompile(w.fn, *w.args)
rec["precompile_s"] = time.perf_counter() - t
print(json.dumps(rec))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="transformer_train,cnn_bn_train")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "launcher_probe"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = {}
    for name in a.workloads.split(","):
        res[name] = r = run_fresh(_CHILD.format(root=ROOT, bench=HERE, workload=name),
                                  "launcher_probe_")
        if "error" in r:
            print(f"{name}: failed\n{r['error'][-2000:]}")
            continue
        whys = sorted({w for k in r["triton"] for w in k["why"]})
        print(f"{name}: {r['static']} static, {len(r['triton'])} with Triton's launcher "
              f"({r['cuda_launchers']} CudaLauncher, {r['cuda_launcher_s']:.2f} s); "
              f"precompile {r['precompile_s']:.2f} s; why: {whys}")
    save(a.out, "launcher_probe.json", res)


if __name__ == "__main__":
    main()
