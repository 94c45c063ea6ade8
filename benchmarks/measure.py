"""One measurement, in the fresh process `benchmarks/run.py` starts for it.

usage: python benchmarks/measure.py MODE WORKLOAD DEVICE WORKDIR [--rounds N]

A workload with dynamic dims (cnn_dynamic_infer) has them marked (mark_dynamic) as soon as it
is built, so before every compiler's capture, torch.compile's and both precompiles'.

The process is started with empty compiler caches (its own TMPDIR, TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR); WORKDIR holds what earlier measurements of the same workload saved
(artifacts, caches). Prints one line `@@BENCH@@ {json}` with the result.

Modes (the system measured, and what):
  eager            eager PyTorch: first call
  tc_cold          torch.compile: first call with empty caches (compile + run); saves
                   torch.compiler.save_cache_artifacts() for tc_warm
  tc_warm          torch.compile: load_cache_artifacts + first call in a new process
  nb_cold          precompile_nb: precompile(fn, *args); saves python_code and cache
  nb_load_cache    precompile_nb: precompile.load(code, cache) + first call
  nb_load_nocache  precompile_nb: precompile.load(code, None) + first call (compiles)
  steady           steady-state call time of eager, torch.compile (warm) and precompile_nb,
                   interleaved round by round; for inference workloads also the compiled
                   graph's own `call(args)` (graph only), so artifact - graph = driver
  ref_cold         torch >= 2.14's torch.compiler.precompile: precompile; saves the pair
  ref_load         torch.compiler.precompile.load(code, cache) + first call
  ref_steady       steady state of the reference's loaded callable, its inlined forward,
                   its graph's `call(args)` and eager, interleaved

With BENCH_STACKS=FILE set, tc_cold and nb_cold run their timed region under a wall-clock
stack sampler (stack_sampler.py) and write its samples to FILE (cold_timeline.py's children).

This file imports only torch (and precompile_nb for the nb modes), so the reference modes run
under another python (torch 2.14.1's venv) unchanged. Every timed region is between
time.perf_counter() calls, with torch.cuda.synchronize() before the clock stops on CUDA.
"""
from __future__ import annotations

import time

T_PROCESS = time.perf_counter()

import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402

T_TORCH = time.perf_counter() - T_PROCESS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gc_clock import GcClock  # noqa: E402
from workloads import build  # noqa: E402

MARK = "@@BENCH@@"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _grad_ctx(inference: bool):
    # Inference workloads run under no_grad for every system alike: every call, and the
    # capture of both precompiles too, so each system traces the graph it will run (eager
    # nn.TransformerEncoder takes its fused fast path only without grad).
    return torch.no_grad() if inference else contextlib.nullcontext()


def _first_call(f, w, device):
    """(seconds, result) of one call of f on the workload, synchronized."""
    t = time.perf_counter()
    with _grad_ctx(w.inference):
        out = f(*w.args)
    _sync(device)
    return time.perf_counter() - t, out


def _read(path: str, mode: str = "rb"):
    with open(path, mode) as fh:
        return fh.read()


def _write(path: str, data) -> None:
    with open(path, "w" if isinstance(data, str) else "wb") as fh:
        fh.write(data)


def _flat_inputs(w) -> list:
    """Graph inputs in the artifact's order: parameters then buffers of the model (tied
    ones once), then the tensor inputs. All workloads here take (model, *tensors)."""
    m = w.args[0]
    named = list(m.named_parameters()) + list(m.named_buffers())
    return [t for _, t in named] + list(w.args[1:])


def _steady(fns: dict, w, device: str, rounds: int, round_s: float) -> dict:
    """Per-call seconds of each callable (no arguments), measured in rounds that alternate
    between the callables so that a change of machine load hits all of them alike.
    Reports the median and the minimum over rounds (the minimum is the least disturbed)."""
    with _grad_ctx(w.inference):
        n = {}
        for k, f in fns.items():
            for _ in range(3):  # warm up (lazy init, allocator)
                f()
            _sync(device)
            t = time.perf_counter()
            f()
            _sync(device)
            n[k] = max(1, int(round_s / max(time.perf_counter() - t, 1e-7)))
        per_call = {k: [] for k in fns}
        for _ in range(rounds):
            for k, f in fns.items():
                t = time.perf_counter()
                for _ in range(n[k]):
                    f()
                _sync(device)
                per_call[k].append((time.perf_counter() - t) / n[k])
    return {k: {"median_s": statistics.median(v), "min_s": min(v), "calls_per_round": n[k],
                "rounds": rounds} for k, v in per_call.items()}


def _sampler():
    """cold_timeline.py's stack sampler over a cold mode's timed region, where BENCH_STACKS
    names the file for its samples (None otherwise)."""
    if not os.environ.get("BENCH_STACKS"):
        return None
    from stack_sampler import StackSampler

    return StackSampler().start()


def _sampled(sampler) -> None:
    if sampler is not None:
        sampler.stop().dump(os.environ["BENCH_STACKS"])


def _no_grad_loop(call, flat):
    """The graph alone: its `call` empties the list it gets, so pass a copy each time."""
    return lambda: call(flat[:])


def main(argv: list[str]) -> dict:
    mode, name, device, workdir = argv[:4]
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 30
    round_s = float(argv[argv.index("--round-s") + 1]) if "--round-s" in argv else 0.02
    warnings.simplefilter("ignore")
    w = build(name, device)
    w.mark_dynamic()  # before every capture (eager and the loads do not read the marks)
    res: dict = {"mode": mode, "torch": torch.__version__, "import_torch_s": T_TORCH,
                 "threads": torch.get_num_threads()}
    path = lambda f: os.path.join(workdir, f)  # noqa: E731

    if mode == "eager":
        with GcClock() as clock:
            res["first_call_s"], _ = _first_call(w.fn, w, device)
        res["gc_s"] = clock.s

    elif mode == "tc_cold":
        sampler = _sampler()
        with GcClock() as clock:
            t = time.perf_counter()
            compiled = torch.compile(w.fn)
            with _grad_ctx(w.inference):
                compiled(*w.args)
            _sync(device)
            res["first_call_s"] = time.perf_counter() - t
        res["gc_s"] = clock.s
        _sampled(sampler)
        saved = torch.compiler.save_cache_artifacts()
        if saved is not None:
            _write(path("tc_cache.bin"), saved[0])
            res["cache_bytes"] = len(saved[0])

    elif mode == "tc_warm":
        blob = _read(path("tc_cache.bin"))
        t = time.perf_counter()
        torch.compiler.load_cache_artifacts(blob)
        res["load_s"] = time.perf_counter() - t
        compiled = torch.compile(w.fn)
        with _grad_ctx(w.inference):
            compiled(*w.args)
        _sync(device)
        res["total_s"] = time.perf_counter() - t

    elif mode == "nb_cold":
        sampler = _sampler()
        with GcClock() as clock:
            t = time.perf_counter()
            from precompile_nb import precompile

            with _grad_ctx(w.inference):  # trace in the grad mode it will be called in
                code, cache = precompile(w.fn, *w.args)
            res["precompile_s"] = time.perf_counter() - t
        res["gc_s"] = clock.s
        _sampled(sampler)
        _write(path("nb.py"), code)
        _write(path("nb.cache"), cache)
        res["code_bytes"], res["cache_bytes"] = len(code), len(cache)

    elif mode in ("nb_load_cache", "nb_load_nocache"):
        code = _read(path("nb.py"), "r")
        cache = _read(path("nb.cache")) if mode == "nb_load_cache" else None
        with GcClock() as clock:
            t = time.perf_counter()
            from precompile_nb import precompile

            f = precompile.load(code, cache)
            res["load_s"] = time.perf_counter() - t
            res["first_call_s"], _ = _first_call(f, w, device)
            res["total_s"] = time.perf_counter() - t
        res["gc_s"] = clock.s
        res["load_stats"] = f.__precompile_load__

    elif mode == "steady":
        from precompile_nb import precompile
        from precompile_nb.core import _compat

        code = _read(path("nb.py"), "r")
        nb = precompile.load(code, _read(path("nb.cache")))
        if os.path.exists(path("tc_cache.bin")):
            torch.compiler.load_cache_artifacts(_read(path("tc_cache.bin")))
        tc = torch.compile(w.fn)
        args = w.args
        fns = {"eager": lambda: w.fn(*args), "torch.compile": lambda: tc(*args),
               "precompile_nb": lambda: nb(*args)}
        if w.inference and not w.dynamic:  # (a dynamic graph's call takes its sizes too)
            # the compiled graph alone: exec python_code again into our own namespace
            # (the kernels are on disk now; a cached load's settings: nothing compiles)
            ns: dict = {"__name__": "bench_graph_only"}
            with _compat.running_artifact(True):
                exec(compile(code, "<precompile_nb artifact>", "exec"), ns)  # noqa: S102
            fns["precompile_nb graph only"] = _no_grad_loop(ns["call"], _flat_inputs(w))
        res["steady"] = _steady(fns, w, device, rounds, round_s)

    elif mode.startswith("ref_"):
        pc = getattr(torch.compiler, "precompile", None)
        if pc is None:
            return {"mode": mode, "torch": torch.__version__,
                    "skipped": f"torch {torch.__version__} has no torch.compiler.precompile"}
        if mode == "ref_cold":
            t = time.perf_counter()
            with _grad_ctx(w.inference):
                code, cache = pc(w.fn, *w.args)
            res["precompile_s"] = time.perf_counter() - t
            _write(path("ref.py"), code)
            _write(path("ref.cache"), cache)
            res["code_bytes"], res["cache_bytes"] = len(code), len(cache)
        elif mode == "ref_load":
            code, cache = _read(path("ref.py"), "r"), _read(path("ref.cache"))
            t = time.perf_counter()
            f = pc.load(code, cache)
            res["load_s"] = time.perf_counter() - t
            res["first_call_s"], _ = _first_call(f, w, device)
            res["total_s"] = time.perf_counter() - t
        elif mode == "ref_steady":
            code, cache = _read(path("ref.py"), "r"), _read(path("ref.cache"))
            f = pc.load(code, cache)
            args = w.args
            fns = {"eager": lambda: w.fn(*args), "reference": lambda: f(*args)}
            if w.inference and not w.dynamic:
                ns = {"__name__": "_precompiled_artifact"}
                exec(compile(code, "<precompile>", "exec"), ns)  # noqa: S102
                fwd = ns["forward"]
                fns["reference forward"] = lambda: fwd(*args)
                fns["reference graph only"] = _no_grad_loop(ns["call"], _flat_inputs(w))
            res["steady"] = _steady(fns, w, device, rounds, round_s)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    res["process_s"] = time.perf_counter() - T_PROCESS
    return res


if __name__ == "__main__":
    out = main(sys.argv[1:])
    print(MARK, json.dumps(out), flush=True)
