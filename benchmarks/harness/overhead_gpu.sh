#!/usr/bin/env bash
# Harness overhead and data wait at the paper setting on one GPU (issue 25, item 6), in two measurements:
#  1. rows: `benchmarks/harness/overhead.py` -- a bare loop, then a whole `ssmbench.evaluate` run (150 steps, 4 workers), per
#     model with a paper row: mean and median pace, data wait and where it fell, slowest step, start-up;
#  2. step_ab: `benchmarks/harness/step_ab.py` -- bare step, the harness's train_step, and train_step on the feed's batches,
#     interleaved in rounds on one model and optimiser (what drift between the two parts of 1. cannot touch), with
#     the training thread's split of a step: CPU / waiting for a core / asleep (mostly the GIL), and one profiled
#     round of each: the device's kernel time against the step's wall (a host-bound step leaves the GPU idle);
#  3. beside: `benchmarks/harness/feed_host_cost.py --beside-step` -- the plain and the staged feed beside a host-bound step
#     (host only, no GPU used): what the staging thread's GIL takes cost a step that launches kernels non-stop.
#  4. with COMPILE_AB=1: step_ab for DLR and S4D under torch.compile (Inductor does not fuse complex operators, so
#     DLR may gain little; up to COMPILE_LIMIT s).
# About 3.5 minutes on an H100 / H200 (plus up to 4 with COMPILE_AB=1).
# Usage: benchmarks/harness/overhead_gpu.sh OUTDIR [DEVICE] [STEPS]
# Dry run on a CPU: SKIP_INSTALL=1 ROWS_LIMIT=900 AB_LIMIT=900 MODELS="dlr" AB_ROUNDS=2 BESIDE_ROUNDS=2 \
#     benchmarks/harness/overhead_gpu.sh /tmp/ho cpu 2
[ -n "${SKIP_INSTALL:-}" ] || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
set -u
out=${1:?OUTDIR}; device=${2:-cuda}; steps=${3:-150}
models=${MODELS:-dlr attention s4d lru dss_exp las_chunk las}
mkdir -p "$out"
{ date -u; nproc; df -m /dev/shm; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; git rev-parse HEAD
  git status --short -- ssmbench benchmarks reference_models; } > "$out/env.txt" 2>&1
run() {  # NAME TIMEOUT_S SCRIPT ARGS...: one benchmark process, its rows as they come, never past its time
  local name=$1 limit=$2; shift 2
  timeout -s INT -k 10 "$limit" python3 "$@" > "$out/$name.txt" 2> "$out/$name.err"
  echo "$name: exit $?" >> "$out/status.txt"
}
# shellcheck disable=SC2086  # $models: one word per model
run rows "${ROWS_LIMIT:-120}" benchmarks/harness/overhead.py --settings paper --device "$device" --steps "$steps" \
    --workers 4 --json "$out/rows.json" --models $models
# shellcheck disable=SC2086
run step_ab "${AB_LIMIT:-120}" benchmarks/harness/step_ab.py --setting paper --device "$device" --workers 4 \
    --rounds "${AB_ROUNDS:-12}" --busy --models $models
run beside "${BESIDE_LIMIT:-60}" benchmarks/harness/feed_host_cost.py --beside-step --workers 4 \
    --rounds "${BESIDE_ROUNDS:-12}"
if [ -n "${COMPILE_AB:-}" ]; then  # opt-in: the host-bound models under torch.compile (fewer, fused kernels)
  run step_ab_compile "${COMPILE_LIMIT:-240}" benchmarks/harness/step_ab.py --setting paper --device "$device" --workers 4 \
      --rounds "${AB_ROUNDS:-12}" --busy --compile --models dlr s4d
fi
cat "$out"/rows.txt "$out"/step_ab.txt "$out"/beside.txt "$out"/step_ab_compile.txt 2>/dev/null
