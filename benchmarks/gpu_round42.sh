#!/usr/bin/env bash
# Round 42's device calls, torch's bytecode compiled first (GPU_SITE_BYTECODE=1 by default):
#   bash benchmarks/gpu_round42.sh first OUT   on an H200: the zoo and the cache read (issue 28's
#       H200 points, gpu_round34.sh h200, ~510 s); on another card: the transformer inference's
#       first call after a load, in the driver's pieces, beside eager's (first_call_parts.py,
#       ~1.5 min), then one run of every mode of run.py's five workloads (eager, torch.compile
#       cold and warm, precompile, load, steady): the cold, warm and steady ratios of one tree
#       in one run (~6-8 min)
#   bash benchmarks/gpu_round42.sh suite OUT     run.py's five workloads' warm starts against
#       eager's first calls, five each in turn (gpu_round37.sh suite)
#   bash benchmarks/gpu_round42.sh timeline OUT  where the two training steps' cold starts go,
#       precompile_nb against torch.compile, phase by phase (cold_timeline.py, two runs each;
#       round 42's cold ratios of these two were 0.79-0.96 and 0.75-1.02), then the suite's
#       cold starts once more (gpu_round37.sh cold)
#   bash benchmarks/gpu_round42.sh launchers OUT which kernels of the two training steps' cold
#       precompiles take Triton's own launcher (gcc on the main thread) and why
#       (launcher_probe.py, ~1 min), then the timeline part
set -uo pipefail
PART=$1; OUT=$2
ROUND=round42; source benchmarks/gpu_env.sh
record_machine "$OUT"
not_h200() {
  timeout 150 python3 benchmarks/first_call_parts.py --rounds 5 --variants eager,nb,nb_split \
    --out "$OUT/parts" > "$OUT/parts.log" 2>&1
  say "parts: $(tail -3 "$OUT/parts.log" | tr '\n' ';')"
  timeout 420 python3 benchmarks/run.py --device cuda --out "$OUT/full" \
    --modes eager,tc_cold,tc_warm,nb_cold,nb_load_cache,steady --timeout 120 \
    > "$OUT/full.log" 2>&1
  rm -f "$OUT/full/results.png"
  say "full: $(grep -E "steady|cold first|eager's own" "$OUT/full.log" | tail -n 4 | tr '\n' ';')"
}
case "$PART" in
  first) h200_else "$OUT" not_h200 ;;
  suite) bash benchmarks/gpu_round37.sh suite "$OUT" 1 ;;
  timeline)
    timeout 330 python3 benchmarks/cold_timeline.py --device cuda \
      --workloads transformer_train,cnn_bn_train --repeats 2 --out "$OUT/timeline" \
      > "$OUT/timeline.log" 2>&1
    say "timeline: $(grep -c '^|' "$OUT/timeline/summary.md") rows"
    timeout 200 bash benchmarks/gpu_round37.sh cold "$OUT" 1
    ;;
  launchers)
    timeout 240 python3 benchmarks/launcher_probe.py --out "$OUT/launchers" \
      > "$OUT/launchers.log" 2>&1
    say "launchers: $(tr '\n' ';' < "$OUT/launchers.log" | cut -c1-600)"
    bash benchmarks/gpu_round42.sh timeline "$OUT"
    ;;
  *) echo "usage: bash benchmarks/gpu_round42.sh first|suite|timeline|launchers OUT" >&2; exit 2 ;;
esac
