#!/usr/bin/env bash
# Round 40's device call, torch's bytecode compiled first (GPU_SITE_BYTECODE=1 by default):
#   bash benchmarks/gpu_round40.sh gc OUT [K]   a first build's imports made old at its start
#       (Note [the collector pauses for a build]): K rounds (default 3) of run.py's cold
#       starts, this tree (nb_cold, tc_cold) then BASE_REV's package (default HEAD, the
#       device copy's commit; nb_cold) with this tree's benchmarks, so that both record the
#       collector's seconds (`gc_s`); tiny_mlp, transformer_train, cnn_bn_train (~130 s a
#       round on an H100). Round 40 ran it with the change on CUDA builds too; the tree now
#       makes only a CPU build's imports old, so this part measures nothing new on a GPU
#   bash benchmarks/gpu_round40.sh probe OUT    why a CUDA build's young objects were not
#       fewer with the change (round 40): gc_start_probe.py on the GPU, --cuda-start-old
#       making the CUDA start's imports old as round 40's tree did, then BASE_REV's tree (~1 min)
set -uo pipefail
PART=$1; OUT=$2; K=${3:-3}
ROUND=round40; source benchmarks/gpu_env.sh
WL=tiny_mlp,transformer_train,cnn_bn_train
case "$PART" in
  gc)
    BASE=/tmp/round40_base; rm -rf "$BASE"; mkdir -p "$BASE"
    git archive "${BASE_REV:-HEAD}" | tar -x -C "$BASE" && cp -r benchmarks/. "$BASE/benchmarks/"
    git rev-parse HEAD > "$OUT/base_rev.txt"; python3 -m compileall -q "$BASE/precompile_nb"
    for k in $(seq 1 "$K"); do
      timeout 250 python3 benchmarks/run.py --device cuda --workloads $WL --out "$OUT/new_$k" \
        --modes nb_cold,tc_cold --timeout 90 > "$OUT/new_$k.log" 2>&1
      (cd "$BASE" && timeout 150 python3 benchmarks/run.py --device cuda --workloads $WL \
        --out "$OUT/base_$k" --modes nb_cold --timeout 90 > "$OUT/base_$k.log" 2>&1)
      rm -f "$OUT"/*_"$k"/results.png; say "round $k done"
    done
    ;;
  probe)
    BASE=/tmp/round40_base; rm -rf "$BASE"; mkdir -p "$BASE"
    git archive "${BASE_REV:-HEAD}" | tar -x -C "$BASE" && cp -r benchmarks/. "$BASE/benchmarks/"
    for tree in "$PWD" "$PWD" "$BASE" "$BASE"; do
      d=$(mktemp -d); (cd "$tree" && TORCHINDUCTOR_CACHE_DIR=$d/i TRITON_CACHE_DIR=$d/t \
        timeout 90 python3 benchmarks/gc_start_probe.py --device cuda --cuda-start-old) \
        >> "$OUT/probe.jsonl" 2>> "$OUT/probe.err"
    done
    say "probe: $(wc -l < "$OUT/probe.jsonl") runs"
    ;;
  *) echo "usage: bash benchmarks/gpu_round40.sh gc|probe OUT [K]" >&2; exit 2 ;;
esac
