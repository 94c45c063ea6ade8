"""One rank of the torch.distributed tests (gloo on 127.0.0.1, CPU), started by
tests/core/test_distributed.py: python dist_child.py RANK WORLD PORT OUT_DIR SCENARIO...

Each scenario runs in turn on every rank and writes what it saw into OUT_DIR/rank{R}.json:
  tp          a tensor-parallel MLP (ColwiseParallel / RowwiseParallel) training step with
              .backward() and SGD, 3 steps, artifact vs eager TP, inductor and eager backends;
              and a DTensor input (Shard(0)) through a distribute_module Linear
  one_rank    precompile_on_one_rank through the process group and through a directory;
              how many captures and C++ builds each rank ran
  fsdp2       fully_shard: refused at capture with a PrecompileError on every rank
The parent kills the ranks when they run past its timeout.
"""
import json
import os
import sys
import traceback
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

rank, world, port, out_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
scenarios = sys.argv[5:]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
dist.init_process_group("gloo", rank=rank, world_size=world)

from torch.distributed.tensor import Shard, distribute_module, distribute_tensor  # noqa: E402
from torch.distributed.tensor import init_device_mesh  # noqa: E402
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,  # noqa: E402
                                               parallelize_module)

import precompile_nb.core as core_mod  # noqa: E402
from precompile_nb import PrecompileError, precompile  # noqa: E402
from precompile_nb.distributed import precompile_on_one_rank  # noqa: E402

mesh = init_device_mesh("cpu", (world,))
counts = {"captures": 0, "cpp_builds": 0}
_capture = core_mod.capture  # the stage function build() calls


def _counting_capture(*a, **k):
    counts["captures"] += 1
    return _capture(*a, **k)


core_mod.capture = _counting_capture
from torch._inductor import cpp_builder  # noqa: E402

_build = cpp_builder.CppBuilder.build


def _counting_build(self):
    counts["cpp_builds"] += 1
    return _build(self)


cpp_builder.CppBuilder.build = _counting_build


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def train_step(m, x):
    loss = m(x).pow(2).mean()
    loss.backward()
    return loss.detach()


def tp_pair():
    torch.manual_seed(0)
    m, ref = MLP(), MLP()
    ref.load_state_dict(m.state_dict())
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    return parallelize_module(m, mesh, plan), parallelize_module(ref, mesh, dict(plan))


def max_diff(a, b):
    full = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    return float((full(a) - full(b)).abs().max())


def scenario_tp():
    out = {}
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    for backend in ("inductor", "eager"):
        m, ref = tp_pair()
        art = core_mod.build(train_step, m, x, backend=backend)
        code, cache = art.python_code, art.cache
        f = precompile.load(code, cache)
        opt, opt_ref = (torch.optim.SGD(mm.parameters(), lr=0.1) for mm in (m, ref))
        losses = []
        for _ in range(3):
            got, want = f(m, x), train_step(ref, x)
            losses.append([float(got), float(want)])
            opt.step(), opt_ref.step(), opt.zero_grad(), opt_ref.zero_grad()
        out[backend] = {
            "losses": losses,
            "weights": max(max_diff(a, b) for a, b in zip(m.parameters(), ref.parameters())),
            "grad_types": sorted({type(p).__name__ for p in m.parameters()}),
            "collective_nodes": sum(n.role == "collective" for n in art.captured.nodes),
            "collectives": sum("_c10d_functional" in ln for ln in code.splitlines()
                               if not ln.lstrip().startswith("#")),
        }
        # a DTensor input sharded on the batch through a replicated Linear
        torch.manual_seed(2)
        lin = distribute_module(nn.Linear(16, 8), mesh)
        xs = distribute_tensor(torch.randn(8, 16, generator=torch.Generator().manual_seed(3)),
                               mesh, [Shard(0)])
        code, cache = precompile(lambda m, x: m(x).relu(), lin, xs, backend=backend)
        g = precompile.load(code, cache)
        y = g(lin, xs)
        out[backend]["dtensor_input"] = {
            "type": type(y).__name__, "placements": [str(p) for p in y.placements],
            "diff": max_diff(y, lin(xs).relu())}
    return out


def scenario_one_rank():
    out = {}
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    for via in ("group", "directory"):
        m, ref = tp_pair()
        before = dict(counts)
        directory = os.path.join(out_dir, "shared") if via == "directory" else None
        shared = precompile_on_one_rank(train_step, m, x, directory=directory, name="step")
        loss = shared(m, x)
        out[via] = {"compiled_here": shared.compiled_here,
                    "captures": counts["captures"] - before["captures"],
                    "cpp_builds": counts["cpp_builds"] - before["cpp_builds"],
                    "diff": max_diff(loss, train_step(ref, x)),
                    "grads": max(max_diff(a.grad, b.grad)
                                 for a, b in zip(m.parameters(), ref.parameters()))}
    return out


def scenario_fsdp2():
    from torch.distributed.fsdp import fully_shard
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    fully_shard(m[0], mesh=mesh)
    fully_shard(m, mesh=mesh)
    try:
        precompile(train_step, m, torch.randn(4, 16))
    except PrecompileError as e:
        return {"error": type(e).__name__, "invariant": e.invariant, "where": e.where,
                "text": str(e)}
    return {"error": None}


results = {}
for name in scenarios:
    try:
        results[name] = globals()[f"scenario_{name}"]()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the test
        results[name] = {"crashed": f"{type(e).__name__}: {e}",
                         "traceback": traceback.format_exc()[-3000:]}
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
    json.dump(results, fh)
dist.barrier()
os._exit(0)  # skip process-group teardown: FSDP2's state can abort it, and nothing is left
