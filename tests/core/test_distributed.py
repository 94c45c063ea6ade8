"""torch.distributed on CPU: gloo ranks on 127.0.0.1 (a job of 2, and one of 4), spawned here
and always ended.

Tensor parallelism (parallelize_module) trained through the artifact matches eager TP on every
rank; the ranks agree whether to autotune a CUDA graph with collectives together (scenario
tune_together); compile on one rank, load on the others (which compile nothing); FSDP2
(fully_shard) and DDP training steps of a tiny transformer match eager FSDP2 / DDP over 3
optimizer steps on both ranks, both backends (what stays refused: tests/core/test_dtensor.py);
an artifact made in this 2-rank job refuses to run in a job of 1 rank; in the 4-rank job, FSDP2
over tensor parallelism on a (dp=2, tp=2) mesh matches eager FSDP2 + TP (eager backend:
Inductor's collectives are covered by the 2-rank job). The ranks run tests/core/dist_child.py
once per job for all its scenarios (one process-group start-up), each scenario reported apart.
Cost: the Inductor compiles on one rank run two at a time, one on each rank
(dist_child.on_one_rank_each); the eager backend where the backend does not matter.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("dist_child.py")
SCENARIOS = ("tp", "data_parallel", "tune_together", "other_world")  # other_world ends it
TIMEOUT_S = 900  # the whole job on a 2-core CI machine; then every rank is killed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(world: int, out_dir: Path, scenarios: tuple[str, ...]) -> list[dict]:
    """Start `world` ranks of dist_child.py, wait (bounded), kill whatever is left. A job a
    rank of which died of a native crash (a signal: the rare crash seen in CI, cause unknown,
    Note [a native crash in the ranks]) runs once more, and the crash stays visible as a
    warning; a second crash, or any rank ending without its result, fails."""
    first = _run_job(world, out_dir / "try1", scenarios)
    if isinstance(first, list):
        return first
    warnings.warn(f"the {world}-rank job crashed and ran again: {first}", stacklevel=2)
    again = _run_job(world, out_dir / "try2", scenarios)
    if isinstance(again, list):
        return again
    pytest.fail(f"the {world}-rank job crashed twice:\n1st: {first}\n2nd: {again}")


# Note [a native crash in the ranks]
#   About one CI run in fifteen, a rank of the 2-rank job died in the middle of a scenario
#   of a signal, with no Python error (once with glibc's "malloc(): unaligned tcache chunk
#   detected", a heap corruption); 35 runs on the development machine never did. Every rank
#   now writes the scenario it is in and, on a native crash, every thread's Python stack to
#   files the report puts first, and such a job runs once more (a wrong result, a Python
#   error or a hang is never run again). The warning names the scenario and the stacks, so
#   the cause can be found.


def _run_job(world: int, out_dir: Path, scenarios: tuple[str, ...]) -> list[dict] | str:
    """The ranks' results, or a summary of a native crash (which rank, the signal, the
    scenario, the innermost stack lines)."""
    out_dir.mkdir(parents=True)
    port = str(_free_port())
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, str(CHILD), str(r), str(world), port,
                               str(out_dir), *scenarios], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=TIMEOUT_S)[0])
    except subprocess.TimeoutExpired:
        pytest.fail(f"the ranks ran past {TIMEOUT_S} s and were killed")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    crashed = [r for r, p in enumerate(procs) if p.returncode < 0]
    if crashed:
        return "; ".join(_crash(out_dir, r, procs[r].returncode) for r in crashed)
    results = []
    for r in range(world):
        path = out_dir / f"rank{r}.json"
        assert path.exists(), (f"rank {r} wrote no result (exit {procs[r].returncode}):\n"
                               f"{_read(out_dir / f'fault{r}.txt')[:4000]}\n"
                               f"{logs[r][-12000:]}")
        results.append(json.loads(path.read_text()))
    return results


def _crash(out_dir: Path, rank: int, returncode: int) -> str:
    scenario = _read(out_dir / f"progress{rank}.txt") or "?"
    stacks = _read(out_dir / f"fault{rank}.txt")
    return (f"rank {rank} died of signal {-returncode} in scenario {scenario}:\n"
            + "\n".join(stacks.splitlines()[:60]))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> list[dict]:
    results = run_ranks(2, tmp_path_factory.mktemp("dist"), SCENARIOS)
    print("seconds per scenario, per rank:", [r.get("seconds") for r in results],
          [r.get("data_parallel", {}).get("seconds") for r in results])  # -s
    return results


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory) -> list[dict]:
    return run_ranks(4, tmp_path_factory.mktemp("dist4"), ("fsdp2_tp",))


def _scenario(results: list[dict], name: str) -> list[dict]:
    out = []
    for r, res in enumerate(results):
        got = res[name]
        assert "crashed" not in got, f"rank {r}: {got.get('crashed')}\n{got.get('traceback')}"
        out.append(got)
    return out


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_tensor_parallel_training_matches_eager_tp_on_every_rank(two_ranks, backend):
    for r, res in enumerate(_scenario(two_ranks, "tp")):
        got = res[backend]
        for step, (loss, want) in enumerate(got["losses"]):
            assert loss == pytest.approx(want, rel=1e-5, abs=1e-6), (r, step)
        assert got["weights"] < 1e-5, f"rank {r}: weights drift from eager TP"
        assert got["grad_types"] == ["DTensor"]
        if backend == "eager":  # capture's graph, the same for both backends
            assert got["collective_nodes"] >= 2  # the report's graph marks them
        assert got["collectives"] >= 1  # the TP collectives run inside the graph


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_a_sharded_dtensor_input_returns_the_dtensor_eager_returns(two_ranks, backend):
    for res in _scenario(two_ranks, "tp"):
        got = res[backend]["dtensor_input"]
        assert got["type"] == "DTensor"
        assert got["placements"] == ["S(0)"]
        assert got["diff"] < 1e-5


def _src_and_other(results: list[dict]) -> tuple[dict, dict]:
    """(the compiling rank's result, the other's): each case names its src rank."""
    src = results[0]["src"]
    assert src in (0, 1) and results[1]["src"] == src
    return results[src], results[1 - src]


@pytest.mark.parametrize("via", ["group", "directory"])  # compiled on rank 0, on rank 1
def test_one_rank_compiles_and_the_other_loads_compiling_nothing(two_ranks, via):
    """Inductor; through the group: the TP training step; through a directory: the
    DTensor-input fn (scenario tp's inductor artifacts)."""
    results = [res["one_rank"][via] for res in _scenario(two_ranks, "tp")]
    assert results[0]["src"] == (0 if via == "group" else 1)
    compiler, loader = _src_and_other(results)
    assert compiler["compiled_here"] and compiler["captures"] == 1
    assert not loader["compiled_here"]
    assert loader["captures"] == 0 and loader["cpp_builds"] == 0
    for res in results:
        assert res["diff"] < 1e-5 and res.get("grads", 0.0) < 1e-5


def test_ranks_tune_a_graph_with_collectives_only_when_every_rank_agrees(two_ranks):
    """Note [every rank tunes a graph with collectives together]: either every rank runs the
    graph to tune it, or none does, and a rank that does not says why."""
    got = _scenario(two_ranks, "tune_together")
    assert got[0]["signature"] == got[1]["signature"]
    assert "all_reduce" in got[0]["signature"] and "tensor(3, 5)" in got[0]["signature"]
    assert got[0]["plain"] == ""
    assert [r["together"] for r in got] == [None, None]  # both came: both tune
    assert "rank(s) 1 did not reach this graph within 2 s" in got[0]["alone"]
    assert all("did not reach this graph" in r["apart"] for r in got)  # other collectives
    assert "rank(s) 1 did not reach" in got[0]["late"]  # rank 0 stopped waiting ...
    assert "rank(s) 0 stopped waiting" in got[1]["late"]  # ... so rank 1 does not tune
    assert all("precompile_on_one_rank" in r["one_rank"] for r in got)
    assert all("PRECOMPILE_NB_TUNE_TOGETHER=0" in r["off"] for r in got)
    assert got[0]["vain"] == ["precompile on rank 0: rank(s) 1 did not reach this graph within "
                              "1 s, so no rank ran its collectives to tune it (PRECOMPILE_NB_"
                              "TUNE_TOGETHER sets the wait); the load autotunes it at its first "
                              "call"]


DATA_PARALLEL = ["ddp_eager", "fsdp2_eager_bf16", "ddp_inductor", "fsdp2_inductor"]


@pytest.mark.parametrize("case", DATA_PARALLEL)
def test_data_parallel_training_matches_eager_fsdp2_and_ddp_on_both_ranks(two_ranks, case):
    exact = case.endswith("eager") or case.endswith("bf16")  # the same ops, in eager's order
    results = [res[case] for res in _scenario(two_ranks, "data_parallel")]
    for r, got in enumerate(results):
        for step, (loss, want) in enumerate(got["losses"]):
            assert loss == pytest.approx(want, rel=1e-6 if exact else 1e-5), (r, step)
        assert max(got["grads"]) < (1e-6 if exact else 1e-5), f"rank {r}: grads differ"
        assert got["weights"] < (1e-6 if exact else 1e-5), f"rank {r}: weights drift"
        ops = " ".join(got["collectives"])  # Inductor writes in-place and _out variants
        if case.startswith("fsdp2"):  # the gradients land sharded, as eager FSDP2 leaves them
            assert got["param"] == ["DTensor", ["S(0)"]]
            assert "all_gather_into_tensor" in ops and "reduce_scatter_tensor" in ops
        else:
            assert got["param"] == ["Parameter", []]
            assert "all_reduce" in ops
    assert results[0]["losses"] != results[1]["losses"]  # each rank trained on its own batch
    if case == "ddp_eager":  # bucket_cap_mb=0.05: the gradients in more than one bucket
        assert results[0]["all_reduces"] >= 3


@pytest.mark.parametrize("case", ["ddp_inductor", "fsdp2_inductor"])  # on rank 0, on rank 1
def test_data_parallel_compiled_on_one_rank_compiles_nothing_on_the_other(two_ranks, case):
    results = [res[case] for res in _scenario(two_ranks, "data_parallel")]
    assert results[0]["src"] == (0 if case == "ddp_inductor" else 1)
    compiler, loader = _src_and_other(results)
    assert compiler["compiled_here"] and compiler["captures"] == 1
    assert not loader["compiled_here"]
    assert loader["captures"] == 0 and loader["cpp_builds"] == 0


def test_an_unevenly_sharded_model_compiled_on_one_rank_is_refused_on_every_rank(two_ranks):
    for res in _scenario(two_ranks, "data_parallel"):  # FSDP2, vocabulary 61 on 2 ranks
        got = res["uneven_one_rank"]
        assert got["error"] == "PrecompileError" and got["invariant"] == 6
        assert "unevenly" in got["text"] and "precompile on every rank" in got["text"]


def test_an_artifact_made_in_a_2_rank_job_refuses_to_run_in_a_job_of_1_rank(two_ranks):
    """Its collectives average over the 2 ranks they were made for: called in a job of 1 rank
    it would halve every gradient, silently; its first call refuses instead."""
    for res in _scenario(two_ranks, "other_world"):
        got = res["ddp"]
        assert got["error"] == "PrecompileError" and got["invariant"] == 6, got
        assert "process group of 2 ranks (a job of 2)" in got["text"]
        assert "this job's has 1" in got["text"]
        assert "precompile_on_one_rank" in got["text"]
        assert all(res["grads"])  # refused before anything ran: no gradient written
        for case in ("ddp_eager", "fsdp2_eager", "ddp_inductor", "fsdp2_inductor"):
            assert [(g["size"], g["world"]) for g in res["groups"][case]] == [(2, 2)], case


def test_fsdp2_over_tensor_parallelism_on_a_2d_mesh_matches_eager_on_every_rank(four_ranks):
    """fully_shard on "dp" of parameters tensor parallelism made DTensors on "tp": FSDP2's
    strided shards (_StridedShard) all-gathered on dp only, the gradients averaged over dp and
    landing on those strided shards; the eager backend gives eager's values bit for bit."""
    results = _scenario(four_ranks, "fsdp2_tp")
    for r, got in enumerate(results):
        for step, (loss, want) in enumerate(got["losses"]):
            assert loss == want, (r, step)
        assert max(got["grads"]) == 0 and got["weights"] == 0, f"rank {r}"
        assert got["placements"]["up.weight"] == ["_S(0, 2)", "S(0)"]  # _StridedShard(0, split_factor=2)
        assert got["placements"]["down.weight"] == ["S(0)", "S(1)"]
        ours, eager = got["grad_placements"]
        assert ours == eager
        assert "all_gather_into_tensor" in " ".join(got["collectives"])
        assert sorted(got["groups"]) == [[2, 4], [2, 4]]  # the dp and the tp group
    by_dp = {got["dp_rank"]: got["losses"] for got in results}
    assert len(by_dp) == 2 and by_dp[0] != by_dp[1]  # each dp rank trained on its own batch


@pytest.mark.cuda
@pytest.mark.parametrize("wrapper", ["fsdp2", "ddp"])
def test_cuda_two_gpus_torchrun_example_matches_eager(wrapper):
    """examples/torchrun_fsdp.py on 2 GPUs with NCCL (bf16 FSDP2 / DDP, inductor, compiled
    on rank 0); it exits non-zero where a loss differs from eager's."""
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    root = Path(__file__).parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get(
        "PYTHONPATH", "")]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), str(root / "examples" / "torchrun_fsdp.py")]
    done = subprocess.run(cmd + (["--ddp"] if wrapper == "ddp" else []), env=env, cwd=root,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("compiled here: False") == 3  # rank 1's three steps
