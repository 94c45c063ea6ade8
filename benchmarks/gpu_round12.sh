#!/usr/bin/env bash
# Round 12's GPU checks (H200), one device call each:
#   bash benchmarks/gpu_round12.sh queue OUT   kernels queued for starting compile workers
#       (Note [kernels queue for starting workers]) against Inductor's rule (+noqueue) and
#       torch.compile, on zoo training steps (CASES, TOOLS, BUDGET override), after an
#       unmeasured warm-up (cold_split --warmup)
#   bash benchmarks/gpu_round12.sh tests OUT   the pool tests on this torch, then every
#       CUDA-marked test of tests/core
set -uo pipefail
PART=$1; OUT=$2
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if [ "$PART" = queue ]; then
  cd benchmarks && timeout ${BUDGET:-450} python3 cold_split.py --device cuda \
    --zoo ${CASES:-llama:train:real,bert:train:real,gpt2:train:real,timm_vit:train:real} \
    --tools ${TOOLS:-nb,tc,nb+noqueue} --warmup --out "$OUT/cold_queue" > "$OUT/cold_queue.log" 2>&1
  tail -n 25 "$OUT/cold_queue.log"
else
  timeout 100 python3 -m pytest -q -p no:cacheprovider -rA tests/core/test_compile_pool.py \
    > "$OUT/compile_pool_tests.log" 2>&1; tail -n 2 "$OUT/compile_pool_tests.log"
  timeout 440 python3 -m pytest -q -p no:cacheprovider -rA -m cuda tests/core \
    > "$OUT/h200_cuda_core_tests.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" "$OUT/h200_cuda_core_tests.log" | tail -n 30
fi
