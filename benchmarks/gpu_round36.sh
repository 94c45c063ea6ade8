#!/usr/bin/env bash
# Round 36's device calls: why hf_resnet's and MobileViT's tiny training steps are far from
# eager on CUDA (0.17 and 20 by the zoo's measure, torch.compile 4.4e-04 and 0.10: round 35,
# benchmarks/results/h100_round35), leaf by leaf against torch.compile, with what changes a
# CUDA training graph's lowering switched one at a time, and with TF32 off. One model a call
# (hf_resnet ~5 min, mobilevit ~8 min on an H100):
#   bash benchmarks/gpu_round36.sh leaves OUT hf_resnet|mobilevit ["VARIANT ..."]
# and the benchmarks' CNN training step's steady state with Note [a training step's layout,
# by torch.compile's rule] on and off (PRECOMPILE_NB_TRAINING_LAYOUT), eager and torch.compile
# beside it (~4 min):
#   bash benchmarks/gpu_round36.sh steady OUT
set -uo pipefail
PART=$1; OUT=$2; MODEL=${3:-hf_resnet}
VARIANTS=${4:-plain no-tf32 layout0 straight0 functional0}
ROUND=round36; source benchmarks/gpu_env.sh
case "$PART" in
  leaves)
    for v in $VARIANTS; do
      flags=(); envs=(ROUND=$ROUND)
      case $v in
        no-tf32) flags=(--no-tf32) ;;
        no-cudnn-bn) flags=(--no-cudnn-bn) ;;
        dg) flags=(--data-guards) ;;  # BatchNorm's writes said before functionalizing
        eager) flags=(--eager-variants) ;;  # eager's own distance with TF32 off, in NHWC
        old) flags=(--eager-variants --no-tc); envs+=(PRECOMPILE_NB_TRAINING_LAYOUT=0) ;;
        layout0) envs+=(TORCHINDUCTOR_LAYOUT_OPTIMIZATION=0) ;;  # both compilers
        straight0) envs+=(PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR=0) ;;
        functional0) envs+=(PRECOMPILE_NB_FUNCTIONAL_COPY=0) ;;
      esac
      env "${envs[@]}" timeout 110 python3 benchmarks/zoo/leaf_errors.py "$MODEL" \
        --device cuda "${flags[@]}" > "$OUT/leaves_${MODEL}_$v.log" 2>&1
      say "$MODEL $v: $(grep -A1 '^leaf' "$OUT/leaves_${MODEL}_$v.log" | tail -1 | tr -s ' ')"
    done
    ;;
  steady)  # the benchmarks' CNN training step, Inductor's training layout rule on and off
    for v in on off; do
      sw=1; [ $v = off ] && sw=0
      PRECOMPILE_NB_TRAINING_LAYOUT=$sw timeout 150 python3 benchmarks/run.py --device cuda \
        --workloads cnn_bn_train --modes nb_cold,steady --out "$OUT/steady_$v" \
        > "$OUT/steady_$v.log" 2>&1
      say "cnn_bn_train layout rule $v: $(grep -i 'steady' "$OUT/steady_$v.log" | tail -3 | tr -s ' ')"
    done
    ;;
  *) echo "usage: bash benchmarks/gpu_round36.sh leaves OUT MODEL [\"VARIANT ...\"] | steady OUT" >&2; exit 2 ;;
esac
