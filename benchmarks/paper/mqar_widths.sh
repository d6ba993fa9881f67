#!/usr/bin/env bash
# MQAR test accuracy against model width (Zoology's Figure 2 axis) with the `quick` [mqar] section: one run per
# (model, d_model), then `python benchmarks/paper/mqar_widths.py OUT` draws the table and the picture. Jobs are claimed with
# an atomic mkdir, so several copies may share one OUT (one per CPU core); each runs single-threaded and niced.
#   [WIDTHS="32 64 128"] benchmarks/paper/mqar_widths.sh OUT MODEL [MODEL ...] &
# A model may be a plug-in `module:Class`. A claim whose run failed stays as OUT/NAME-dH.claim: delete it to rerun.
set -euo pipefail
out="${1:?usage: mqar_widths.sh OUT MODEL [MODEL ...]}"
shift
mkdir -p "$out"
for width in ${WIDTHS:-32 64 128}; do
  for model in "$@"; do
    name="${model##*:}"; name="${name,,}"
    job="$name-d$width"
    [ -f "$out/$job/metrics.json" ] && continue
    mkdir "$out/$job.claim" 2>/dev/null || continue
    if nice -n 19 ssmbench eval --task mqar --model "$model" --device cpu -q -o model.d_model="$width" \
        -o hardware.threads=1 -o data.workers=0 --out "$out/$job" > "$out/$job.log" 2>&1; then
      rmdir "$out/$job.claim"
    else
      echo "failed: $job" >> "$out/failed.txt"
    fi
  done
done
