#!/usr/bin/env bash
# The `quick` atomic rows (docs/results.md) for the given models on the 11 atomic tasks, skipping runs that already
# have metrics.json. Each copy runs one job at a time (single-threaded, niced: machines are shared); several copies may
# run side by side on one OUT (each run is claimed with an atomic mkdir), e.g. one per CPU core, or several sharing one
# GPU with DEVICE=cuda:
#   [DEVICE=cuda] [TASKS="select context_shift"] benchmarks/paper/quick_atomic_models.sh OUT MODEL [MODEL ...] &
#   [DEVICE=cuda] [TASKS="select context_shift"] benchmarks/paper/quick_atomic_models.sh OUT MODEL [MODEL ...] &
# A claim whose run failed or was killed stays as OUT/MODEL-TASK.claim: delete it to run that job again.
set -euo pipefail
out="${1:?usage: quick_atomic_models.sh OUT MODEL [MODEL ...]}"
shift
mkdir -p "$out"
for model in "$@"; do
  for task in ${TASKS:-shift cumsum cummax reverse sort select select_fixed solve solve_fixed context_shift mips}; do
    [ -f "$out/$model-$task/metrics.json" ] && continue
    mkdir "$out/$model-$task.claim" 2>/dev/null || continue
    rm -rf "$out/$model-$task"
    if OMP_NUM_THREADS=1 nice -n 10 ssmbench eval --model "$model" --task "$task" --device "${DEVICE:-cpu}" -q \
        --out "$out/$model-$task" > "$out/$model-$task.log" 2>&1; then
      rmdir "$out/$model-$task.claim"
    else
      echo "failed: $model $task" >> "$out/failed.txt"
    fi
  done
done
