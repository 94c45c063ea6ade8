#!/usr/bin/env bash
# Set up .venv for precompile_nb: the CPU build of torch where no torch is installed (a bare
# `torch` requirement would pull a multi-GB CUDA build), then the package with test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
if ! "$VPY" -c "import torch" 2>/dev/null; then
  echo "[setup] installing torch ${TORCH_SPEC:-torch==2.13.0} (CPU build on this machine)"
  "$VPY" -m pip install --progress-bar on "${TORCH_SPEC:-torch==2.13.0}"
fi
echo "[setup] installing precompile_nb and its dependencies"
"$VPY" -m pip install --progress-bar on -e ".[test]"
"$VPY" -c "import torch, precompile_nb; print('[setup] ready: torch', torch.__version__)"
