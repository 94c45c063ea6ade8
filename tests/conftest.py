"""Shared test setup: one inductor cache dir per test run (CI budget), quiet load warnings,
and a helper that runs code in a fresh Python process."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
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
