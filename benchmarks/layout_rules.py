"""Which of the zoo's training steps change convolution layout on the GPU with Note [a
training step's layout, by torch.compile's rule], found without a GPU: each step is captured
on the CPU as precompile captures it, its graph's values are moved to (fake) CUDA tensors of
the same shapes, and Inductor's layout rule is asked three ways:

  before      the rule for inference on the whole step's graph (what Inductor applied to
              precompile's graph until this note)
  now         the rule for training on the whole step's graph (what it applies now)
  tc forward  the rule for training on the inference graph of the same model and inputs, in
              training mode: about what torch.compile asks of its forward graph (its node
              count misses the saved activations it returns)

usage: python benchmarks/layout_rules.py [--size real|tiny] [--models a,b] [--out F.json]

Depthwise convolutions and the convolutions precompile computes as matrix products follow
their own rules after this one (docs/differences.md); a model with no convolution is
left out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from benchmarks.zoo import models as Z  # noqa: E402
from tests.core.test_conv_as_mm import as_if_on_cuda  # noqa: E402 (its values on CUDA)

CONV = torch.ops.aten.convolution.default


def _graph(fn, model, args) -> torch.fx.GraphModule:
    from precompile_nb.core.capture import capture

    return as_if_on_cuda(capture(fn, [model, *args]).graph)


def rules(name: str, size: str) -> dict | None:
    """The three answers for one zoo model's training step; None without a convolution."""
    spec = Z.build(name, size, "cpu")
    if not any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in spec.model.modules()):
        return None
    spec.model.train()
    return {"model": name, **decisions(spec.model, (spec.fns["train"], spec.args["train"]),
                                       (spec.fns["infer"], spec.args["infer"]))}


def decisions(model: torch.nn.Module, train: tuple, infer: tuple) -> dict:
    """The three answers for `model`'s training step and its inference graph, each given as
    (fn, inputs after the model)."""
    from torch._inductor.graph import GraphLowering

    step, forward = _graph(train[0], model, train[1]), _graph(infer[0], model, infer[1])
    decide = GraphLowering.decide_layout_opt
    return {"convolutions": sum(n.target is CONV for n in step.graph.nodes),
            "nodes": len(step.graph.nodes), "forward_nodes": len(forward.graph.nodes),
            "before": decide(step, is_inference=True), "now": decide(step, is_inference=False),
            "tc_forward": decide(forward, is_inference=False)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="real", choices=("real", "tiny"))
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    names = a.models.split(",") if a.models else list(Z.REGISTRY)
    rows = []
    print("| model | convolutions | nodes (step / forward) | before | now | tc forward |")
    print("| --- | ---: | ---: | --- | --- | --- |")
    for name in names:
        try:
            r = rules(name, a.size)
        except Exception as e:  # noqa: BLE001 - one row per model, whatever happens
            r = {"model": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        if r is None:
            continue
        rows.append(r)
        if "error" in r:
            print(f"| {name} | {r['error']} | | | | |")
            continue
        lay = {True: "channels_last", False: "NCHW"}
        print(f"| {name} | {r['convolutions']} | {r['nodes']} / {r['forward_nodes']} | "
              f"{lay[r['before']]} | {lay[r['now']]} | {lay[r['tc_forward']]} |", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"size": a.size, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
