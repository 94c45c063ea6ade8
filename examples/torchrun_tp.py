"""A tensor-parallel training step, precompiled on rank 0 and run on every rank.

    torchrun --nproc-per-node 2 examples/torchrun_tp.py          # CPU (gloo) or CUDA (NCCL)

What it shows: a model sharded with torch.distributed's tensor parallelism
(`parallelize_module`, ColwiseParallel / RowwiseParallel), a training step with `.backward()`
captured whole (the TP collectives run inside the compiled graph), compiled once on rank 0
(`precompile_on_one_rank`) and loaded by every other rank from the pair it receives, then
three SGD steps that match eager TP on every rank.
"""
import os

# every rank sees its own GPU as cuda:0, so rank 0's kernels fit every rank
os.environ.setdefault("CUDA_VISIBLE_DEVICES", os.environ.get("LOCAL_RANK", "0"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.tensor import init_device_mesh  # noqa: E402
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,  # noqa: E402
                                               parallelize_module)

from precompile_nb.distributed import precompile_on_one_rank  # noqa: E402


class MLP(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def train_step(model, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    return loss.detach()


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    torch.manual_seed(0)  # the same initial weights on every rank, sharded by the plan
    model = parallelize_module(MLP().to(device), mesh, plan)
    torch.manual_seed(0)
    eager = parallelize_module(MLP().to(device), mesh, dict(plan))
    x = torch.randn(8, 64, device=device)

    step = precompile_on_one_rank(train_step, model, x)  # rank 0 compiles, others load
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager)]
    for i in range(3):
        got, want = step(model, x), train_step(eager, x)
        for opt in opts:
            opt.step()
            opt.zero_grad()
        print(f"rank {dist.get_rank()} step {i}: loss {got.item():.6f} (eager TP "
              f"{want.item():.6f}); compiled here: {step.compiled_here}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
