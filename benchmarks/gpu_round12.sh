#!/usr/bin/env bash
# Round 12's GPU checks (H200), one device call each:
#   bash benchmarks/gpu_round12.sh cold OUT    precompile against torch.compile, cold, on zoo
#       training steps (CASES, TOOLS, BUDGET override), after an unmeasured warm-up
#       (cold_split --warmup). Round 12 ran it with TOOLS=nb,tc,nb+noqueue, a flag of the
#       kernel queue that was measured and taken back (Note [compile workers start with the
#       capture]); round 13 ran TOOLS=nb,nb+warmworkers,tc, then adopted warmworkers (now
#       what nb does; nb+coldworkers is the tree without it)
#   bash benchmarks/gpu_round12.sh tests OUT   every CUDA-marked test of tests/core
set -uo pipefail
PART=$1; OUT=$2
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if [ "$PART" = cold ]; then
  cd benchmarks && timeout ${BUDGET:-450} python3 cold_split.py --device cuda \
    --zoo ${CASES:-llama:train:real,bert:train:real,gpt2:train:real,timm_vit:train:real} \
    --tools ${TOOLS:-nb,tc} --warmup --out "$OUT/cold_queue" > "$OUT/cold_queue.log" 2>&1
  tail -n 25 "$OUT/cold_queue.log"
else
  timeout 440 python3 -m pytest -q -p no:cacheprovider -rA -m cuda tests/core \
    > "$OUT/h200_cuda_core_tests.log" 2>&1
  grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" "$OUT/h200_cuda_core_tests.log" | tail -n 30
fi
