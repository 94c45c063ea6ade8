#!/usr/bin/env bash
# Round 44's device calls, torch's bytecode compiled first (GPU_SITE_BYTECODE=1 by default):
#   bash benchmarks/gpu_round44.sh first OUT   on an H200: the zoo and the cache read (issue 28's
#       H200 points, gpu_round34.sh h200, ~510 s); on another card: what the tiny MLP's and the
#       dynamic CNN's cold starts import that torch.compile's do not (import_diff.py, ~1 min),
#       the tiny MLP's cold start phase by phase, two runs a tool (cold_timeline.py, ~1 min),
#       then the suite's cold starts twice (gpu_round37.sh cold, ~4 min)
#   bash benchmarks/gpu_round44.sh cold OUT K  the suite's cold starts, K runs
#   bash benchmarks/gpu_round44.sh suite OUT   the warm suite (gpu_round37.sh suite)
set -uo pipefail
PART=$1; OUT=$2
ROUND=round44; source benchmarks/gpu_env.sh
record_machine "$OUT"
imports_then_cold() {
  step "$OUT" imports 150 python3 benchmarks/import_diff.py --device cuda \
    --workloads tiny_mlp,cnn_dynamic_infer --out "$OUT/imports"
  step "$OUT" timeline 150 python3 benchmarks/cold_timeline.py --device cuda \
    --workloads tiny_mlp --repeats 2 --out "$OUT/timeline"
  bash benchmarks/gpu_round37.sh cold "$OUT" 2
}
case "$PART" in
  first) h200_else "$OUT" imports_then_cold ;;
  cold) bash benchmarks/gpu_round37.sh cold "$OUT" "${3:-1}" ;;
  suite) bash benchmarks/gpu_round37.sh suite "$OUT" 1 ;;
  *) echo "usage: bash benchmarks/gpu_round44.sh first|cold|suite OUT [K]" >&2; exit 2 ;;
esac
