#!/usr/bin/env bash
# The zoo on the H200: realistic sizes, inductor, every column (precompile_nb and torch.compile
# cold + steady, both fresh-process warm starts), several cases at a time on the one GPU
# (16 CPU cores), longest first, merged into one table OUT/zoo_cuda_<part>/results.md.
# usage: bash benchmarks/zoo/gpu_run.sh OUT [PARALLEL] [PART]
#   PART: 1/2 or 2/2 runs one half of the cases, balanced by their estimated cost (each half
#   well under 9 minutes with PARALLEL=14); default 1/1, every case.
#   ZOO_FLAGS: extra run.py options for every case (e.g. "--timeout 300").
set -uo pipefail
OUT=$1; P=${2:-14}; PART=${3:-1/1}
export TORCHINDUCTOR_CACHE_DIR=/tmp/zoo_ind PYTHONUNBUFFERED=1
TAG=part$(echo "$PART" | tr / o)
WORK=/tmp/zoo_parts_$TAG
mkdir -p "$WORK" "$OUT"
START=$(date +%s)
python3 benchmarks/zoo/run.py --list-cases --part "$PART" > "$WORK/cases.txt"
echo "$(wc -l < "$WORK/cases.txt") cases, $P at a time"
WORK="$WORK" xargs -P "$P" -L 1 sh -c \
  'python3 benchmarks/zoo/run.py --device cuda --size real --backend inductor --models "$0" --workloads "$1" --out "$WORK/$0__$1" ${ZOO_FLAGS:-} > "$WORK/$0__$1.log" 2>&1' \
  < "$WORK/cases.txt"
python3 benchmarks/zoo/run.py --merge "$WORK"/*/ --out "$OUT/zoo_cuda_$TAG" 2>&1 | tail -3
echo "part $PART: $(( $(date +%s) - START )) s"
tar czf "$OUT/zoo_parts_$TAG.tgz" -C /tmp "zoo_parts_$TAG"
