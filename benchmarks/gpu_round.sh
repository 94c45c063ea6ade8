#!/usr/bin/env bash
# This round's GPU checks, in two device calls on one H200 (the second within the first's warm
# window, so /tmp survives). Everything the tables need is written under OUT.
#   bash benchmarks/gpu_round.sh 1 OUT   (~9 min) the zoo's two cuDNN-bound training cases
#       compiled (precompile_nb and torch.compile, 4 at a time) in the background while every
#       CUDA-marked test of tests/core runs; then eager's first call split by convolution kind
#   bash benchmarks/gpu_round.sh 2 OUT   (~9 min) those cases' warm starts alone (--resume
#       into the same OUT), the optimizer-in-fn step, the mark_dynamic / efficientnet load and
#       the cache read. Round 7 ran it with shorter timeouts, which cut the optimizer step
#       after its mlp row and gpu_issue28.py after its first part.
set -uo pipefail
PART=$1; OUT=$2
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/round_ind
T0=$(date +%s)
CASES=timm_convnext:train,timm_efficientnet:train
if [ "$PART" = 1 ]; then
  timeout 450 python3 benchmarks/zoo/parallel.py --out /tmp/zoo_cnn --device cuda --size real \
    --models $CASES --workloads train --jobs 4 --deadline 430 > /tmp/zoo_cnn.log 2>&1 &
  timeout 330 python3 -m pytest -q -p no:cacheprovider -rA -m cuda tests/core \
    > "$OUT/h200_cuda_tests.log" 2>&1
  echo "[round] cuda tests done at +$(( $(date +%s) - T0 ))s: $(tail -n 1 "$OUT/h200_cuda_tests.log")"
  wait
  echo "[round] zoo compiles done at +$(( $(date +%s) - T0 ))s"; tail -n 5 /tmp/zoo_cnn.log
  timeout 130 python3 benchmarks/conv_first_call.py "$OUT/conv_first_call" > /tmp/cfc.log 2>&1
  cat /tmp/cfc.log | tail -n 8
  grep -E "PASSED|FAILED|ERROR|SKIPPED" "$OUT/h200_cuda_tests.log" | tail -n 30
else
  timeout 300 python3 benchmarks/zoo/parallel.py --out /tmp/zoo_cnn --resume /tmp/zoo_cnn \
    --device cuda --size real --models $CASES --workloads train --warm --alone --jobs 1 \
    --deadline 290 > /tmp/zoo_cnn2.log 2>&1
  echo "[round] warm starts done at +$(( $(date +%s) - T0 ))s"; tail -n 4 /tmp/zoo_cnn2.log  # (its log; the table stays in /tmp/zoo_cnn)
  mkdir -p "$OUT/zoo_cnn"; cp /tmp/zoo_cnn/results.* "$OUT/zoo_cnn/"; head -n 5 /tmp/zoo_cnn/results.md
  timeout 200 python3 benchmarks/optimizer_step.py --device cuda --workloads mlp,transformer \
    --rounds 8 --iters 10 --out "$OUT/optimizer_cuda" > /tmp/opt.log 2>&1; tail -n 6 /tmp/opt.log
  mkdir -p /tmp/i28
  timeout 200 python3 benchmarks/gpu_issue28.py /tmp/i28/gpu_issue28 > /tmp/i28/gpu_issue28.log 2>&1
  timeout 45 python3 benchmarks/cache_read.py --device cuda --mb 100 --repeats 2 \
    --out /tmp/i28/cuda_cache_read > /tmp/i28/cuda_cache_read.log 2>&1
  tar czf "$OUT/issue28.tgz" -C /tmp i28
  echo "[round] done at +$(( $(date +%s) - T0 ))s"
  tail -n 20 /tmp/i28/gpu_issue28.log; tail -n 6 /tmp/i28/cuda_cache_read.log
fi
