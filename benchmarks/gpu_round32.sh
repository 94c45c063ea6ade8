#!/usr/bin/env bash
# Issue 28's GPU points left after round 31 (benchmarks/results/h100_round31/README.md), in
# device calls of at most ~5.5 min each, every step writing under OUT as soon as it ends:
#   bash benchmarks/gpu_round32.sh infer OUT  the zoo's 39 inference cases, warm start against
#       eager's first call (--alone); run it again on the same machine to resume
#   bash benchmarks/gpu_round32.sh infer_rest OUT  the cases the first call's deadline left without
#       a warm start (their precompile again on a fresh machine); resumable the same way
#   bash benchmarks/gpu_round32.sh over OUT   round 31's four training steps over 1.1x again,
#       now with the cyclic collector timed inside each window (nb_warm_gc_s, eager_first_gc_s)
#   bash benchmarks/gpu_round32.sh probe OUT  cubin_load.py: where the ~0.5 ms a Triton kernel
#       of a warm load goes, and whether the cubins can load behind the first call
# Merge afterwards: `python3 benchmarks/zoo/run.py --merge DIR_A DIR_B --out DIR`.
set -uo pipefail
PART=$1; OUT=$2
ROUND=round32; source benchmarks/gpu_env.sh
zoo() {  # zoo PART WORKLOADS [MODELS]
  local W=$1 WL=$2 MODELS=${3:-}
  local RES; RES=$([ -f /tmp/zw_$W/results.json ] && echo "--resume /tmp/zw_$W" || echo "")
  timeout 330 python3 benchmarks/zoo/parallel.py --out /tmp/zw_$W $RES --device cuda \
    --size real --warm --alone --alone-jobs 6 --no-compile-baseline --jobs 6 \
    --deadline 320 --workloads "$WL" ${MODELS:+--models $MODELS} > "$OUT/zoo_$W.log" 2>&1
  mkdir -p "$OUT/zoo_$W"; cp /tmp/zw_$W/results.json /tmp/zw_$W/results.md "$OUT/zoo_$W/"
  say "zoo $W: $(grep -c '"status": "ok"' /tmp/zw_$W/results.json) ok rows"
}
case "$PART" in
  infer) zoo infer infer ;;
  infer_rest) zoo infer_rest infer "$(python3 -c 'import json, sys
print(",".join(r["model"] for r in json.load(open(sys.argv[1])) if "nb_warm_s" not in r))' \
    benchmarks/results/h100_round32/zoo_infer/results.json)" ;;
  over) zoo over train timm_swin,timm_deit,tv_resnet18,tv_deeplabv3 ;;
  probe)
    timeout 320 python3 benchmarks/cubin_load.py --cases cnn_bn_train,zoo:tv_resnet18:train \
      --repeats 2 --out "$OUT" > "$OUT/cubin_load.log" 2>&1
    say "cubin_load: $(tail -n 8 "$OUT/cubin_load.log")"
    ;;
esac
