#!/usr/bin/env bash
# The paper's Table 5 DLR row (1 layer, L = 4096, 43.2K steps) on shift, cumsum and select_fixed, three runs side by
# side on one GPU, each stopped by SIGINT after LIMIT seconds (it checkpoints; `ssmbench eval --resume` continues it).
# Usage: benchmarks/paper/gpu/paper_atomic.sh OUTDIR [LIMIT_SECONDS]
set -u
out=${1:?OUTDIR}; limit=${2:-480}
mkdir -p "$out"
for task in shift cumsum select_fixed; do
  timeout -s INT "$limit" ssmbench eval --model dlr --task "$task" --preset paper --device cuda -q \
      -o data.workers=3 --out "runs/paper-dlr-$task" > "$out/paper-dlr-$task.out" 2> "$out/paper-dlr-$task.err" &
done
wait
ssmbench compare runs/paper-dlr-* --markdown > "$out/paper_table.md" 2>&1 || true
