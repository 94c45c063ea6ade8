"""Tensor-parallel GPT training step on several GPUs: precompile_nb vs eager TP vs
torch.compile, side by side in one job (torchrun), then fresh-process warm starts.

    OUT=benchmarks/results/tp_h200x2
    torchrun --nproc-per-node 2 benchmarks/tp_train.py compile $OUT   # compile, check, time
    torchrun --nproc-per-node 2 benchmarks/tp_train.py warm-pnb $OUT  # fresh: load + 1st step
    torchrun --nproc-per-node 2 benchmarks/tp_train.py warm-tc $OUT   # fresh: torch.compile
                                                                      # warm start + 1st step
Every rank sees its own GPU as cuda:0 (CUDA_VISIBLE_DEVICES = LOCAL_RANK, set below before
CUDA starts), so the pair rank 0 compiles fits every rank (precompile_on_one_rank).

The model: a GPT-style decoder (LAYERS blocks of d_model D, HEADS heads, vocab VOCAB, sequence
SEQ, batch BATCH), attention q/k/v and the MLP's first Linear ColwiseParallel, the attention
output and the MLP's second Linear RowwiseParallel (torch.distributed.tensor.parallel), the
embedding and head replicated; the step runs bf16 autocast inside fn, cross entropy, backward.
Each phase writes OUT/<phase>_rank<R>.json; the compile phase prints a summary table.
"""
from __future__ import annotations

import os

os.environ.setdefault("CUDA_VISIBLE_DEVICES", os.environ.get("LOCAL_RANK", "0"))

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

if sys.argv[1].startswith("warm"):  # empty compiler caches: a fresh machine's first start
    fresh = tempfile.mkdtemp(prefix="tp_warm_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(fresh, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(fresh, "triton")

T_START = time.perf_counter()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

LAYERS, D, HEADS, VOCAB, SEQ, BATCH = 4, 512, 8, 8192, 256, 8
STEPS, TIMED = 3, 20
# TP_DEVICE=cpu: a small dry run with gloo on CPU (checks the script, measures nothing useful)
DEV = os.environ.get("TP_DEVICE", "cuda")
if DEV == "cpu":
    LAYERS, D, HEADS, VOCAB, SEQ, BATCH, TIMED = 1, 64, 4, 256, 16, 2, 2


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.up, self.down = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.ln1(x)
        # local heads: ColwiseParallel gives each rank HEADS / world of them
        q, k, v = (w(h).view(b, t, -1, D // HEADS).transpose(1, 2)
                   for w in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(SEQ, D))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def train_step(model, idx, targets):
    with torch.autocast(DEV, dtype=torch.bfloat16):
        logits = model(idx)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), targets.view(-1))
    loss.backward()
    return loss.detach()


def build(mesh):
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    torch.manual_seed(0)
    m = GPT().to(DEV)
    for blk in m.blocks:
        parallelize_module(blk, mesh, {"q": ColwiseParallel(), "k": ColwiseParallel(),
                                       "v": ColwiseParallel(), "o": RowwiseParallel(),
                                       "up": ColwiseParallel(), "down": RowwiseParallel()})
    return m


def batch():
    g = torch.Generator(device=DEV).manual_seed(1)
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), device=DEV, generator=g)
    return idx, torch.randint(0, VOCAB, (BATCH, SEQ), device=DEV, generator=g)


def full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def steady(step_fn, model, opt, args):
    for _ in range(3):
        step_fn(model, *args)
        opt.step(), opt.zero_grad(set_to_none=True)
    sync()
    times = []
    for _ in range(TIMED):
        t0 = time.perf_counter()
        step_fn(model, *args)
        opt.step(), opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def start():
    dist.init_process_group("nccl" if DEV == "cuda" else "gloo")
    if DEV == "cuda":
        torch.cuda.set_device(0)
    from torch.distributed.tensor import init_device_mesh
    return dist.get_rank(), dist.get_world_size(), init_device_mesh(DEV, (dist.get_world_size(),))


def phase_compile(out):
    from precompile_nb.distributed import precompile_on_one_rank
    rank, world, mesh = start()
    args = batch()
    m, ref = build(mesh), build(mesh)
    t0 = time.perf_counter()
    shared = precompile_on_one_rank(train_step, m, *args, directory=os.path.join(out, "pair"),
                                    name="tp_step")
    res = {"rank": rank, "world": world, "compiled_here": shared.compiled_here,
           "precompile_on_one_rank_s": time.perf_counter() - t0,
           "sizes": dict(layers=LAYERS, d=D, heads=HEADS, vocab=VOCAB, seq=SEQ, batch=BATCH)}
    # correctness: 3 SGD steps, artifact vs eager TP, same initial weights. foreach=False for
    # every system: the model mixes plain and DTensor parameters (embedding and head are
    # replicated plain tensors), which eager's foreach SGD refuses on CUDA
    opt, opt_ref = (torch.optim.SGD(x.parameters(), lr=0.05, foreach=False) for x in (m, ref))
    res["losses"] = []
    for _ in range(STEPS):
        a, b = shared(m, *args), train_step(ref, *args)
        res["losses"].append([float(a), float(b)])
        opt.step(), opt_ref.step(), opt.zero_grad(), opt_ref.zero_grad()
    res["max_weight_diff"] = max(float((full(p) - full(q)).abs().max())
                                 for p, q in zip(m.parameters(), ref.parameters()))
    res["collectives_in_code"] = sum("_c10d_functional" in ln for ln in
                                     shared.python_code.splitlines()
                                     if not ln.lstrip().startswith("#"))
    # steady state, side by side
    res["eager_step_s"] = steady(train_step, ref, opt_ref, args)
    res["precompile_step_s"] = steady(shared.forward, m, opt, args)
    # torch.compile as TP users run it: the model compiled (forward and, through AOTAutograd,
    # backward); torch.compile(train_step) with .backward() inside fails on DTensor models
    # in torch 2.13 ("SymNodeVariable() is not a constant" in DTensor.__tensor_unflatten__)
    tc_model = build(mesh)
    tc_opt = torch.optim.SGD(tc_model.parameters(), lr=0.05, foreach=False)
    compiled = torch.compile(tc_model)
    t0 = time.perf_counter()
    train_step(compiled, *args)
    sync()
    res["torch_compile_cold_s"] = time.perf_counter() - t0
    res["torch_compile_step_s"] = steady(train_step, compiled, tc_opt, args)
    blob, _ = torch.compiler.save_cache_artifacts()
    with open(os.path.join(out, f"tc_rank{rank}.bin"), "wb") as fh:
        fh.write(blob)
    write(out, "compile", rank, res)


def ready():
    """A fresh rank with its model and batch built, CUDA started: the clock starts here."""
    rank, _, mesh = start()
    m, args = build(mesh), batch()
    sync()
    return rank, m, args, time.perf_counter()


def phase_warm_pnb(out):
    rank, m, args, t_ready = ready()
    import precompile_nb.tools.store as store
    f = store.load_pair(os.path.join(out, "pair"), "tp_step")
    t_loaded = time.perf_counter()
    loss = f(m, *args)
    sync()
    t_first = time.perf_counter()
    heavy = [k for k in ("torch._inductor.compile_fx", "torch._dynamo", "sympy", "triton.compiler")
             if k in sys.modules]
    write(out, "warm-pnb", rank, {"rank": rank, "load_s": t_loaded - t_ready,
                                  "load_plus_first_step_s": t_first - t_ready,
                                  "import_torch_to_ready_s": t_ready - T_START,
                                  "loss": float(loss), "heavy_modules_loaded": heavy})


def phase_warm_tc(out):
    rank, m, args, t_ready = ready()
    with open(os.path.join(out, f"tc_rank{rank}.bin"), "rb") as fh:
        torch.compiler.load_cache_artifacts(fh.read())
    loss = train_step(torch.compile(m), *args)
    sync()
    write(out, "warm-tc", rank, {"rank": rank,
                                 "load_plus_first_step_s": time.perf_counter() - t_ready,
                                 "loss": float(loss)})


def write(out, phase, rank, res):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{phase}_rank{rank}.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    print(json.dumps({"phase": phase, **res}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    phase, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    {"compile": phase_compile, "warm-pnb": phase_warm_pnb, "warm-tc": phase_warm_tc}[phase](out)
