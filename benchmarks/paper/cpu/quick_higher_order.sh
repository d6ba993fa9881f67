#!/usr/bin/env bash
# The docs/results.md rows for the higher-order tasks on a CPU: `quick` DLR, DSS_EXP and LocalAttention on
# ListOps-Subtrees (short expressions) and Pathfinder-128 (2,000 images), one run at a time, then the table.
#   benchmarks/paper/cpu/quick_higher_order.sh OUT [MODELS...]
set -euo pipefail
out="${1:?usage: quick_higher_order.sh OUT [MODELS...]}"
shift || true
models=("${@:-dlr dss_exp local_attention}")
read -r -a models <<< "${models[*]}"
mkdir -p "$out"
[ -d data/listops_subtrees-short ] || ssmbench generate listops_subtrees --preset short --n 5000 --out data/ -q
[ -d data/pathfinder-128 ] || ssmbench generate pathfinder --size 128 --n 2000 --out data/ -q
for model in "${models[@]}"; do
  for task in listops_subtrees pathfinder; do
    [ -f "$out/$model-$task/metrics.json" ] && continue
    if [ -f "$out/$model-$task/config.json" ]; then
      ssmbench eval --resume "$out/$model-$task" -q
    else
      ssmbench eval --model "$model" --task "$task" --device cpu -q --out "$out/$model-$task"
    fi
  done
done
ssmbench compare "$out"/*/ --markdown | tee "$out/table.md"
