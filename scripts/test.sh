#!/usr/bin/env bash
# Set up and run the whole test suite (what CI runs). CUDA-marked tests skip with a reason
# on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh .venv/bin/python  # chromium + playwright + jupyterlab, or a skip reason
export PRECOMPILE_NB_SCREENSHOTS="${PRECOMPILE_NB_SCREENSHOTS:-$(mktemp -d /tmp/precompile_nb_shots_XXXXXX)}"
# one inductor cache for the run (both legs), removed at the end when this script made it
# (~130 MB a run); a TORCHINDUCTOR_CACHE_DIR given from outside is kept
own_cache=""
if [ -z "${TORCHINDUCTOR_CACHE_DIR:-}" ]; then
  own_cache=$(mktemp -d /tmp/precompile_nb_ci_XXXXXX)
  export TORCHINDUCTOR_CACHE_DIR=$own_cache
fi
trap '[ -z "$own_cache" ] || rm -rf "$own_cache"' EXIT
# the torch 2.15 environment first (its install is the slow part), so a 2.15 break shows too
PY215=$(bash scripts/setup_torch215.sh)
echo "[test] screenshots go to $PRECOMPILE_NB_SCREENSHOTS (docs/screenshots/ is never rewritten)"
# The pipeline's tests (tests/core), the magic's, the zoo's Hugging Face cases and the tutorial
# notebooks on torch 2.15 run beside the main suite (one process each on the two cores; they
# share the inductor cache dir), their output kept for the end. The main suite: tests/ and the
# tutorial notebooks (nbval: contract cells compared, the rest executed) on the project's
# pinned torch, one line per test file with a running count, the JupyterLab tests saying what
# they wait for, the 15 slowest tests at the end.
LOG215=$(mktemp /tmp/precompile_nb_torch215_XXXXXX.log)
echo "[test] tests/core, the magic, the zoo and the notebooks on torch 2.15 ($PY215) run beside the main suite; their output: $LOG215"
"$PY215" -m pytest -p no:cacheprovider --durations=10 tests/core tests/test_magics.py tests/zoo \
  notebooks --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg >"$LOG215" 2>&1 &
pid215=$!
trap 'kill "$pid215" 2>/dev/null || true; [ -z "$own_cache" ] || rm -rf "$own_cache"' EXIT
status=0
.venv/bin/python -m pytest -p no:cacheprovider --durations=15 tests notebooks \
  --nbval-lax --nbval-sanitize-with notebooks/sanitize.cfg "$@" || status=$?
echo "[test] waiting for the torch 2.15 leg"
wait "$pid215" || status=$?
echo "[test] the torch 2.15 leg ($PY215):"
cat "$LOG215"
rm -f "$LOG215"  # printed above
exit $status
