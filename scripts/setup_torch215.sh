#!/usr/bin/env bash
# Set up a second environment with torch 2.15 for the suite's 2.15 leg (scripts/test.sh).
#
# torch 2.15.0 is published only as the CUDA build (~3 GB with its CUDA libraries; it runs on
# CPU). Some machines cap torch with a pip constraint file (e.g. torch<=2.14.1) and would
# silently install an older torch: this environment is made with PIP_CONSTRAINT=/dev/null.
# It lives outside the clone (default ~/.cache/precompile_nb/venv-torch2.15, override with
# PRECOMPILE_NB_VENV215) so that later runs on the same machine reuse it; the package itself is
# installed editable from this checkout each time (quick once the dependencies are there).
# Prints the environment's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
V=${PRECOMPILE_NB_VENV215:-$HOME/.cache/precompile_nb/venv-torch2.15}
PY=${PYTHON:-python3}
export PIP_CONSTRAINT=/dev/null
if [ ! -x "$V/bin/python" ]; then
  echo "[setup 2.15] creating $V" >&2
  mkdir -p "$(dirname "$V")"
  "$PY" -m venv "$V"
fi
if ! "$V/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.15.0')" 2>/dev/null; then
  echo "[setup 2.15] installing torch==2.15.0 (the CUDA build, ~3 GB: a few minutes)" >&2
  "$V/bin/python" -m pip install --progress-bar on torch==2.15.0 >&2
fi
echo "[setup 2.15] installing precompile_nb into $V" >&2
# with the zoo's packages (transformers, timm). timm needs torchvision; none is published for
# torch 2.15 yet: 0.29.2 asks for torch >= 2.14 and its ops load on 2.15 (checked), so it is
# pinned (a torchvision that asked for another torch would make pip swap torch itself)
"$V/bin/python" -m pip install -q -e ".[test,zoo]" "torchvision==0.29.2" >&2
"$V/bin/python" -c "import torch; assert torch.__version__.startswith('2.15'), torch.__version__; print('[setup 2.15] ready: torch', torch.__version__)" >&2
echo "$V/bin/python"
