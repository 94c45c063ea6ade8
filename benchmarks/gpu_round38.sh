#!/usr/bin/env bash
# Round 38's device calls for the next session, one a part, torch's bytecode compiled first
# (GPU_SITE_BYTECODE=1 by default here; round 38's calls, results/h100_round38/, ran
# gpu_round37.sh's parts that way):
#   bash benchmarks/gpu_round38.sh cold OUT K      run.py's cold starts of the five workloads
#       (imports timed), K runs: the key taking the code generation's imports while Triton's
#       set-up thread hashes (changed after round 38's calls)
#   bash benchmarks/gpu_round38.sh timeline OUT    cold_timeline.py, tiny_mlp, the dynamic CNN
#       and the CNN training step (round 38's cold median over 0.8), one run each
#   bash benchmarks/gpu_round38.sh warm OUT        warm_first_call.py on transformer_infer (round
#       38: 1.19x eager's first call) and tiny_mlp, five pairs, cProfile of each side
#   bash benchmarks/gpu_round38.sh suite OUT K     round 34's warm suite (gpu_round37.sh suite)
#   bash benchmarks/gpu_round38.sh h200 OUT        the zoo and cache read on an H200 (issue 28)
set -uo pipefail
PART=$1; OUT=$2
ROUND=round38; source benchmarks/gpu_env.sh
case "$PART" in
  cold|suite) bash benchmarks/gpu_round37.sh "$PART" "$OUT" "${3:-1}" ;;
  timeline)
    timeout 300 python3 benchmarks/cold_timeline.py --device cuda \
      --workloads tiny_mlp,cnn_dynamic_infer,cnn_bn_train --repeats 1 --out "$OUT/timeline" \
      > "$OUT/timeline.log" 2>&1
    say "timeline: $(grep -c '^|' "$OUT/timeline/summary.md") rows"
    ;;
  warm)
    timeout 400 python3 benchmarks/warm_first_call.py --device cuda \
      --models suite:transformer_infer,suite:tiny_mlp --repeats 5 --out "$OUT/warm" \
      > "$OUT/warm.log" 2>&1
    rm -rf "$OUT/warm/work"
    say "warm: $(grep -o 'eager first call [0-9.]*\*\*' "$OUT/warm.log" | tr '\n' ' ')"
    ;;
  h200) bash benchmarks/gpu_round34.sh h200 "$OUT" ;;
  *) echo "usage: bash benchmarks/gpu_round38.sh cold|timeline|warm|suite|h200 OUT [K]" >&2
     exit 2 ;;
esac
