#!/usr/bin/env bash
# The regular tasks of Delétang et al. (ICLR 2023, Table 2) at CPU size: LSTM, attention and DLR on parity_check,
# even_pairs, cycle_navigation and modular_arithmetic with the `quick` chomsky section (2 layers, H = 64, 1,500
# steps), trained on lengths 1-40 as in the paper and tested on every 46th length of 41-500; three seeds (the paper
# reports the best of 10).
#   bash benchmarks/paper/cpu/chomsky_regular.sh OUT
#   STEPS=tiny bash benchmarks/paper/cpu/chomsky_regular.sh /tmp/check
source "$(dirname "$0")/state_tracking_lib.sh"
for task in parity_check even_pairs cycle_navigation modular_arithmetic; do
  for model in ${MODELS:-lstm attention dlr}; do
    suite "$task-$model" --model "$model" --task "$task" --preset quick -o L=40 -o train.length_min=1 \
      -o train.length_max=40 -o eval.test_lengths="$(test_lengths 41-500:46)"
  done
done
