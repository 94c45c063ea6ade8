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
# the model zoo's packages (transformers, timm) with the torchvision built for this torch: a
# torchvision for another torch would make pip swap torch itself
TV=$("$VPY" -c "import torch; print({'2.13.0': '0.28.0', '2.14.0': '0.29.0', '2.14.1': '0.29.1'}.get(torch.__version__.split('+')[0], ''))")
if [ -n "$TV" ]; then
  echo "[setup] installing precompile_nb, its test dependencies and the zoo's (torchvision $TV)"
  "$VPY" -m pip install --progress-bar on -e ".[test,zoo]" "torchvision==$TV"
else
  echo "[setup] installing precompile_nb and its test dependencies (no torchvision known for" \
       "this torch: the zoo tests skip)"
  "$VPY" -m pip install --progress-bar on -e ".[test]"
fi
"$VPY" -c "import torch, precompile_nb; print('[setup] ready: torch', torch.__version__)"
