#!/usr/bin/env bash
# Issue 28's suite point with the first calls as medians (run.py --first-calls): round 33's
# five runs had transformer inference over 1.1x in two, by one sample of eager's first call
# (95-125 ms) against a steady 105-107 ms warm start. One device call a part:
#   bash benchmarks/gpu_round34.sh suite OUT K   run K: eager, precompile, load; eager's first
#       call and the warm start five times each, in turn (~5.5 min on an H100), into OUT/sK
#   bash benchmarks/gpu_round34.sh h200 OUT      on an H200 only: round 33's zoo and cache parts
set -uo pipefail
PART=$1; OUT=$2; K=${3:-1}
ROUND=round34; source benchmarks/gpu_env.sh
case "$PART" in
  suite)
    timeout 560 python3 benchmarks/run.py --device cuda --out "$OUT/s$K" --first-calls 5 \
      --modes eager,nb_cold,nb_load_cache --timeout 90 > "$OUT/s$K.log" 2>&1
    rm -f "$OUT/s$K/results.png"; say "suite run $K: $(grep "eager's own" "$OUT/s$K.log" | tail -n 1)"
    ;;
  h200)
    nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { say "not an H200"; exit 0; }
    bash benchmarks/gpu_round33.sh zoo "$OUT"; bash benchmarks/gpu_round33.sh cache "$OUT"
    ;;
esac
