#!/usr/bin/env bash
# One device call: the CUDA-marked tests, then the zoo on the H200 (realistic sizes, inductor),
# several cases at a time (one GPU, 16 CPU cores), merged into one table.
# usage: bash benchmarks/zoo/gpu_run.sh OUT [PARALLEL] [MODELS...]
set -uo pipefail
OUT=$1; P=${2:-6}; shift 2 || true
export TORCHINDUCTOR_CACHE_DIR=/tmp/zoo_ind PYTHONUNBUFFERED=1
MODELS=${*:-$(python3 -c "import sys; sys.path.insert(0, '.'); from benchmarks.zoo import models; print(' '.join(models.REGISTRY))")}
mkdir -p /tmp/zoo_parts
printf '%s\n' $MODELS | xargs -P "$P" -I{} sh -c \
  'python3 benchmarks/zoo/run.py --device cuda --size real --backend inductor --models {} --out /tmp/zoo_parts/{} ${ZOO_FLAGS:-} > /tmp/zoo_parts/{}.log 2>&1'
python3 benchmarks/zoo/run.py --merge /tmp/zoo_parts/*/ --out "$OUT/zoo_cuda" 2>&1 | tail -3
tar czf "$OUT/zoo_parts.tgz" -C /tmp zoo_parts
