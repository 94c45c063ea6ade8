#!/usr/bin/env bash
# Issue 28's suite point after round 32's collector pause in load, one device call a run (a
# run of all five workloads takes ~3-4 min on an H100; round 31's 150 s limit cut its runs
# inside cnn_dynamic_infer):
#   bash benchmarks/gpu_round33.sh suite OUT K  the benchmark suite's run K (eager, nb_cold,
#       nb_load_cache; every workload, the mark_dynamic one included) into OUT/sK
# Merge afterwards: `python3 benchmarks/run.py --merge OUT/s1/results.json ... --out DIR`.
set -uo pipefail
PART=$1; OUT=$2; K=${3:-1}
ROUND=round33; source benchmarks/gpu_env.sh
case "$PART" in
  suite)
    timeout 330 python3 benchmarks/run.py --device cuda --out "$OUT/s$K" \
      --modes eager,nb_cold,nb_load_cache --timeout 90 > "$OUT/s$K.log" 2>&1
    rm -f "$OUT/s$K/results.png"; say "suite run $K: $(tail -n 1 "$OUT/s$K.log")"
    ;;
esac
