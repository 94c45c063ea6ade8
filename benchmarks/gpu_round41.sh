#!/usr/bin/env bash
# Round 41's device calls, torch's bytecode compiled first (GPU_SITE_BYTECODE=1 by default):
#   bash benchmarks/gpu_round41.sh first OUT   on an H200: the zoo and the cache read (issue 28's
#       H200 points, gpu_round34.sh h200, ~510 s); on another card: why a CUDA build's young
#       objects were not fewer with round 40's collector change (gpu_round40.sh probe, ~1 min),
#       then where the transformer inference's first call goes (first_call_parts.py, ~2 min)
#   bash benchmarks/gpu_round41.sh cold OUT [K]  a CUDA build's start making its imports old
#       (Note [the interpreter's own frozen objects]): gc_start_probe.py on this tree, twice,
#       then gpu_round40.sh gc's K rounds (default 3) of this tree against BASE_REV (HEAD)
#   bash benchmarks/gpu_round41.sh warm OUT      cuBLAS started on a thread beside a load (in
#       round 41's measured tree only, switched by PRECOMPILE_NB_LIBRARY_START; taken out after,
#       so on later trees both sides are the same): first_call_parts.py (3 rounds), then
#       run.py's transformer inference, load + first call against eager's (five each), with
#       the start on and off (PRECOMPILE_NB_LIBRARY_START=0), twice in turn (~5 min)
#   bash benchmarks/gpu_round41.sh suite OUT     run.py's five workloads' warm starts against
#       eager's first calls (gpu_round37.sh suite)
set -uo pipefail
PART=$1; OUT=$2
ROUND=round41; source benchmarks/gpu_env.sh
record_machine "$OUT"
not_h200() {
  bash benchmarks/gpu_round40.sh probe "$OUT"
  timeout 300 python3 benchmarks/first_call_parts.py --rounds 5 --out "$OUT/parts" \
    > "$OUT/parts.log" 2>&1
  say "parts: $(tail -5 "$OUT/parts.log" | tr '\n' ';')"
}
case "$PART" in
  first) h200_else "$OUT" not_h200 ;;
  cold)
    for k in 1 2; do
      d=$(mktemp -d); TORCHINDUCTOR_CACHE_DIR=$d/i TRITON_CACHE_DIR=$d/t timeout 90 \
        python3 benchmarks/gc_start_probe.py --device cuda >> "$OUT/probe_new.jsonl" \
        2>> "$OUT/probe_new.err"
    done
    say "probe: $(cut -c1-300 "$OUT/probe_new.jsonl")"
    mkdir -p "$OUT/gc"; bash benchmarks/gpu_round40.sh gc "$OUT/gc" "${3:-3}"
    ;;
  warm)
    timeout 200 python3 benchmarks/first_call_parts.py --rounds 3 --out "$OUT/parts" \
      > "$OUT/parts.log" 2>&1
    say "parts: $(tail -6 "$OUT/parts.log" | tr '\n' ';')"
    for k in 1 2; do
      for s in on off; do
        v=1; [ "$s" = off ] && v=0
        PRECOMPILE_NB_LIBRARY_START=$v timeout 150 python3 benchmarks/run.py --device cuda \
          --workloads transformer_infer --out "$OUT/ab_${s}_$k" --first-calls 5 \
          --modes eager,nb_cold,nb_load_cache --timeout 90 > "$OUT/ab_${s}_$k.log" 2>&1
        rm -f "$OUT/ab_${s}_$k/results.png"
        say "$s $k: $(grep "eager's own" "$OUT/ab_${s}_$k.log" | tail -n 1)"
      done
    done
    ;;
  suite) bash benchmarks/gpu_round37.sh suite "$OUT" 1 ;;
  *) echo "usage: bash benchmarks/gpu_round41.sh first|cold|warm|suite OUT [K]" >&2; exit 2 ;;
esac
