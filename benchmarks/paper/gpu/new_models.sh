#!/usr/bin/env bash
# Issue 18's GPU checks for S4, SGConv and Mamba, in two calls on one warm GPU machine (outputs under OUT):
#   benchmarks/paper/gpu/new_models.sh start OUT     # ~3 min: install, models.py --device cuda (GPU alone), pytest -m gpu;
#                                              # leaves mamba_ssm's scan compiling and quick runs going (setsid)
#   benchmarks/paper/gpu/new_models.sh finish OUT [SECONDS]   # fused-kernel tests once built, quick runs until SECONDS
#                                              # (default 300) have passed, then the compare table and a tarball
# The quick runs are `ssmbench eval --model M --task T --device cuda` (preset quick) for M in mamba, s4, sgconv,
# RUNNERS (default 6) at a time on the one GPU, Mamba's three missing CPU rows first; runs not finished by the
# deadline are stopped and left out. The fused scan is built from .mamba_src (state-spaces/mamba sources, see
# benchmarks/paper/build_mamba_scan.py), which the caller copies into the checkout and carries.
set -u
phase=${1:?start|finish}; out=${2:?OUT}
site=/tmp/mamba_site; quick=runs/quick_gpu
mkdir -p "$out" "$quick"
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
tests="tests/harness/test_gpu.py tests/reference_models/test_model_contracts.py tests/reference_models/test_mamba.py"
if [ "$phase" = start ]; then
  { date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
    python3 -c "import torch, numba, numpy, h5py; print('torch', torch.__version__, 'numba', numba.__version__,
'numpy', numpy.__version__, 'h5py', h5py.__version__)"; } > "$out/environment.txt" 2>&1
  python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 || cat "$out/install.log"
  cat "$out/environment.txt"
  setsid bash -c "MAX_JOBS=6 python3 benchmarks/paper/build_mamba_scan.py .mamba_src $site > /tmp/mamba_build.log 2>&1;
                  echo \$? > /tmp/mamba_build.rc" < /dev/null > /dev/null 2>&1 &
  python3 benchmarks/harness/models.py --device cuda --lengths 4096,16384,65536 2>&1 | tee "$out/models_gpu.txt"
  order="solve_fixed reverse sort shift cumsum cummax select select_fixed solve context_shift mips"
  for i in $(seq "${RUNNERS:-6}"); do
    setsid bash -c "DEVICE=cuda TASKS='$order' benchmarks/paper/quick_atomic_models.sh $quick mamba s4 sgconv" \
      < /dev/null > /dev/null 2>&1 &
    sleep 2
  done
  python3 -m pytest -m gpu -q -p no:cacheprovider $tests 2>&1 | tail -25 | tee "$out/gpu_tests.log"
  ls "$quick"
  exit 0
fi
limit=${3:-300}; t0=$(date +%s)
while [ ! -f /tmp/mamba_build.rc ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do sleep 5; done
tail -5 /tmp/mamba_build.log > "$out/mamba_build_tail.txt" 2>&1
cat "$out/mamba_build_tail.txt"
if [ "$(cat /tmp/mamba_build.rc 2>/dev/null)" = 0 ]; then
  PYTHONPATH=$site python3 -m pytest -m gpu -q -p no:cacheprovider tests/reference_models/test_mamba.py -k fused -rA \
    2>&1 | tail -25 | tee "$out/mamba_fused_tests.log"
fi
while [ $(( $(date +%s) - t0 )) -lt "$limit" ] && pgrep -f quick_atomic_models.sh > /dev/null; do sleep 10; done
pkill -INT -f "ssmbench eval" ; pkill -f quick_atomic_models.sh; sleep 5
done_runs=$(for m in $quick/*/metrics.json; do [ -f "$m" ] && dirname "$m"; done)
[ -n "$done_runs" ] && ssmbench compare $done_runs --markdown > "$out/quick_gpu_table.md" 2>&1
cat "$out/quick_gpu_table.md"
tar czf "$out/quick_gpu_runs.tar.gz" --exclude='*.pt' --exclude='checkpoints' $quick /tmp/mamba_build.log 2>/dev/null
ls -la "$out"
