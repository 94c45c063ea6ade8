#!/usr/bin/env bash
# Round 39's device calls for the next session, torch's bytecode compiled first
# (GPU_SITE_BYTECODE=1 by default, as round 38's and 39's calls ran):
#   bash benchmarks/gpu_round39.sh next OUT      one call's worth (~560 s on round 39's H100):
#       tiny_mlp's cold timeline (the key's wait for Triton's hash, which round 39 started
#       before Inductor's imports), then run.py's cold starts of the five workloads, three
#       runs (gpu_round37.sh cold; each ~150 s there, so the last may be cut)
#   bash benchmarks/gpu_round39.sh warm OUT      transformer inference's warm start against
#       eager's first call, ten alternating pairs (round 39: 1.21 in five pairs, 0.79 in the
#       suite of the same call), then the suite's five workloads once more (gpu_round37.sh)
#   bash benchmarks/gpu_round39.sh h200 OUT      the zoo and cache read on an H200 (issue 28)
set -uo pipefail
PART=$1; OUT=$2
ROUND=round39; source benchmarks/gpu_env.sh
case "$PART" in
  next)
    timeout 100 python3 benchmarks/cold_timeline.py --device cuda --workloads tiny_mlp \
      --repeats 1 --out "$OUT/timeline" > "$OUT/timeline.log" 2>&1
    say "timeline: $(grep -c '^|' "$OUT/timeline/summary.md") rows"
    bash benchmarks/gpu_round37.sh cold "$OUT" 3
    ;;
  warm)
    timeout 300 python3 benchmarks/warm_first_call.py --device cuda \
      --models suite:transformer_infer --repeats 10 --out "$OUT/warm" > "$OUT/warm.log" 2>&1
    rm -rf "$OUT/warm/work"
    say "warm: $(grep -o 'eager first call [0-9.]*\*\*' "$OUT/warm.log" | tr '\n' ' ')"
    timeout 280 bash benchmarks/gpu_round37.sh suite "$OUT" 1
    ;;
  h200) bash benchmarks/gpu_round34.sh h200 "$OUT" ;;
  *) echo "usage: bash benchmarks/gpu_round39.sh next|warm|h200 OUT" >&2; exit 2 ;;
esac
