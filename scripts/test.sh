#!/usr/bin/env bash
# Set up and run the whole test suite (what CI runs). CUDA-marked tests skip with a reason
# on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh .venv/bin/python  # chromium + playwright + jupyterlab, or a skip reason
export PRECOMPILE_NB_SCREENSHOTS="${PRECOMPILE_NB_SCREENSHOTS:-$(mktemp -d /tmp/precompile_nb_shots_XXXXXX)}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$(mktemp -d /tmp/precompile_nb_ci_XXXXXX)}"
# tests/ and the tutorial notebooks (nbval: contract cells compared, the rest executed); one
# line per test file with a running count, the JupyterLab tests say what they wait for, the
# 15 slowest tests at the end
echo "[test] screenshots go to $PRECOMPILE_NB_SCREENSHOTS (docs/screenshots/ is never rewritten)"
exec .venv/bin/python -m pytest -p no:cacheprovider --durations=15 tests notebooks \
  --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg "$@"
