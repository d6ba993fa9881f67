#!/usr/bin/env bash
# Flip-flop language modelling (Liu et al., NeurIPS 2023) at CPU size: attention against the LSTM, trained on
# FFL(0.8) with the `quick` flipflop section, then each seed's best checkpoint scored on the dense FFL(0.1) and the
# sparse FFL(0.98) streams (`eval --checkpoint -o p_ignore=...`, the task's scoring keys) into RUN/dense, RUN/sparse.
#   bash benchmarks/paper/cpu/flipflop.sh OUT
#   STEPS=tiny bash benchmarks/paper/cpu/flipflop.sh /tmp/check
source "$(dirname "$0")/state_tracking_lib.sh"
for model in ${MODELS:-lstm attention}; do
  suite "flipflop-$model" --model "$model" --task flipflop --preset quick
  for run in "$out/flipflop-$model"/flipflop-seed*; do
    for pair in dense:0.1 sparse:0.98; do
      [ -f "$run/checkpoints/best.pt" ] && [ ! -f "$run/${pair%%:*}/metrics.json" ] || continue
      nice -n 19 ssmbench eval --checkpoint "$run/checkpoints/best.pt" -o p_ignore="${pair#*:}" -q \
        -o hardware.threads="${THREADS:-1}" -o data.workers=0 "${tiny_score[@]}" --out "$run/${pair%%:*}" \
        >> "$out/flipflop-$model.log" 2>&1 || echo "failed: $run ${pair%%:*}" >> "$out/failed.txt"
    done
  done
done
