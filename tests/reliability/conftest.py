"""Shared setup of the reliability tests: the artifacts they attack (one inductor pair per
session, it is the expensive one), forgers of caches, a snapshot of torch's process-global
state, the process's RSS, and the files a child process needs to load the artifacts.

The function every artifact here computes is `gather_double_relu(x, idx) = (x[idx] * 2).relu()`:
tiny, exact in float32 on both backends, and able to fail *inside* the graph (an index out of
range) as well as at the driver's checks (a wrong shape).
"""
from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from precompile_nb import precompile
from precompile_nb.core import _compat
from precompile_nb.core import cache as cache_mod

ROOT = Path(__file__).resolve().parents[2]


def gather_double_relu(x, idx):
    return (x[idx] * 2).relu()


def gather_triple_relu(x, idx):
    return (x[idx] * 3).relu()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The same example in every process (children rebuild it, nothing is pickled)."""
    g = torch.Generator().manual_seed(1234)
    return torch.randn(4, 4, generator=g), torch.tensor([0, 3, 1])


@dataclass(frozen=True)
class Pair:
    name: str
    python_code: str
    cache: bytes
    backend: str


@pytest.fixture(scope="session")
def eager_pair() -> Pair:
    code, cache = precompile(gather_double_relu, *example_inputs(), backend="eager")
    return Pair("eager", code, cache, "eager")


@pytest.fixture(scope="session")
def other_eager_pair() -> Pair:
    code, cache = precompile(gather_triple_relu, *example_inputs(), backend="eager")
    return Pair("eager_other", code, cache, "eager")


@pytest.fixture(scope="session")
def inductor_pair() -> Pair:
    """The session's one inductor compile (~20-40 s on 2 CPU cores)."""
    from torch._inductor import config

    # one compile worker: starting a worker pool (fresh interpreters importing torch) costs
    # more than it saves on one tiny graph; the kernels are the same
    with config.patch(compile_threads=1):
        code, cache = precompile(gather_double_relu, *example_inputs(), backend="inductor")
    return Pair("inductor", code, cache, "inductor")


@pytest.fixture(scope="session")
def pair_dir(tmp_path_factory, eager_pair, other_eager_pair, inductor_pair) -> Path:
    """NAME.py / NAME.cache of every session pair, for child processes."""
    d = tmp_path_factory.mktemp("pairs")
    for p in (eager_pair, other_eager_pair, inductor_pair):
        (d / f"{p.name}.py").write_text(p.python_code, encoding="utf-8")
        (d / f"{p.name}.cache").write_bytes(p.cache)
    return d


@contextlib.contextmanager
def torch_build_claimed(build: str) -> Iterator[None]:
    """Make pack() tag caches as if made by another torch build (restored on exit)."""
    real = _compat.torch_build_id
    _compat.torch_build_id = lambda: build
    try:
        yield
    finally:
        _compat.torch_build_id = real


def shipped_files(cache: bytes) -> list[tuple[str, str, bytes]]:
    """The verified (root, rel, bytes) a cache ships."""
    _, header = cache_mod.read_tag(cache)
    return cache_mod.read_files(cache, header)


def forge(python_code: str, backend: str, files=(), *, torch_build: str | None = None
          ) -> bytes:
    """A well-formed cache for `python_code` with the given backend / files / torch build."""
    if torch_build is None:
        return cache_mod.pack(python_code, backend, tuple(files))
    with torch_build_claimed(torch_build):
        return cache_mod.pack(python_code, backend, tuple(files))


def load_quietly(python_code: str, cache: bytes | None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return precompile.load(python_code, cache)


def global_state() -> dict[str, Any]:
    """Process-global torch state a call (or load) must leave as it found it."""
    from torch._inductor import config

    return {
        "grad_enabled": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
        "autocast_cpu_dtype": torch.get_autocast_dtype("cpu"),
        "autocast_cache": torch.is_autocast_cache_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "anomaly": torch.is_anomaly_enabled(),
        "num_threads": torch.get_num_threads(),
        "torch_function_modes": torch._C._len_torch_function_stack(),
        "torch_dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "rng_cpu": torch.get_rng_state().tolist(),
        "inductor_precompiled_headers": getattr(config, "cpp_cache_precompile_headers", None),
        "inductor_cache_dir_env": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    }


def rss_bytes() -> int | None:
    """Resident set size now (Linux /proc), None where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
