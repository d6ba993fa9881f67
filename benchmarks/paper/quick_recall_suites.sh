#!/usr/bin/env bash
# The `quick` rows of the recall groups (docs/results.md: zoology = MQAR + induction heads, mad = the MAD suite): one
# suite per (group, model), each ending with its `compare` table, then the length sweep of every induction-heads run.
# Jobs are claimed with an atomic mkdir, so several copies may share one OUT (one per CPU core); each job runs
# single-threaded and niced (machines are shared). A model may be a registered name or a plug-in `module:Class`.
#   SUITES="zoology mad" benchmarks/paper/quick_recall_suites.sh OUT MODEL [MODEL ...] &
#   SUITES="zoology mad" benchmarks/paper/quick_recall_suites.sh OUT MODEL [MODEL ...] &
# A suite re-run (the same command) skips its finished tasks and resumes an interrupted one; a claim whose job failed
# stays as OUT/GROUP-NAME.claim: delete it to run that job again.
set -euo pipefail
out="${1:?usage: quick_recall_suites.sh OUT MODEL [MODEL ...]}"
shift
mkdir -p "$out"
for group in ${SUITES:-zoology mad}; do
  for model in "$@"; do
    name="${model##*:}"; name="${name,,}"
    job="$group-$name"
    [ -f "$out/$job.done" ] && continue
    mkdir "$out/$job.claim" 2>/dev/null || continue
    if nice -n 19 ssmbench eval --task "$group" --model "$model" --device cpu -q \
        -o hardware.threads=1 -o data.workers=0 --out "$out/$job" > "$out/$job.log" 2>&1; then
      if [ -f "$out/$job/induction_heads/checkpoints/best.pt" ]; then
        nice -n 19 ssmbench eval --checkpoint "$out/$job/induction_heads/checkpoints/best.pt" \
          --lengths "${LENGTHS:-64,128,256,512,1024,2048,4096}" -o hardware.threads=1 -o data.workers=0 \
          --out "$out/$job/induction_heads_lengths" >> "$out/$job.log" 2>&1 || echo "failed: $job lengths" >> "$out/failed.txt"
      fi
      touch "$out/$job.done"; rmdir "$out/$job.claim"
    else
      echo "failed: $job" >> "$out/failed.txt"
    fi
  done
done
