# Sourced by the gpu_roundN.sh scripts with ROUND set: the environment of every part (bytecode
# compiled as an installed package has it, one Inductor cache for the round on the machine)
# and `say`, which prints a line with the seconds since the part began.
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/${ROUND}_ind
python3 -m compileall -q precompile_nb
# Round 37's host had a torch with no .pyc files and PYTHONDONTWRITEBYTECODE=1 set: every
# process compiled torch, Triton and sympy from source (benchmarks/site_bytecode.py says more).
# Compiled here once a machine, from round 38 on (GPU_SITE_BYTECODE=0: as before).
if [ "${GPU_SITE_BYTECODE:-1}" = 1 ] && [ ! -e /tmp/pyc/.site_bytecode ]; then
  python3 benchmarks/site_bytecode.py torch torch._inductor.compile_fx torch._dynamo triton \
    transformers timm torchvision && touch /tmp/pyc/.site_bytecode
fi
T0=$(date +%s)
say() { echo "[$ROUND] $* at +$(( $(date +%s) - T0 ))s"; }
