"""Steady-state time of one whole training step (forward + backward + AdamW step + zero_grad).

usage: python benchmarks/optimizer_step.py [--device cpu|cuda] [--workloads mlp,transformer]
           [--rounds 15] [--iters 10] [--out DIR] [--tensor-lr]

Four systems, each with its own copy of the same model and optimizer, timed round by round
interleaved (so machine noise hits them alike), the median per-step time reported:

  eager         the step as written, in eager PyTorch
  compile       torch.compile of the same step function (optimizer inside, as written)
  nb_in_fn      precompile_nb with the optimizer inside fn: one artifact per step
  nb_outside    precompile_nb of forward + backward only; opt.step() and opt.zero_grad()
                eager after each call (what precompile_nb needed before issue 27)

Ratios (lower is better): nb_in_fn / eager, nb_in_fn / compile, nb_in_fn / nb_outside.
Prints a markdown table; with --out writes results.json and results.md there. Every timed
region is between time.perf_counter() calls, with torch.cuda.synchronize() before the clock
stops on CUDA.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from precompile_nb import precompile  # noqa: E402

SYSTEMS = ("eager", "compile", "nb_in_fn", "nb_outside")


def step_in_fn(model, opt, x, y):
    loss = F.cross_entropy(model(x).flatten(0, -2), y.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def fwd_bwd(model, x, y):
    loss = F.cross_entropy(model(x).flatten(0, -2), y.flatten())
    loss.backward()
    return loss


class _Tiny(nn.Module):
    """A small causal-free transformer classifier over token ids: embedding, 2 encoder
    layers, a head (no dropout: every system runs the same math)."""

    def __init__(self, vocab: int, d: int, heads: int, layers: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)))


def workload(name: str, device: str, seed: int = 0):
    """(model, x, y) for a workload, sized for the device."""
    torch.manual_seed(seed)
    big = device == "cuda"
    if name == "mlp":
        d, b = (1024, 256) if big else (256, 64)
        m = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, 4 * d), nn.GELU(),
                          nn.Linear(4 * d, 10))
        x, y = torch.randn(b, d), torch.randint(0, 10, (b,))
    elif name == "transformer":
        vocab, d, heads, layers, b, t = ((8192, 384, 6, 4, 16, 256) if big
                                         else (512, 64, 4, 2, 8, 32))
        m = _Tiny(vocab, d, heads, layers)
        x, y = torch.randint(0, vocab, (b, t)), torch.randint(0, vocab, (b, t))
    else:
        raise SystemExit(f"unknown workload {name!r}")
    return m.to(device), x.to(device), y.to(device)


def _optimizer(m, tensor_lr: bool):
    lr = torch.tensor(1e-3) if tensor_lr else 1e-3
    return torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01)


def build_systems(name: str, device: str, tensor_lr: bool) -> tuple[dict, dict]:
    """One callable per system (each on its own model and optimizer), and build seconds."""
    calls, seconds = {}, {}
    for system in SYSTEMS:
        m, x, y = workload(name, device)
        opt = _optimizer(m, tensor_lr)
        t0 = time.perf_counter()
        if system == "eager":
            calls[system] = (lambda m=m, o=opt, x=x, y=y: step_in_fn(m, o, x, y))
        elif system == "compile":
            f = torch.compile(step_in_fn)
            calls[system] = (lambda f=f, m=m, o=opt, x=x, y=y: f(m, o, x, y))
            calls[system]()  # compile on the first call
        elif system == "nb_in_fn":
            f = precompile.load(*precompile(step_in_fn, m, opt, x, y))
            calls[system] = (lambda f=f, m=m, o=opt, x=x, y=y: f(m, o, x, y))
        else:
            f = precompile.load(*precompile(fwd_bwd, m, x, y))

            def outside(f=f, m=m, o=opt, x=x, y=y):
                loss = f(m, x, y)
                o.step()
                o.zero_grad()
                return loss
            calls[system] = outside
        seconds[system] = time.perf_counter() - t0
    return calls, seconds


def measure(calls: dict, device: str, rounds: int, iters: int) -> dict[str, float]:
    """Median seconds per step of each system, rounds interleaved."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for f in calls.values():  # warm up (allocator, first-call paths)
        for _ in range(3):
            f()
    sync()
    times: dict[str, list[float]] = {s: [] for s in calls}
    for _ in range(rounds):
        for s, f in calls.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                f()
            sync()
            times[s].append((time.perf_counter() - t0) / iters)
    return {s: statistics.median(v) for s, v in times.items()}


def _table(rows: list[dict]) -> str:
    head = ("| workload | eager ms | torch.compile ms | nb, optimizer in fn ms | "
            "nb, optimizer outside ms | in_fn / eager | in_fn / compile | in_fn / outside |")
    lines = [head, "|" + " --- |" * 8]
    for r in rows:
        t = r["seconds_per_step"]
        lines.append(
            f"| {r['workload']} | {1e3 * t['eager']:.3f} | {1e3 * t['compile']:.3f} | "
            f"{1e3 * t['nb_in_fn']:.3f} | {1e3 * t['nb_outside']:.3f} | "
            f"{r['ratios']['in_fn/eager']:.3f} | {r['ratios']['in_fn/compile']:.3f} | "
            f"{r['ratios']['in_fn/outside']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--workloads", default="mlp,transformer")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--tensor-lr", action="store_true", help="AdamW(lr=torch.tensor(1e-3))")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message="precompile.load executes")
    rows = []
    for name in a.workloads.split(","):
        calls, build = build_systems(name, a.device, a.tensor_lr)
        t = measure(calls, a.device, a.rounds, a.iters)
        rows.append({"workload": name, "device": a.device, "seconds_per_step": t,
                     "build_seconds": build,
                     "ratios": {"in_fn/eager": t["nb_in_fn"] / t["eager"],
                                "in_fn/compile": t["nb_in_fn"] / t["compile"],
                                "in_fn/outside": t["nb_in_fn"] / t["nb_outside"]}})
        print(_table(rows[-1:]), flush=True)
    text = (f"torch {torch.__version__}, device {a.device}, {os.cpu_count()} CPUs, "
            f"{a.rounds} rounds x {a.iters} steps, median per step, AdamW "
            f"({'tensor' if a.tensor_lr else 'float'} lr)\n\n{_table(rows)}\n")
    print("\n" + text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"argv": sys.argv, "torch": torch.__version__, "rows": rows}, f, indent=1)
        with open(os.path.join(a.out, "results.md"), "w") as f:
            f.write(f"`python benchmarks/optimizer_step.py {' '.join(sys.argv[1:])}`\n\n{text}")


if __name__ == "__main__":
    main()
