"""A data-parallel training step (FSDP2, or DDP), precompiled on rank 0 and run on every rank.

    torchrun --nproc-per-node 2 examples/torchrun_fsdp.py          # FSDP2 (fully_shard)
    torchrun --nproc-per-node 2 examples/torchrun_fsdp.py --ddp    # DistributedDataParallel
    ... --eager    # the eager backend (the graph run op by op, no compiler): a quick check

CPU with gloo, or CUDA with NCCL. What it shows: a small transformer sharded with
`fully_shard` per block and at the root (bf16 parameters with fp32 gradient reduction on
CUDA), or wrapped in DDP; a training step with `.backward()` captured whole, the all-gathers
and reduce-scatters (FSDP2) or the bucketed all-reduce (DDP) inside the compiled graph;
compiled once on rank 0 (`precompile_on_one_rank`) and loaded by the other ranks, then three
AdamW steps, each rank on its own batch, printed beside eager FSDP2 / DDP.
"""
import os
import sys

# every rank sees its own GPU as cuda:0, so rank 0's kernels fit every rank
os.environ.setdefault("CUDA_VISIBLE_DEVICES", os.environ.get("LOCAL_RANK", "0"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

from precompile_nb.distributed import precompile_on_one_rank  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).unflatten(-1, (3, self.heads, -1)).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).flatten(2))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=1000, d=128, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tok):
        x = self.emb(tok)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def train_step(model, tok):
    logits = model(tok[:, :-1])
    loss = F.cross_entropy(logits.float().flatten(0, 1), tok[:, 1:].flatten())
    loss.backward()
    return loss.detach()


def wrapped(device, ddp):
    torch.manual_seed(0)  # the same initial weights on every rank
    model = TinyLM().to(device)
    if ddp:
        return DistributedDataParallel(model)
    bf16 = device == "cuda"
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None,
                                  reduce_dtype=torch.float32 if bf16 else None)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    return fully_shard(model, mp_policy=policy)


def main():
    ddp = "--ddp" in sys.argv
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    rank = dist.get_rank()
    model, eager = wrapped(device, ddp), wrapped(device, ddp)
    gen = torch.Generator().manual_seed(rank)  # data parallel: each rank its own batch
    tok = torch.randint(0, 1000, (8, 65), generator=gen).to(device)

    backend = "eager" if "--eager" in sys.argv else "inductor"
    step = precompile_on_one_rank(train_step, model, tok, backend=backend)  # rank 0 compiles
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, eager)]
    kind = "DDP" if ddp else "FSDP2"
    worst = 0.0
    for i in range(3):
        got, want = step(model, tok), train_step(eager, tok)
        for opt in opts:
            opt.step()
            opt.zero_grad()
        worst = max(worst, abs(got.item() - want.item()) / abs(want.item()))
        print(f"rank {rank} step {i}: loss {got.item():.6f} (eager {kind} {want.item():.6f}); "
              f"compiled here: {step.compiled_here}")
    dist.destroy_process_group()
    # bf16 on CUDA: Inductor fuses and rounds differently from eager, within bf16's precision
    if worst > (2e-2 if device == "cuda" else 1e-4):
        sys.exit(f"rank {rank}: the loss differs from eager {kind} by {worst:.2e} (relative)")


if __name__ == "__main__":
    main()
