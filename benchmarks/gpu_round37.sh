#!/usr/bin/env bash
# Round 37's device calls, one a part:
#   bash benchmarks/gpu_round37.sh imports OUT  why imports are 75-87% of a small cold start on
#       the device (round 35): `import torch` and Inductor's compile_fx in fresh processes, with
#       the rounds' bytecode prefix (/tmp/pyc) and with the installed bytecode, and
#       -X importtime of each, into OUT/imports*
#   bash benchmarks/gpu_round37.sh cold OUT K   run.py's cold starts of the five workloads
#       (precompile_nb, torch.compile; imports timed), K runs, into OUT/cold_<k>
#   bash benchmarks/gpu_round37.sh suite OUT K  round 34's suite (eager's first call and the
#       warm start five times each, in turn), into OUT/suite_K
#   bash benchmarks/gpu_round37.sh checks OUT   round 36's open checks: the CUDA tests widened to
#       96 channels and the small-channel one, MobileViT's step leaf by leaf with the layout rule
#   bash benchmarks/gpu_round37.sh steady OUT   round 36's `steady` (cnn_bn_train, the rule on/off)
#   bash benchmarks/gpu_round37.sh moe OUT      gpt-oss's and DeepSeek-V3's training steps with
#       data guards (round 35 stopped them at the capture before the host-scalar fix)
# Round 37 ran these with torch compiled from source in every process, the host's torch having
# no bytecode (GPU_SITE_BYTECODE=0, the default here); GPU_SITE_BYTECODE=1 first compiles it
# once (gpu_env.sh, benchmarks/site_bytecode.py), as an installed torch has it.
set -uo pipefail
PART=$1; OUT=$2
export GPU_SITE_BYTECODE=${GPU_SITE_BYTECODE:-0}
ROUND=round37; source benchmarks/gpu_env.sh
case "$PART" in
  imports)
    {
      python3 -c "import sys, torch, os; print(sys.version); print(torch.__file__); \
print('pycache_prefix', sys.pycache_prefix, 'dont_write', sys.flags.dont_write_bytecode)"
      d=$(python3 -c "import torch, os; print(os.path.dirname(torch.__file__))")
      echo "installed pyc in torch/_inductor/__pycache__: $(ls "$d/_inductor/__pycache__" 2>/dev/null | wc -l)"
      df -hT "$d" /tmp | cat
      nproc
    } > "$OUT/imports_env.txt" 2>&1
    for pfx in prefix installed; do
      for stmt in "import torch" "import torch, torch._inductor.compile_fx" \
                  "import torch, torch._dynamo, torch._inductor.compile_fx"; do
        for i in 1 2; do
          TIMEFORMAT=%R
          if [ $pfx = prefix ]; then t=$( { time python3 -c "$stmt"; } 2>&1 ); else
            t=$( { time env -u PYTHONPYCACHEPREFIX python3 -c "$stmt"; } 2>&1 ); fi
          echo "$pfx | $stmt | run $i | $t s"
        done
      done
    done > "$OUT/imports_wall.txt" 2>&1
    python3 -X importtime -c "import torch, torch._inductor.compile_fx" 2> "$OUT/importtime_prefix.txt"
    env -u PYTHONPYCACHEPREFIX python3 -X importtime -c "import torch, torch._inductor.compile_fx" \
      2> "$OUT/importtime_installed.txt"
    say "imports: $(grep -c s "$OUT/imports_wall.txt") timings"
    ;;
  cold)
    for k in $(seq 1 "${3:-1}"); do
      timeout 280 python3 benchmarks/run.py --device cuda --out "$OUT/cold_$k" \
        --modes nb_cold,tc_cold --timeout 60 > "$OUT/cold_$k.log" 2>&1
      rm -f "$OUT/cold_$k/results.png"
      say "cold $k: $(grep -i 'cold' "$OUT/cold_$k.log" | tail -n 2 | tr '\n' ' ')"
    done
    ;;
  suite)
    timeout 560 python3 benchmarks/run.py --device cuda --out "$OUT/suite_${3:-1}" \
      --first-calls 5 --modes eager,nb_cold,nb_load_cache --timeout 90 \
      > "$OUT/suite_${3:-1}.log" 2>&1
    rm -f "$OUT/suite_${3:-1}/results.png"
    say "suite: $(grep "eager's own" "$OUT/suite_${3:-1}.log" | tail -n 1)"
    ;;
  checks)
    timeout 300 python3 -m pytest -q -p no:cacheprovider -rA -m cuda tests/core/test_cuda.py \
      -k "channels_last_copy or depthwise or small_channel" > "$OUT/tests.log" 2>&1
    say "tests: $(tail -1 "$OUT/tests.log")"
    timeout 200 python3 benchmarks/zoo/leaf_errors.py mobilevit --device cuda --no-tc --top 4 \
      > "$OUT/leaves_mobilevit.log" 2>&1
    say "mobilevit: $(grep -A1 '^leaf' "$OUT/leaves_mobilevit.log" | tail -1 | tr -s ' ')"
    ;;
  steady) bash benchmarks/gpu_round36.sh steady "$OUT" ;;
  moe)
    timeout 400 python3 benchmarks/zoo/beyond.py --device cuda --models gpt_oss,deepseek_v3 \
      --workloads train --data-guards --out "$OUT/moe" > "$OUT/moe.log" 2>&1
    say "moe: $(grep -E ': (ok|MISMATCH|FAIL)' "$OUT/moe.log" | tr '\n' ';')"
    ;;
  *) echo "usage: bash benchmarks/gpu_round37.sh imports|cold|suite|checks|steady|moe OUT [K]" >&2; exit 2 ;;
esac
