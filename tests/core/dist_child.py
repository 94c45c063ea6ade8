"""One rank of the torch.distributed tests (gloo on 127.0.0.1, CPU), started by
tests/core/test_distributed.py: python dist_child.py RANK WORLD PORT OUT_DIR SCENARIO...

Each scenario runs in turn on every rank and writes what it saw into OUT_DIR/rank{R}.json:
  tp          a tensor-parallel MLP (ColwiseParallel / RowwiseParallel) training step with
              .backward() and SGD, 3 steps, artifact vs eager TP, inductor and eager backends;
              and a DTensor input (Shard(0)) through a distribute_module Linear; the
              inductor ones through precompile_on_one_rank (its "one_rank" part): the TP
              step through the process group from rank 0, the DTensor-input fn through a
              directory from rank 1, at once; how many captures and C++ builds each ran
  data_parallel  a tiny transformer (d=32; 2 blocks, 1 for Inductor) trained 3 SGD steps
              with FSDP2 (fully_shard per block and at the root) and with DDP, artifact vs
              eager, each rank on its own batch: eager backend precompiled on every rank
              (FSDP2 with a bf16 / fp32-reduce mixed precision policy), inductor through
              precompile_on_one_rank, DDP's from rank 0 and FSDP2's from rank 1 at once
              (what stays refused: tests/core/test_dtensor.py)
  tune_together  the ranks' meeting before a CUDA graph with collectives is autotuned
              (core/tune_together.py): together, one rank alone, other graphs, a rank
              that stopped waiting just before the other came, on one rank, switched off
  other_world the DDP artifact above called in a job of 1 rank (last: it ends the 2-rank job)
  fsdp2_tp    (4 ranks) FSDP2 on the "dp" dim of a (2, 2) mesh over tensor parallelism on
              "tp", 3 SGD steps, artifact (eager backend) vs eager FSDP2 + TP
The parent kills the ranks when they run past its timeout.
"""
import faulthandler
import importlib
import json
import os
import sys
import threading
import time
import traceback
import warnings

warnings.simplefilter("ignore")
# a native crash writes every thread's Python stack to OUT_DIR/fault{RANK}.txt, which the
# parent puts first in its report (a CI log shows the end of a long one only)
_FAULTS = open(os.path.join(sys.argv[4], f"fault{sys.argv[1]}.txt"), "w")  # noqa: SIM115
faulthandler.enable(file=_FAULTS, all_threads=True)
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
_GROUPS = []  # the groups on_one_rank_each made, each quiesced before the job is torn down
_tls = threading.local()  # what each thread compiled (two compile at once: on_one_rank_each)


def tally():
    """This thread's counts of captures and C++ builds."""
    if not hasattr(_tls, "counts"):
        _tls.counts = {"captures": 0, "cpp_builds": 0}
    return _tls.counts


_stage = importlib.import_module("precompile_nb.core.capture")  # build() imports its capture
_capture = _stage.capture  # the stage function build() calls


def _counting_capture(*a, **k):
    tally()["captures"] += 1
    return _capture(*a, **k)


_stage.capture = _counting_capture
from torch._inductor import cpp_builder  # noqa: E402

_build = cpp_builder.CppBuilder.build


def _counting_build(self):
    tally()["cpp_builds"] += 1
    return _build(self)


cpp_builder.CppBuilder.build = _counting_build


def on_one_rank_each(jobs):
    """jobs: case -> (src, fn, example_inputs, options). Each case through
    precompile_on_one_rank on rank src, over a process group of its own, all cases at once
    (one thread each), so that rank 0 and rank 1 compile at the same time. case ->
    (SharedArtifact, what this thread compiled: captures, cpp_builds)."""
    groups = {case: dist.new_group(backend="gloo") for case in jobs}  # in order, every rank
    _GROUPS.extend(groups.values())
    out = {}

    def run(case, src, fn, inputs, options):
        before = dict(tally())
        try:
            f = precompile_on_one_rank(fn, *inputs, src=src, group=groups[case], **options)
            out[case] = f, {k: tally()[k] - before[k] for k in before}
        except BaseException as e:  # noqa: BLE001 - raised in the main thread below
            out[case] = e

    threads = [threading.Thread(target=run, args=(case, *job), daemon=True)
               for case, job in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()  # the parent's timeout ends a rank that hangs here
    for case in jobs:
        if isinstance(out[case], BaseException):
            raise out[case]
    return out


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


def relu_linear(m, x):
    return m(x).relu()


def dtensor_input_pair():
    """A replicated Linear and a DTensor input sharded on the batch (Shard(0))."""
    torch.manual_seed(2)
    lin = distribute_module(nn.Linear(16, 8), mesh)
    xs = distribute_tensor(torch.randn(8, 16, generator=torch.Generator().manual_seed(3)),
                           mesh, [Shard(0)])
    return lin, xs


def tp_train(m, ref, f, code, x):
    """3 steps of the artifact `f` against eager TP."""
    opt, opt_ref = (torch.optim.SGD(mm.parameters(), lr=0.1) for mm in (m, ref))
    losses, first = [], None
    for _ in range(3):
        got, want = f(m, x), train_step(ref, x)
        losses.append([float(got), float(want)])
        if first is None:  # the first call's loss and gradients, for scenario one_rank
            first = {"diff": max_diff(got, want), "grads": max(
                max_diff(a.grad, b.grad) for a, b in zip(m.parameters(), ref.parameters()))}
        opt.step(), opt_ref.step(), opt.zero_grad(), opt_ref.zero_grad()
    return {"losses": losses,
            "weights": max(max_diff(a, b) for a, b in zip(m.parameters(), ref.parameters())),
            "grad_types": sorted({type(p).__name__ for p in m.parameters()}),
            "collectives": sum("_c10d_functional" in ln for ln in code.splitlines()
                               if not ln.lstrip().startswith("#"))}, first


def dtensor_input_result(g, lin, xs):
    y = g(lin, xs)
    return {"type": type(y).__name__, "placements": [str(p) for p in y.placements],
            "diff": max_diff(y, lin(xs).relu())}


def scenario_tp():
    """Tensor parallelism and a DTensor input. Eager backend precompiled on every rank;
    Inductor through precompile_on_one_rank, the TP step through the process group on rank
    0 while the DTensor-input fn goes through a directory from rank 1, at once: what
    scenario one_rank reads (each compiled on one rank, loaded on the other)."""
    out = {}
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    m, ref = tp_pair()
    art = core_mod.build(train_step, m, x, backend="eager")
    out["eager"], _ = tp_train(m, ref, precompile.load(art.python_code, art.cache),
                               art.python_code, x)
    # the report's graph marks the collectives (capture's graph: the same for every backend)
    out["eager"]["collective_nodes"] = sum(n.role == "collective" for n in art.captured.nodes)
    lin, xs = dtensor_input_pair()
    out["eager"]["dtensor_input"] = dtensor_input_result(
        precompile.load(*precompile(relu_linear, lin, xs, backend="eager")), lin, xs)
    (m, ref), (lin, xs) = tp_pair(), dtensor_input_pair()
    shared = on_one_rank_each({
        "group": (0, train_step, (m, x), {"backend": "inductor"}),
        "directory": (1, relu_linear, (lin, xs), {
            "backend": "inductor", "directory": os.path.join(out_dir, "shared"),
            "name": "relu_linear"})})
    f, compiled = shared["group"]
    out["inductor"], first = tp_train(m, ref, f, f.python_code, x)
    one_rank = {"group": {"compiled_here": f.compiled_here, "src": f.src, **compiled, **first}}
    g, compiled = shared["directory"]
    out["inductor"]["dtensor_input"] = dtensor_input_result(g, lin, xs)
    one_rank["directory"] = {"compiled_here": g.compiled_here, "src": g.src, **compiled,
                             "diff": out["inductor"]["dtensor_input"]["diff"]}
    out["one_rank"] = one_rank
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

    def __init__(self, vocab=61, d=32, blocks=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(blocks)])
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


def data_parallel(kind, mp=None, bucket_cap_mb=None, vocab=61, blocks=2):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    m = TinyLM(vocab, blocks=blocks)
    if kind == "ddp":
        return DDP(m) if bucket_cap_mb is None else DDP(m, bucket_cap_mb=bucket_cap_mb)
    policy = mp or MixedPrecisionPolicy()
    for b in m.blocks:
        fully_shard(b, mesh=mesh, mp_policy=policy)
    return fully_shard(m, mesh=mesh, mp_policy=policy)


def train_against_eager(kind, backend, mp=None, bucket_cap_mb=None):
    """3 SGD steps through the artifact, precompiled on every rank, and through eager
    FSDP2/DDP, each rank on its own batch (the vocabulary of 61 shards unevenly)."""
    m, ref = (data_parallel(kind, mp, bucket_cap_mb) for _ in range(2))
    tok = lm_batch(61)
    before = dict(tally())
    code, cache = precompile(lm_step, m, tok, backend=backend)
    compiled = {k: tally()[k] - before[k] for k in before}
    ARTIFACTS[f"{kind}_{backend}"] = code, cache
    return train(m, ref, precompile.load(code, cache), code, tok, compiled)


def lm_batch(vocab):
    return torch.randint(0, vocab, (4, 9), generator=torch.Generator().manual_seed(rank))


def train(m, ref, f, code, tok, compiled):
    """What the ranks saw over 3 SGD steps of the artifact `f` and of eager on `ref`."""
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
        "compiled_here": getattr(f, "compiled_here", True), "src": getattr(f, "src", rank),
        **compiled}


def scenario_data_parallel():
    """Eager backend precompiled on every rank; Inductor through precompile_on_one_rank, DDP's
    compiled on rank 0 while FSDP2's is compiled on rank 1 (a vocabulary of 64: even shards,
    one graph for both ranks; 1 block and the root: Inductor's C++ build is most of the
    job's time, and the blocks are alike)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    # 0.05 MB buckets: the tiny model's ~120 KB of gradients in 3 buckets, 3 all-reduces
    t0 = time.perf_counter()  # the parts' seconds, for people reading the job's cost
    out = {"ddp_eager": train_against_eager("ddp", "eager", bucket_cap_mb=0.05),
           "fsdp2_eager_bf16": train_against_eager("fsdp2", "eager", bf16)}
    t1 = time.perf_counter()
    models = {kind: [data_parallel(kind, vocab=64, blocks=1) for _ in range(2)]
              for kind in ("ddp", "fsdp2")}
    tok = lm_batch(64)
    shared = on_one_rank_each({
        f"{kind}_inductor": (src, lm_step, (models[kind][0], tok), {"backend": "inductor"})
        for kind, src in (("ddp", 0), ("fsdp2", 1))})
    for kind in ("ddp", "fsdp2"):
        f, compiled = shared[f"{kind}_inductor"]
        ARTIFACTS[f"{kind}_inductor"] = f.python_code, f.cache
        out[f"{kind}_inductor"] = train(*models[kind], f, f.python_code, tok, compiled)
    out["uneven_one_rank"] = refused(lambda: precompile_on_one_rank(
        lm_step, data_parallel("fsdp2"), torch.randint(0, 61, (4, 9)), backend="eager"))
    out["seconds"] = {"eager": round(t1 - t0, 1), "inductor": round(time.perf_counter() - t1, 1)}
    return out


def refused(call):
    try:
        call()
    except PrecompileError as e:
        return {"error": type(e).__name__, "invariant": e.invariant, "where": e.where,
                "text": str(e)}
    return {"error": None}


def scenario_fsdp2_tp():
    """4 ranks: FSDP2 (fully_shard on "dp") over tensor parallelism (on "tp") of the MLP, a
    (2, 2) mesh, 3 SGD steps through the artifact (eager backend) and through eager FSDP2 +
    TP, each dp rank on its own batch."""
    from torch.distributed.fsdp import fully_shard

    from precompile_nb.core.load import read_meta
    from precompile_nb.runtime.convention import decode
    mesh2d = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))

    def make():
        torch.manual_seed(0)
        m = parallelize_module(MLP(), mesh2d["tp"], {"up": ColwiseParallel(),
                                                    "down": RowwiseParallel()})
        return fully_shard(m, mesh=mesh2d["dp"])

    m, ref = make(), make()
    dp_rank = mesh2d["dp"].get_local_rank()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(dp_rank))
    code, cache = precompile(train_step, m, x, backend="eager")
    f = precompile.load(code, cache)
    opt, opt_ref = (torch.optim.SGD(mm.parameters(), lr=0.1) for mm in (m, ref))
    losses, grads = [], []
    for _ in range(3):
        got, want = f(m, x), train_step(ref, x)
        losses.append([float(got), float(want)])
        grads.append(max(max_diff(a.grad, b.grad)
                         for a, b in zip(m.parameters(), ref.parameters())))
        opt.step(), opt_ref.step(), opt.zero_grad(), opt_ref.zero_grad()
    f(m, x)  # the gradients as they land, against eager FSDP2's
    train_step(ref, x)
    return {"losses": losses, "grads": grads, "dp_rank": dp_rank,
            "weights": max(max_diff(a, b) for a, b in zip(m.parameters(), ref.parameters())),
            "placements": {n: [str(q) for q in p.placements] for n, p in m.named_parameters()},
            "grad_placements": [[[str(q) for q in p.grad.placements] for p in mm.parameters()]
                                for mm in (m, ref)],
            "collectives": sorted({ln.split("_c10d_functional.")[1].split("(")[0].split(".")[0]
                                   for ln in code.splitlines() if "_c10d_functional." in ln
                                   and not ln.lstrip().startswith("#")}),
            "groups": [(g.size, g.world) for g in decode(read_meta(code)).process_groups]}


def scenario_tune_together():
    """Note [every rank tunes a graph with collectives together]: what each rank decides
    (the tuning run itself needs CUDA kernels: tests/core/test_dtensor.py)."""
    import torch.distributed._functional_collectives as funcol
    from torch.fx.experimental.proxy_tensor import make_fx

    from precompile_nb.core import _compat
    from precompile_nb.core import tune_together as tt

    def reduced(t):
        return funcol.wait_tensor(funcol.all_reduce(t * 2, "sum", dist.group.WORLD))

    sig = tt.collectives_signature(make_fx(reduced)(torch.ones(3, 5)))
    with warnings.catch_warnings(record=True) as said:  # a wait in vain is said
        warnings.simplefilter("always")
        vain = tt.why_not_together(sig + " only on rank 0", 1.0) if rank == 0 else None
    dist.barrier()
    out = {"signature": sig, "plain": tt.collectives_signature(make_fx(torch.sin)(
        torch.ones(3))), "together": tt.why_not_together(sig, 60.0)}
    _, _, store = _compat.job_store()
    dist.barrier()
    out["alone"] = tt.rendezvous(store, rank, world, "t/alone", 2.0) if rank == 0 else None
    dist.barrier()
    out["apart"] = tt.rendezvous(store, rank, world, f"t/apart{rank}", 2.0)
    dist.barrier()
    if rank == 1:  # comes once rank 0 stopped waiting (1 s) and said no; then sees both came
        store.wait(["t/late/verdict/0"])
    out["late"] = tt.rendezvous(store, rank, world, "t/late", 1.0 if rank == 0 else 30.0)
    dist.barrier()
    with tt.on_one_rank():
        out["one_rank"] = tt.why_not_together(sig, 60.0)
    out["off"] = tt.why_not_together(sig, 0.0)
    out["vain"] = [str(w.message) for w in said] if vain else []
    return out


def scenario_other_world():
    """The DDP artifact made above in this 2-rank job, loaded in a job of 1 rank (this
    process's job torn down and started again alone): its first call refuses, before the
    all-reduce would average over 1 rank what it divides by 2. Last: the 2-rank job is gone."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from precompile_nb.core.load import read_meta
    from precompile_nb.runtime.convention import decode
    groups = {k: [g.to_literal() for g in decode(read_meta(code)).process_groups]
              for k, (code, _) in ARTIFACTS.items()}
    code, cache = ARTIFACTS["ddp_eager"]
    # every rank's collectives finished before any tears its groups down: a gloo send can
    # still be in flight when the sending rank returns, and a teardown under it frees what
    # gloo's thread still uses (the suspected cause of a rank that died once in CI, torch
    # 2.15, with "malloc(): unaligned tcache chunk detected" and no Python error)
    for group in (*_GROUPS, None):
        dist.barrier(group=group)
    dist.destroy_process_group()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    torch.manual_seed(0)
    m = DDP(TinyLM())
    f = precompile.load(code, cache)
    tok = torch.randint(0, 61, (4, 9), generator=torch.Generator().manual_seed(rank))
    out = {"groups": groups, "ddp": refused(lambda: f(m, tok)),
           "grads": [p.grad is None for p in m.parameters()]}
    return out


results, seconds = {}, {}
ARTIFACTS = {}  # case -> (python_code, cache) of the data-parallel artifacts made above
for name in scenarios:
    with open(os.path.join(out_dir, f"progress{rank}.txt"), "w") as fh:
        fh.write(name)  # the scenario a native crash happened in, for the parent's report
    t0 = time.perf_counter()  # reported for people reading the job's cost, never asserted
    try:
        results[name] = globals()[f"scenario_{name}"]()
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the test
        results[name] = {"crashed": f"{type(e).__name__}: {e}",
                         "traceback": traceback.format_exc()[-3000:]}
    seconds[name] = round(time.perf_counter() - t0, 1)
results["seconds"] = seconds
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as fh:
    json.dump(results, fh)
dist.barrier()
os._exit(0)  # skip process-group teardown: FSDP2's state can abort it, and nothing is left
