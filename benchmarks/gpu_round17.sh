#!/usr/bin/env bash
# Round 17's GPU checks (H200), one device call:
#   bash benchmarks/gpu_round17.sh OUT [PARTS]   PARTS (default "tests cold") from:
#     tests    CUDA-marked tests of tests/core (FILES, default: all of tests/core)
#     cold     cold_split.py, precompile against torch.compile on zoo training steps (CASES,
#              TOOLS, BUDGET override), after an unmeasured warm-up
set -uo pipefail
OUT=$1; PARTS=${2:-tests cold}
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
mkdir -p "$OUT"
for PART in $PARTS; do
  case $PART in
    tests)
      timeout ${TESTS_BUDGET:-440} python3 -m pytest -q -p no:cacheprovider -rA -m cuda \
        ${FILES:-tests/core} > "$OUT/cuda_tests.log" 2>&1
      grep -E "FAILED|ERROR|passed|failed" "$OUT/cuda_tests.log" | tail -n 30;;
    cold)
      (cd benchmarks && timeout ${BUDGET:-330} python3 cold_split.py --device cuda \
        --zoo ${CASES:-gpt2:train:real,timm_vit:train:real,timm_deit:train:real} \
        --tools ${TOOLS:-nb,tc} --repeats ${COLD_REPEATS:-1} --warmup --out "$OUT/cold" \
        > "$OUT/cold.log" 2>&1); grep -E "^\| |warm-up" "$OUT/cold.log" | tail -n 25;;
  esac
done
