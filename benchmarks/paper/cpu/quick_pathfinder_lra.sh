#!/usr/bin/env bash
# The docs/results.md rows for LRA Pathfinder-32 on a CPU: `quick` DLR, S4D and LRU on a 4,000-image build,
# one run at a time (one thread each), then the table.
#   OMP_NUM_THREADS=1 nice -n 10 benchmarks/paper/cpu/quick_pathfinder_lra.sh OUT [MODELS...]
set -euo pipefail
out="${1:?usage: quick_pathfinder_lra.sh OUT [MODELS...]}"
shift || true
models=("${@:-dlr s4d lru}")
read -r -a models <<< "${models[*]}"
mkdir -p "$out"
[ -d data/pathfinder_lra-32 ] || ssmbench generate pathfinder_lra --size 32 --n 4000 --out data/ -q
for model in "${models[@]}"; do
  [ -f "$out/$model-pathfinder_lra/metrics.json" ] && continue
  echo "$model start $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  ssmbench eval --model "$model" --task pathfinder_lra --size 32 --device cpu -q --out "$out/$model-pathfinder_lra"
  echo "$model end $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
ssmbench compare "$out"/*/ --markdown | tee "$out/table.md"
