#!/usr/bin/env bash
# Round 15's GPU checks (H200), one device call:
#   bash benchmarks/gpu_round15.sh OUT [PARTS]   PARTS (default "prewarm cold stack") from:
#     prewarm  conv_prewarm.py: does cuDNN's first-call cost of a convolution move to a thread
#              that replays it (REPEATS, default 2)
#     cold     cold_split.py, precompile against torch.compile on zoo training steps (CASES,
#              TOOLS, BUDGET, COLD_REPEATS override; WORKLOADS names benchmark workloads
#              instead), after an unmeasured warm-up
#     stack    tests/core/test_stack_lines.py on this machine's torch
#     tests    the CUDA-marked tests of FILES (default: all of tests/core)
set -uo pipefail
OUT=$1; PARTS=${2:-prewarm cold stack}
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
mkdir -p "$OUT"
for PART in $PARTS; do
  case $PART in
    prewarm)
      timeout ${PREWARM_BUDGET:-240} python3 benchmarks/conv_prewarm.py --repeats ${REPEATS:-2} \
        --out "$OUT" > "$OUT/conv_prewarm.log" 2>&1; tail -n 12 "$OUT/conv_prewarm.log";;
    cold)
      (cd benchmarks && timeout ${BUDGET:-330} python3 cold_split.py --device cuda \
        --zoo ${CASES:-timm_deit:train:real,hf_vit:train:real,distilbert:train:real} \
        ${WORKLOADS:+--workloads $WORKLOADS} \
        --tools ${TOOLS:-nb,tc} --repeats ${COLD_REPEATS:-1} --warmup --out "$OUT/cold" \
        > "$OUT/cold.log" 2>&1); grep -E "^\| |warm-up" "$OUT/cold.log" | tail -n 25;;
    stack)
      timeout 120 python3 -m pytest -q -p no:cacheprovider tests/core/test_stack_lines.py \
        > "$OUT/stack_lines_test.log" 2>&1; tail -n 3 "$OUT/stack_lines_test.log";;
    tests)
      timeout ${TESTS_BUDGET:-440} python3 -m pytest -q -p no:cacheprovider -rA -m cuda \
        ${FILES:-tests/core} > "$OUT/h200_cuda_core_tests.log" 2>&1
      grep -E "FAILED|ERROR|passed|failed" "$OUT/h200_cuda_core_tests.log" | tail -n 30;;
  esac
done
