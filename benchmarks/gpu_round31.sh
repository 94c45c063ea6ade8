#!/usr/bin/env bash
# Issue 28's GPU points still unmeasured, in device calls of at most ~5.5 min each (a machine
# can be taken back mid-call: every step writes its results under OUT as soon as it ends, and
# a later part resumes what an earlier one left in /tmp when the machine is still the same).
#   bash benchmarks/gpu_round31.sh suite OUT  the benchmark suite, load + first call against
#       eager's first call (eager, nb_cold, nb_load_cache), twice (merge them)
#   bash benchmarks/gpu_round31.sh probe OUT  an over-1.1x zoo step's warm start split (import,
#       load's stages, first call) by warm_first_call.py, and blas_prewarm.py: does cuBLAS
#       started on a second thread during the load shorten load + first call?
#   bash benchmarks/gpu_round31.sh train OUT  the zoo's training steps whose warm start was
#       not measured, and the five over 1.1x again (their nb_warm_split_s), --alone-jobs 6;
#       run it again (same machine) to resume what the deadline left
#   bash benchmarks/gpu_round31.sh infer OUT  the zoo's inference cases, the same way
# Merge afterwards: `python3 benchmarks/run.py --merge OUT/s1/results.json OUT/s2/results.json
# --out DIR`, and `python3 benchmarks/zoo/run.py --merge DIR_A DIR_B --out DIR`.
set -uo pipefail
PART=$1; OUT=$2
ROUND=round31; source benchmarks/gpu_env.sh
TRAIN=gpt2,opt,gpt_neox,electra,mistral,bart,marian,whisper,hf_vit,hf_deit,hf_swin,\
hf_segformer,hf_detr,timm_vit,timm_deit,timm_swin,timm_resnet,timm_convnext,\
timm_efficientnet,timm_mobilenetv3,tv_resnet18,tv_mobilenet_v3,tv_vit,tv_swin,tv_deeplabv3,\
tv_lraspp
case "$PART" in
  suite)
    for i in 1 2; do
      timeout 150 python3 benchmarks/run.py --device cuda --out "$OUT/s$i" \
        --modes eager,nb_cold,nb_load_cache --timeout 60 > "$OUT/s$i.log" 2>&1
      rm -f "$OUT/s$i/results.png"; say "suite run $i: $(tail -n 1 "$OUT/s$i.log")"
    done
    ;;
  probe)
    timeout 130 python3 benchmarks/blas_prewarm.py --workloads transformer_infer --repeats 3 \
      --out "$OUT" > "$OUT/blas_prewarm.log" 2>&1
    say "blas_prewarm: $(tail -n 4 "$OUT/blas_prewarm.log")"
    timeout 150 python3 benchmarks/warm_first_call.py --device cuda --models gpt2 --size real \
      --workload train --repeats 2 --out /tmp/wfc --timeout 60 > "$OUT/wfc.log" 2>&1
    cp /tmp/wfc/warm_first_call.json /tmp/wfc/warm_first_call.md "$OUT/" 2>/dev/null
    say "split done"
    ;;
  train|infer)
    W=$PART; MODELS=$([ "$W" = train ] && echo "$TRAIN" || echo "")
    RES=$([ -f /tmp/zw_$W/results.json ] && echo "--resume /tmp/zw_$W" || echo "")
    timeout 330 python3 benchmarks/zoo/parallel.py --out /tmp/zw_$W $RES --device cuda \
      --size real --warm --alone --alone-jobs 6 --no-compile-baseline --jobs 6 \
      --deadline 320 --workloads $W ${MODELS:+--models $MODELS} > "$OUT/zoo_$W.log" 2>&1
    mkdir -p "$OUT/zoo_$W"; cp /tmp/zw_$W/results.json /tmp/zw_$W/results.md "$OUT/zoo_$W/"
    say "zoo $W: $(grep -c '"status": "ok"' /tmp/zw_$W/results.json) ok rows"
    ;;
esac
