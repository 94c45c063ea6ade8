"""Profile the GPT-style training step of notebook 07 with precompile_nb's profiler and check
that the per-module times plus the unattributed row sum to the measured step time, and how
much of the step the modules account for. Not a test: run it on the machine to be measured.

    python benchmarks/profile_step.py [--device cuda] [--size nb07|8layer] [--steps 20]
        [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from precompile_nb.core import build  # noqa: E402
from precompile_nb.core.load import load  # noqa: E402
from precompile_nb.tools.profile import UNATTRIBUTED, profile_artifact  # noqa: E402
from precompile_nb.tools.report import report_data  # noqa: E402


def _notebook_07_model() -> tuple[type, type]:
    """Block and GPT exactly as notebook 07 defines them: its model cell, read from the text
    of notebooks/build.py (the notebooks' source; read, not imported, so that this runs where
    only torch is installed), up to the line after its model definitions."""
    text = (Path(__file__).resolve().parents[1] / "notebooks" / "build.py").read_text()
    start = text.index("class Block(nn.Module):\n    def __init__(self, d, heads):")
    cell = text[start:text.index("\ndevice = ", start)]
    ns = {"torch": torch, "nn": nn}
    exec(cell, ns)  # noqa: S102 - the repository's own notebook source
    return ns["Block"], ns["GPT"]


Block, GPT = _notebook_07_model()


def lm_step(gpt, ids, targets):
    logits = gpt(ids)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    return loss.detach()


SIZES = {"nb07": dict(model=dict(), batch=4),
         "8layer": dict(model=dict(vocab=4096, d=512, heads=8, layers=8, block=256), batch=16)}


def _gpu_kernel_ms(f, inputs, steps: int) -> float:
    """The GPU kernel time per step by plain torch.profiler, nothing instrumented."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(steps):
            f(*inputs)
        torch.cuda.synchronize()
    us = sum(e.time_range.elapsed_us() for e in p.events()
             if e.device_type == torch.autograd.DeviceType.CUDA)
    return us / steps / 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--size", choices=sorted(SIZES), default="nb07")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args()
    warnings.filterwarnings("ignore", message="precompile.load executes")
    torch.manual_seed(0)
    cfg = SIZES[a.size]
    gpt = GPT(**cfg["model"]).to(a.device)
    block, vocab = gpt.pos.num_embeddings, gpt.tok.num_embeddings
    ids = torch.randint(0, vocab, (cfg["batch"], block), device=a.device)
    targets = torch.roll(ids, -1, dims=1)
    art = build(lm_step, gpt, ids, targets)
    f = load(art.python_code, art.cache)
    report = report_data(art)
    prof = profile_artifact(f, report, (gpt, ids, targets), steps=a.steps, warmup=3,
                            eager=lm_step)
    rows = prof.modules
    independent = _gpu_kernel_ms(f, (gpt, ids, targets), a.steps) if a.device == "cuda" else None
    attributed = sum(m.seconds for m in rows if m.module != UNATTRIBUTED)
    summary = {
        "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
        "torch": torch.__version__, "size": a.size, "graph_nodes": len(report["graph"]["nodes"]),
        "kernels": len(report["kernels"]), "steps": a.steps,
        "step_ms": prof.step_seconds * 1e3, "kernel_ms": prof.kernel_seconds * 1e3,
        "modules_ms": attributed * 1e3, "unattributed_ms": prof.unattributed_seconds * 1e3,
        "modules_share_of_step": attributed / prof.step_seconds,
        "rows_sum_ms": sum(m.seconds for m in rows) * 1e3,
        "eager_step_ms": (prof.eager_step_seconds or 0) * 1e3,
        # every GPU kernel of a plain torch.profiler run, uninstrumented: kernel_ms should match
        "gpu_kernels_ms_independent": independent,
        "kernels_without_nodes": [k.name for k in prof.kernels if k.attribution == "none"],
        "top_modules": [(m.module, round(m.forward_seconds * 1e3, 4),
                         round(m.backward_seconds * 1e3, 4),
                         None if m.eager_forward_seconds is None
                         else round(m.eager_forward_seconds * 1e3, 4)) for m in rows[:12]],
        "top_kernels": [(k.name, k.kind, round(k.seconds * 1e3, 4), k.nodes[:4])
                        for k in prof.kernels[:10]],
        "notes": list(prof.notes),
    }
    print(json.dumps(summary, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps({"summary": summary, "profile": prof.to_data()}))


if __name__ == "__main__":
    main()
