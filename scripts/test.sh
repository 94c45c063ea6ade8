#!/usr/bin/env bash
# Set up and run the whole test suite (what CI runs). CUDA-marked tests skip with a reason
# on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh .venv/bin/python  # chromium + playwright + jupyterlab, or a skip reason
export PRECOMPILE_NB_SCREENSHOTS="${PRECOMPILE_NB_SCREENSHOTS:-$(mktemp -d /tmp/precompile_nb_shots_XXXXXX)}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$(mktemp -d /tmp/precompile_nb_ci_XXXXXX)}"
# the torch 2.15 environment first (its install is the slow part), so a 2.15 break shows too
PY215=$(bash scripts/setup_torch215.sh)
echo "[test] screenshots go to $PRECOMPILE_NB_SCREENSHOTS (docs/screenshots/ is never rewritten)"
# tests/ and the tutorial notebooks (nbval: contract cells compared, the rest executed) on the
# project's pinned torch: one line per test file with a running count, the JupyterLab tests
# say what they wait for, the 15 slowest tests at the end; then the pipeline's tests
# (tests/core) on torch 2.15
status=0
.venv/bin/python -m pytest -p no:cacheprovider --durations=15 tests notebooks \
  --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg "$@" || status=$?
echo "[test] the pipeline's tests on torch 2.15 ($PY215)"
"$PY215" -m pytest -p no:cacheprovider --durations=10 tests/core || status=$?
exit $status
