#!/usr/bin/env bash
# Round 35's device calls, one a part:
#   bash benchmarks/gpu_round35.sh beyond OUT    benchmarks/zoo/beyond.py's 34 architectures
#       past the zoo on the GPU (tiny configs, Triton kernels), into OUT/beyond_cuda
#   bash benchmarks/gpu_round35.sh suite OUT K   round 34's suite run (first calls as medians)
#   bash benchmarks/gpu_round35.sh h200 OUT      on an H200 only: round 33's zoo and cache parts
#   bash benchmarks/gpu_round35.sh timeline OUT K  cold_timeline.py: the three small workloads'
#       cold starts, precompile_nb and torch.compile in turn, K rounds, under the stack sampler
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
  timeline)
    timeout 400 python3 benchmarks/cold_timeline.py --device cuda --repeats "$K" \
      --out "$OUT/timeline" > "$OUT/timeline.log" 2>&1
    say "timeline: $(grep -c ' run ' "$OUT/timeline.log") runs"
    ;;
  suite|h200) bash benchmarks/gpu_round34.sh "$PART" "$OUT" "$K" ;;
  *) echo "usage: bash benchmarks/gpu_round35.sh beyond|suite|h200|timeline OUT [K]" >&2; exit 2 ;;
esac
