#!/usr/bin/env bash
# `quick` preset runs of DLR and ATTENTION on all 11 atomic tasks, four at a time, then the compare table.
# Usage: benchmarks/paper/gpu/quick_all.sh OUTDIR [DEVICE]
set -u
out=${1:?OUTDIR}; device=${2:-cuda}
mkdir -p "$out" runs/quick
tasks="shift cumsum cummax select_fixed solve_fixed reverse solve select sort context_shift mips"
for model in dlr attention; do for task in $tasks; do echo "$model $task"; done; done |
  xargs -P 4 -n 2 sh -c 'ssmbench eval --model "$0" --task "$1" --device '"$device"' -q --out "runs/quick/$0-$1" \
      > "runs/quick/$0-$1.log" 2>&1 || echo "FAILED $0 $1" >> '"$out"'/quick_failures.txt'
ssmbench compare runs/quick/*/ --markdown > "$out/quick_table.md"
ssmbench compare runs/quick/*/ --json > "$out/quick_table.json"
