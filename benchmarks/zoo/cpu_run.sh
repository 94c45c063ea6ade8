#!/usr/bin/env bash
# The CPU zoo with Inductor on a many-core machine (the GPU machine's 16 cores, CUDA hidden):
# tiny sizes, every case's phases many at a time (benchmarks/zoo/parallel.py), each process
# with one torch thread and one Inductor compile thread, longest first, under one overall
# deadline. Always writes OUT/zoo_cpu_inductor/results.md (+ results.json): every case, those
# the deadline left out as "not run (time)".
# usage: bash benchmarks/zoo/cpu_run.sh OUT [JOBS] [DEADLINE_S] [parallel.py options...]
#   JOBS: phases at a time (default: every core); DEADLINE_S: default 480, so that one device
#   call of 9 minutes holds the run, the table and the tar.
#   Columns: default precompile_nb + torch.compile (cold, steady), no warm starts; add --warm
#   for the fresh-process warm starts, --no-compile-baseline to leave torch.compile out,
#   --models a,b / --workloads infer,train for a subset, --rounds 0 to skip steady state.
set -uo pipefail
CORES=$(nproc)  # before OMP_NUM_THREADS=1, which nproc honours
OUT=$1; J=${2:-$CORES}; D=${3:-480}
shift $(( $# < 3 ? $# : 3 ))
export CUDA_VISIBLE_DEVICES= TORCHINDUCTOR_COMPILE_THREADS=1 OMP_NUM_THREADS=1 \
  MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/zoo_cpu_ind}
PY=${PY:-python3}
R=$OUT/zoo_cpu_inductor
mkdir -p "$R"
{ echo "start $(date -u +%FT%TZ), $CORES cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$PY" -c "from benchmarks.zoo import _tv_shim; _tv_shim.install(); import torch, transformers, timm
print('torch', torch.__version__, '| transformers', transformers.__version__, '| timm', timm.__version__)" 2>&1 | tail -1
  echo "jobs $J, deadline $D s, options: $*"; } > "$R/run_info.txt"
"$PY" benchmarks/zoo/parallel.py --out "$R" --jobs "$J" --deadline "$D" --device cpu \
  --size tiny --backend inductor "$@" > "$R/run.log" 2>&1
tail -3 "$R/run.log"
echo "end $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$R/run_info.txt"
# the phases' logs and result files (not the artifacts: their caches are large)
tar czf "$OUT/zoo_cpu_inductor_work.tgz" --exclude=nb.cache --exclude=nb.py -C "$R" work
