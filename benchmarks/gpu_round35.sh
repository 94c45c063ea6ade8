#!/usr/bin/env bash
# Round 35's device calls, one a part:
#   bash benchmarks/gpu_round35.sh beyond OUT    benchmarks/zoo/beyond.py's 34 architectures
#       past the zoo on the GPU (tiny configs, Triton kernels), into OUT/beyond_cuda
#   bash benchmarks/gpu_round35.sh suite OUT K   round 34's suite run (first calls as medians)
#   bash benchmarks/gpu_round35.sh h200 OUT      on an H200 only: round 33's zoo and cache parts
set -uo pipefail
PART=$1; OUT=$2; K=${3:-1}
ROUND=round35; source benchmarks/gpu_env.sh
case "$PART" in
  beyond)
    timeout 560 python3 benchmarks/zoo/beyond.py --device cuda --out "$OUT/beyond_cuda" \
      > "$OUT/beyond_cuda.log" 2>&1
    say "beyond: $(grep -c ': ok ' "$OUT/beyond_cuda.log") ok of $(grep -c '^\[beyond' \
      "$OUT/beyond_cuda.log") cases run"
    ;;
  suite|h200) bash benchmarks/gpu_round34.sh "$PART" "$OUT" "$K" ;;
  *) echo "usage: bash benchmarks/gpu_round35.sh beyond|suite|h200 OUT [K]" >&2; exit 2 ;;
esac
