#!/usr/bin/env bash
# The `quick` atomic rows (docs/results.md) for the given models on the 11 atomic tasks, one run at a time on the
# CPU (single-threaded, niced: the machine is shared), skipping runs that already have metrics.json.
#   [TASKS="shift select"] benchmarks/cpu/quick_atomic_models.sh OUT MODEL [MODEL ...]
set -euo pipefail
out="${1:?usage: quick_atomic_models.sh OUT MODEL [MODEL ...]}"
shift
mkdir -p "$out"
for model in "$@"; do
  for task in ${TASKS:-shift cumsum cummax reverse sort select select_fixed solve solve_fixed context_shift mips}; do
    [ -f "$out/$model-$task/metrics.json" ] && continue
    rm -rf "$out/$model-$task"
    OMP_NUM_THREADS=1 nice -n 10 ssmbench eval --model "$model" --task "$task" --device cpu -q \
      --out "$out/$model-$task" > "$out/$model-$task.log" 2>&1 || echo "failed: $model $task" >> "$out/failed.txt"
  done
done
