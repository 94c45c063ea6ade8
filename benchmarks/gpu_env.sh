# Sourced by the gpu_roundN.sh scripts with ROUND set: the environment of every part (bytecode
# compiled as an installed package has it, one Inductor cache for the round on the machine)
# and `say`, which prints a line with the seconds since the part began.
export PYTHONPATH=$PWD PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/${ROUND}_ind
python3 -m compileall -q precompile_nb
T0=$(date +%s)
say() { echo "[$ROUND] $* at +$(( $(date +%s) - T0 ))s"; }
