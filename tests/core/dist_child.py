"""One rank of the torch.distributed tests (gloo on 127.0.0.1, CPU), started by
tests/core/test_distributed.py: python dist_child.py RANK WORLD PORT OUT_DIR SCENARIO...

Each scenario runs in turn on every rank and writes what it saw into OUT_DIR/rank{R}.json:
  tp          a tensor-parallel MLP (ColwiseParallel / RowwiseParallel) training step with
              .backward() and SGD, 3 steps, artifact vs eager TP, inductor and eager backends;
              and a DTensor input (Shard(0)) through a distribute_module Linear
  one_rank    precompile_on_one_rank through the process group and through a directory;
              how many captures and C++ builds each rank ran
  data_parallel  a tiny transformer (2 blocks, d=32) trained 3 SGD steps with FSDP2
              (fully_shard per block and at the root) and with DDP, artifact vs eager, each
              rank on its own batch: eager backend precompiled on every rank (FSDP2 with a
              bf16 / fp32-reduce mixed precision policy), inductor through
              precompile_on_one_rank (what stays refused: tests/core/test_dtensor.py)
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
import torch.nn.functional as F  # noqa: E402
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


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).unflatten(-1, (3, 2, -1)).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).flatten(2))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyLM(nn.Module):
    """2 blocks, d=32; a vocabulary of 61 shards unevenly over 2 ranks (31 + 30 rows)."""

    def __init__(self, vocab=61, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tok):
        x = self.emb(tok)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def lm_step(model, tok):
    logits = model(tok[:, :-1])
    loss = F.cross_entropy(logits.float().flatten(0, 1), tok[:, 1:].flatten())
    loss.backward()
    return loss.detach()


def data_parallel(kind, mp=None, bucket_cap_mb=None, vocab=61):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    m = TinyLM(vocab)
    if kind == "ddp":
        return DDP(m) if bucket_cap_mb is None else DDP(m, bucket_cap_mb=bucket_cap_mb)
    policy = mp or MixedPrecisionPolicy()
    for b in m.blocks:
        fully_shard(b, mesh=mesh, mp_policy=policy)
    return fully_shard(m, mesh=mesh, mp_policy=policy)


def train_against_eager(kind, backend, mp=None, one_rank=False, bucket_cap_mb=None):
    """3 SGD steps through the artifact and through eager FSDP2/DDP, each rank on its own
    batch; what the ranks saw, and (one_rank) what this rank compiled. Compiled on one rank,
    the vocabulary is 64 (even shards: one graph fits both ranks); else 61 (uneven)."""
    vocab = 64 if one_rank else 61
    m, ref = (data_parallel(kind, mp, bucket_cap_mb, vocab) for _ in range(2))
    tok = torch.randint(0, vocab, (4, 9), generator=torch.Generator().manual_seed(rank))
    before = dict(counts)
    if one_rank:
        f = precompile_on_one_rank(lm_step, m, tok, backend=backend)
        code = f.python_code
    else:
        code, cache = precompile(lm_step, m, tok, backend=backend)
        f = precompile.load(code, cache)
    compiled = {k: counts[k] - before[k] for k in counts}
    opt, opt_ref = (torch.optim.SGD(x.parameters(), lr=0.1) for x in (m, ref))
    losses, grads = [], []
    for _ in range(3):
        got, want = f(m, tok), lm_step(ref, tok)
        losses.append([float(got), float(want)])
        grads.append(max(max_diff(a.grad, b.grad)
                         for a, b in zip(m.parameters(), ref.parameters())))
        opt.step(), opt_ref.step(), opt.zero_grad(), opt_ref.zero_grad()
    p = next(iter(m.parameters()))
    return {
        "losses": losses, "grads": grads,
        "weights": max(max_diff(a, b) for a, b in zip(m.parameters(), ref.parameters())),
        "param": [type(p).__name__, [str(x) for x in getattr(p, "placements", ())]],
        "collectives": sorted({ln.split("_c10d_functional.")[1].split("(")[0].split(".")[0]
                               for ln in code.splitlines() if "_c10d_functional." in ln
                               and not ln.lstrip().startswith("#")}),
        "all_reduces": sum("_c10d_functional.all_reduce" in ln for ln in code.splitlines()
                           if not ln.lstrip().startswith("#")),
        "compiled_here": getattr(f, "compiled_here", True), **compiled}


def scenario_data_parallel():
    from torch.distributed.fsdp import MixedPrecisionPolicy
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    # 0.05 MB buckets: the tiny model's ~120 KB of gradients in 3 buckets, 3 all-reduces
    return {"ddp_eager": train_against_eager("ddp", "eager", bucket_cap_mb=0.05),
            "fsdp2_eager_bf16": train_against_eager("fsdp2", "eager", bf16),
            "ddp_inductor": train_against_eager("ddp", "inductor", one_rank=True),
            "fsdp2_inductor": train_against_eager("fsdp2", "inductor", one_rank=True),
            "uneven_one_rank": refused(lambda: precompile_on_one_rank(
                lm_step, data_parallel("fsdp2"), torch.randint(0, 61, (4, 9)),
                backend="eager"))}


def refused(call):
    try:
        call()
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
