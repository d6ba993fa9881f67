#!/usr/bin/env bash
# One device call for issue 39's GPU measurements (prepare on the CPU: `DEVICE=cpu STEPS=tiny` runs every command
# below without CUDA graphs at a few steps). Writes into OUT:
#   step_graph.txt   bare step / train_step / + feed / graph + feed, paper setting, DLR S4D LRU attention (step_ab.py)
#   pack_step.txt    4 and 8 packed seeds against one by one, per step (pack_step.py)
#   packed_column/   the DLR Table-1 column (preset cells, seeds 0 and 1) as one packed suite (paper_grid.py --packed)
# Usage (repository root, GPU machine): benchmarks/harness/graph_step_gpu.sh OUT [GRID_BUDGET_SECONDS]
set -u
out=${1:?OUT}; budget=${2:-400}; device=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
mkdir -p "$out"
graph=(--cuda-graph); [ "$device" = cpu ] && graph=()
rounds=(--rounds 8 --window 20); [ "${STEPS:-}" = tiny ] && rounds=(--rounds 1 --window 2)
python3 benchmarks/harness/step_ab.py --setting paper --device "$device" --workers 4 "${graph[@]}" --busy \
  --models dlr s4d lru attention "${rounds[@]}" 2>&1 | tee "$out/step_graph.txt"
python3 benchmarks/harness/pack_step.py --model dlr --task cumsum --members 4 8 --setting paper --device "$device" ${STEPS:+--steps 2 --warmup 1} 2>&1 \
  | tee "$out/pack_step.txt"
tiny=(); [ "${STEPS:-}" = tiny ] && tiny=(--tiny --results "$out/packed_column" --runs "$out/packed_runs")
python3 benchmarks/paper/paper_grid.py --packed --budget "$budget" --device "$device" --workers 2 "${tiny[@]}" \
  2>&1 | tee "$out/packed_column.log"
