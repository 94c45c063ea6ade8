#!/usr/bin/env bash
# Set up and run the quickstart end to end: execute the quickstart notebook (%%precompile of a
# small model, its report) into a static HTML page you can open, then precompile, save and
# load a pair in a fresh process with empty compiler caches.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT_DIR="${PRECOMPILE_NB_OUT:-out}"
mkdir -p "$OUT_DIR"
echo "[quickstart] executing notebooks/01_quickstart.ipynb (an Inductor compile on CPU takes a while)..."
.venv/bin/python -m jupyter nbconvert --to html --execute \
  --ExecutePreprocessor.timeout=1200 --output-dir "$OUT_DIR" notebooks/01_quickstart.ipynb
echo "[quickstart] notebook page: $OUT_DIR/01_quickstart.html (open it in a browser; it needs no network)"
PRECOMPILE_NB_OUT="$OUT_DIR" .venv/bin/python scripts/quickstart.py
