#!/usr/bin/env bash
# A CPU rerun of part of the `quick` atomic table (docs/results.md) with the current code: DLR and ATTENTION on
# SHIFT, CUMSUM and CUMMAX, one run at a time, then the table.
#   benchmarks/paper/cpu/quick_atomic_subset.sh OUT
set -euo pipefail
out="${1:?usage: quick_atomic_subset.sh OUT}"
mkdir -p "$out"
for model in dlr attention; do
  for task in shift cumsum cummax; do
    [ -f "$out/$model-$task/metrics.json" ] && continue
    rm -rf "$out/$model-$task"
    ssmbench eval --model "$model" --task "$task" --device cpu -q --out "$out/$model-$task"
  done
done
ssmbench compare "$out"/*/ --markdown | tee "$out/table.md"
