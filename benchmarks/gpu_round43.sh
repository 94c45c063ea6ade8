#!/usr/bin/env bash
# Round 43's device calls, torch's bytecode compiled first (GPU_SITE_BYTECODE=1 by default):
#   bash benchmarks/gpu_round43.sh first OUT   on an H200: the zoo and the cache read (issue 28's
#       H200 points, gpu_round34.sh h200, ~510 s); on another card: which kernels of the two
#       training steps' cold precompiles take Triton's own launcher and why (launcher_probe.py),
#       with Inductor's kernel names (PRECOMPILE_NB_SHORT_KERNEL_NAMES=0) and with names cut
#       under Triton's 150 characters (~1 min each), the kernel-name CUDA test, the GPU
#       libraries started beside the lowering (beside_probe.py, ~2 min), then the suite's
#       cold starts once (gpu_round37.sh cold, ~4 min)
#   bash benchmarks/gpu_round43.sh cold OUT K  the suite's cold starts, K runs
#   bash benchmarks/gpu_round43.sh suite OUT   the warm suite (gpu_round37.sh suite)
#   bash benchmarks/gpu_round43.sh probes OUT  two experiments on the training steps' tuning
#       run: fewer benchmark iterations a configuration (tune_probe.py, ~2.5 min) and the
#       transformer step's GPU libraries started beside the lowering, three more pairs
#       (beside_probe.py, ~2 min)
set -uo pipefail
PART=$1; OUT=$2
ROUND=round43; source benchmarks/gpu_env.sh
record_machine "$OUT"
launchers_then_cold() {
  PRECOMPILE_NB_SHORT_KERNEL_NAMES=0 timeout 120 python3 benchmarks/launcher_probe.py \
    --out "$OUT/launchers_long_names" > "$OUT/launchers_long_names.log" 2>&1
  say "launchers, Inductor's names: $(tr '\n' ';' < "$OUT/launchers_long_names.log" | cut -c1-900)"
  timeout 120 python3 benchmarks/launcher_probe.py --out "$OUT/launchers" \
    > "$OUT/launchers.log" 2>&1
  say "launchers, names cut: $(tr '\n' ';' < "$OUT/launchers.log" | cut -c1-900)"
  timeout 120 python3 -m pytest -q -p no:cacheprovider -rA -m cuda \
    tests/core/test_kernel_names.py > "$OUT/pytest_kernel_names.log" 2>&1
  say "pytest: $(tail -n 1 "$OUT/pytest_kernel_names.log")"
  timeout 150 python3 benchmarks/beside_probe.py --rounds 2 --out "$OUT/beside" \
    > "$OUT/beside.log" 2>&1
  say "beside: $(tr '\n' ';' < "$OUT/beside.log" | cut -c1-900)"
  bash benchmarks/gpu_round37.sh cold "$OUT" 1
}
case "$PART" in
  first) h200_else "$OUT" launchers_then_cold ;;
  cold) bash benchmarks/gpu_round37.sh cold "$OUT" "${3:-1}" ;;
  suite) bash benchmarks/gpu_round37.sh suite "$OUT" 1 ;;
  probes)
    timeout 240 python3 benchmarks/tune_probe.py --out "$OUT/tune" > "$OUT/tune.log" 2>&1
    say "tune: $(tr '\n' ';' < "$OUT/tune.log" | cut -c1-900)"
    timeout 200 python3 benchmarks/beside_probe.py --workloads transformer_train --rounds 3 \
      --out "$OUT/beside3" > "$OUT/beside3.log" 2>&1
    say "beside: $(tr '\n' ';' < "$OUT/beside3.log" | cut -c1-600)"
    ;;
  *) echo "usage: bash benchmarks/gpu_round43.sh first|cold|suite|probes OUT [K]" >&2; exit 2 ;;
esac
