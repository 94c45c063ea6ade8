"""Shared test setup: one inductor cache dir per test run (CI budget), quiet load warnings,
and a helper that runs code in a fresh Python process."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import textwrap
import warnings

import pytest

# One shared compiler cache for the whole run (set before torch._inductor reads it).
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                      tempfile.mkdtemp(prefix="precompile_nb_test_inductor_"))

cuda = pytest.mark.cuda


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run `pytest -m cuda` on the GPU machine")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def lowering_afresh(monkeypatch):
    """Every precompile in the test runs Inductor, whatever an earlier test lowered: for tests
    that watch or change what happens inside a lowering (Note [a lowering made once] takes an
    unchanged graph's lowering whole, so those would watch nothing)."""
    monkeypatch.setenv("PRECOMPILE_NB_LOWERING_REUSE", "0")


@pytest.fixture(autouse=True)
def _quiet_load_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="precompile.load executes")
        yield


def run_fresh(code: str, *, env: dict | None = None, timeout: int = 600,
              cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter; returns the completed process (check=False)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def run_threads(n: int, target) -> list[BaseException]:
    """Run target(i) in n threads released together; the exceptions they raised."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            target(i)
        except BaseException as e:  # collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors
