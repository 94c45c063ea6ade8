#!/usr/bin/env bash
# Issue 28's suite point after round 32's collector pause in load, one device call a run (a
# run of all five workloads takes ~3-4 min on an H100; round 31's 150 s limit cut its runs
# inside cnn_dynamic_infer):
#   bash benchmarks/gpu_round33.sh suite OUT K  the benchmark suite's run K (eager, nb_cold,
#       nb_load_cache; every workload, the mark_dynamic one included) into OUT/sK
#   bash benchmarks/gpu_round33.sh cache OUT    cache_read.py: a 100 MB cache's read, MB/s
#   bash benchmarks/gpu_round33.sh zoo OUT      the six zoo inference cases nearest 1.1x in
#       round 32 (four over before the collector's pause), warm start against eager's first call
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
  cache)
    timeout 150 python3 benchmarks/cache_read.py --device cuda --mb 100 --repeats 3 \
      --out "$OUT/cache_read" > "$OUT/cache_read.log" 2>&1
    say "cache read: $(tail -n 6 "$OUT/cache_read.log")"
    ;;
  zoo)
    timeout 330 python3 benchmarks/zoo/parallel.py --out /tmp/zw_z --device cuda --size real \
      --warm --alone --alone-jobs 6 --no-compile-baseline --jobs 6 --deadline 320 \
      --workloads infer --models timm_vit,timm_swin,timm_deit,tv_lraspp,hf_deit,timm_resnet \
      > "$OUT/zoo.log" 2>&1
    mkdir -p "$OUT/zoo"; cp /tmp/zw_z/results.json /tmp/zw_z/results.md "$OUT/zoo/"
    say "zoo: $(grep -c '"status": "ok"' /tmp/zw_z/results.json) ok rows"
    ;;
esac
