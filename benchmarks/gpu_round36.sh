#!/usr/bin/env bash
# Round 36's device call: why hf_resnet's and MobileViT's tiny training steps are far from
# eager on CUDA (0.17 and 20 by the zoo's measure, torch.compile 4.4e-04 and 0.10: round 35,
# benchmarks/results/h100_round35), leaf by leaf, against torch.compile, with the switches
# that change a CUDA training graph's lowering and with TF32 off.
#   bash benchmarks/gpu_round36.sh leaves OUT
set -uo pipefail
PART=$1; OUT=$2
ROUND=round36; source benchmarks/gpu_env.sh
case "$PART" in
  leaves)
    for v in plain no-tf32 straight0 functional0; do
      flags=(); envs=()
      case $v in
        no-tf32) flags=(--no-tf32) ;;
        straight0) envs=(PRECOMPILE_NB_STRAIGHT_TO_INDUCTOR=0) ;;
        functional0) envs=(PRECOMPILE_NB_FUNCTIONAL_COPY=0) ;;
      esac
      for case in hf_resnet mobilevit; do
        env "${envs[@]}" timeout 150 python3 benchmarks/zoo/leaf_errors.py "$case" \
          --device cuda "${flags[@]}" > "$OUT/leaves_${case}_$v.log" 2>&1
        say "$case $v: $(grep -A2 '^leaf' "$OUT/leaves_${case}_$v.log" | tail -2 | tr -s ' ')"
      done
    done
    ;;
  *) echo "usage: bash benchmarks/gpu_round36.sh leaves OUT" >&2; exit 2 ;;
esac
