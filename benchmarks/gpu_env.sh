# Sourced by the gpu_roundN.sh scripts with ROUND set: the environment of every part (bytecode
# compiled as an installed package has it, one Inductor cache for the round on the machine)
# and `say`, which prints a line with the seconds since the part began.
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/${ROUND}_ind
python3 -m compileall -q precompile_nb
# Round 37's host had a torch with no .pyc files and PYTHONDONTWRITEBYTECODE=1 set: every
# process compiled torch, Triton and sympy from source (benchmarks/site_bytecode.py says more).
# Compiled here once a machine, from round 38 on (GPU_SITE_BYTECODE=0: as before).
export GPU_SITE_BYTECODE=${GPU_SITE_BYTECODE:-1}  # a part's scripts inherit the round's choice
if [ "$GPU_SITE_BYTECODE" = 1 ] && [ ! -e /tmp/pyc/.site_bytecode ]; then
  python3 benchmarks/site_bytecode.py torch torch._inductor.compile_fx torch._dynamo triton \
    transformers timm torchvision && touch /tmp/pyc/.site_bytecode
fi
T0=$(date +%s)
say() { echo "[$ROUND] $* at +$(( $(date +%s) - T0 ))s"; }
# What a part ran on and with: the card's name, the commit and the tree's changes, into $1.
record_machine() {
  nvidia-smi --query-gpu=name --format=csv,noheader | head -1 > "$1/card.txt"
  git rev-parse HEAD > "$1/head.txt"; git status --short > "$1/tree_changes.txt"
}
# On an H200: issue 28's H200 points (the zoo and the cache read, gpu_round34.sh h200) into $1;
# on another card: the rest of the arguments, run as a command.
h200_else() {
  local out=$1; shift
  if grep -q H200 "$out/card.txt"; then bash benchmarks/gpu_round34.sh h200 "$out"; else "$@"; fi
}
# `step OUT NAME SECONDS CMD...`: CMD under `timeout SECONDS`, its output in OUT/NAME.log, then
# a `say` line with the log's first 900 characters on one line.
step() {
  local out=$1 name=$2 secs=$3; shift 3
  timeout "$secs" "$@" > "$out/$name.log" 2>&1
  say "$name: $(tr '\n' ';' < "$out/$name.log" | cut -c1-900)"
}
