#!/usr/bin/env bash
# The pattern of Merrill et al. (ICML 2024) at small lengths: the abelian Z60 against the non-solvable A5 and S5,
# at depth 1 and 2, with the `quick` word_problem section (H = 64, every prefix labelled, trained at L = 16) and
# tested at 32 and 64; LSTM, Mamba and attention by default (MODELS=...), three seeds.
#   bash benchmarks/paper/cpu/word_problems.sh OUT
#   STEPS=tiny bash benchmarks/paper/cpu/word_problems.sh /tmp/check
source "$(dirname "$0")/state_tracking_lib.sh"
for group in ${GROUPS_TO_RUN:-Z60 A5 S5}; do
  for depth in 1 2; do
    for model in ${MODELS:-lstm mamba attention}; do
      suite "$group-depth$depth-$model" --model "$model" --task word_problem --preset quick -o task.group="$group" \
        -o model.n_layers="$depth" -o eval.test_lengths="$(test_lengths 32,64)"
    done
  done
done
