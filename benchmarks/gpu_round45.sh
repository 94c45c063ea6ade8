#!/usr/bin/env bash
# Round 45's device calls:
#   bash benchmarks/gpu_round45.sh first OUT   on an H200: the zoo and the cache read (issue 28's
#       H200 points, gpu_round34.sh h200, ~510 s); on another card: every CUDA test of tests/core
#       on this tree (round 44's fixes, requires_grad at a training artifact's boundary among
#       them, have not run on a GPU; ~6 min on an H100)
#   bash benchmarks/gpu_round45.sh h200 OUT    on an H200 the same H200 points; on another card
#       nothing but the card's name (checked before the round's setup: a try costs the start)
#   bash benchmarks/gpu_round45.sh h200cache OUT  as h200, the cache read alone (~3 min with
#       the round's setup: what a session's last device minutes allow)
#   bash benchmarks/gpu_round45.sh suite OUT   the warm suite (gpu_round37.sh suite)
#   bash benchmarks/gpu_round45.sh cold OUT K  the suite's cold starts, K runs
set -uo pipefail
PART=$1; OUT=$2
case "$PART" in h200 | h200cache)
  nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/card.txt"
  grep -q H200 "$OUT/card.txt" || { cat "$OUT/card.txt"; exit 0; } ;;
esac
ROUND=round45; source benchmarks/gpu_env.sh
record_machine "$OUT"
cuda_tests() {
  step "$OUT" cuda_tests 540 python3 -m pytest -m cuda -q -p no:cacheprovider -rA tests/core
  tail -n 3 "$OUT/cuda_tests.log"
}
case "$PART" in
  first) h200_else "$OUT" cuda_tests ;;
  h200) bash benchmarks/gpu_round34.sh h200 "$OUT" ;;
  h200cache) bash benchmarks/gpu_round33.sh cache "$OUT" ;;
  suite) bash benchmarks/gpu_round37.sh suite "$OUT" 1 ;;
  cold) bash benchmarks/gpu_round37.sh cold "$OUT" "${3:-1}" ;;
  *) echo "usage: bash benchmarks/gpu_round45.sh first|h200|h200cache|suite|cold OUT [K]" >&2; exit 2 ;;
esac
