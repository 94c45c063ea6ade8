#!/usr/bin/env bash
# One device call on the H200 for this round's GPU checks, everything written under OUT:
#  - in the background: the zoo's four data-guard training cases (real sizes, every column)
#    and the hf_detr TF32 repro;
#  - in the foreground: every CUDA-marked test of tests/core, then benchmarks/gpu_issue28.py
#    (mark_dynamic warm load, efficientnet_b0's first call) and the CUDA cache-read benchmark.
# usage: bash benchmarks/gpu_round.sh OUT   (about 9 minutes)
set -uo pipefail
OUT=$1
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/round_ind TORCHINDUCTOR_COMPILE_THREADS=4
T0=$(date +%s)
mkdir -p /tmp/dg
for m in mixtral qwen2_moe deberta_v2 hf_detr; do
  timeout 480 python3 benchmarks/zoo/run.py --device cuda --size real --backend inductor \
    --workloads train --models $m --out /tmp/dg/$m --timeout 280 > /tmp/dg/$m.log 2>&1 &
done
timeout 200 python3 benchmarks/zoo/repros/detr_tf32.py > /tmp/dg/detr_tf32.log 2>&1 &
timeout 250 python3 -m pytest -q -p no:cacheprovider -rA -m cuda tests/core \
  > "$OUT/h200_cuda_tests.log" 2>&1
echo "[round] cuda tests done at +$(( $(date +%s) - T0 ))s: $(tail -1 "$OUT/h200_cuda_tests.log")"
mkdir -p /tmp/i28
timeout 150 python3 benchmarks/gpu_issue28.py /tmp/i28/gpu_issue28 > /tmp/i28/gpu_issue28.log 2>&1
timeout 45 python3 benchmarks/cache_read.py --device cuda --mb 100 --repeats 2 \
  --out /tmp/i28/cuda_cache_read > /tmp/i28/cuda_cache_read.log 2>&1
echo "[round] issue-28 scripts done at +$(( $(date +%s) - T0 ))s"
tar czf "$OUT/issue28.tgz" -C /tmp i28
wait
echo "[round] zoo cases done at +$(( $(date +%s) - T0 ))s"
python3 benchmarks/zoo/run.py --merge $(dirname $(ls /tmp/dg/*/results.json)) --out "$OUT/zoo_dg" | head -12
tar czf "$OUT/dg_logs.tgz" --exclude='*.cache' --exclude='nb.py' -C /tmp dg
tail -25 /tmp/i28/gpu_issue28.log; tail -8 /tmp/i28/cuda_cache_read.log; tail -12 /tmp/dg/detr_tf32.log
grep -E "passed|failed|PASSED|FAILED|ERROR" "$OUT/h200_cuda_tests.log" | tail -30
