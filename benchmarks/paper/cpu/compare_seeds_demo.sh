#!/usr/bin/env bash
# The README's `compare` example: DLR on CUMSUM (quick preset, L = 512) in two configurations (100 and 400 steps),
# three training seeds each, then the table. About 1,500 steps in all on the CPU.
#   bash benchmarks/paper/cpu/compare_seeds_demo.sh [RUNS_ROOT]
set -euo pipefail
root="${1:-runs/compare-demo}"
for steps in 100 400; do
  ssmbench eval --model dlr --task cumsum --seeds 0,1,2 -o train.steps=$steps -o train.eval_every=$((steps / 2)) \
    --runs-root "$root" -q
done
ssmbench compare "$root"/*/cumsum-seed*
ssmbench compare "$root"/*/cumsum-seed* --markdown
