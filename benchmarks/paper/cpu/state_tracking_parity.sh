#!/usr/bin/env bash
# The parity column of Grazzi et al. (ICLR 2025) at CPU size: the negeig_quick/parity rows (paper_negeig.toml:
# 2 layers, H = 64, training lengths 2-20, tested at 40, 80, 160 = 2x-8x), attention, Mamba [0,1] / [-1,1], DeltaNet
# [0,1] / [-1,1] (beta in [0,2]), and ssmbench's LSTM, DLR, S4D, LRU; three seeds each (the paper: best of 3).
#   bash benchmarks/paper/cpu/state_tracking_parity.sh OUT          # about 2-4 min a run on one core, 27 runs
#   STEPS=tiny bash benchmarks/paper/cpu/state_tracking_parity.sh /tmp/check   # seconds: checks the script
#   python -m benchmarks.paper.state_tracking_table OUT             # the table, published numbers beside
source "$(dirname "$0")/state_tracking_lib.sh"
for variant in ${VARIANTS:-lstm mamba_neg deltanet_neg mamba deltanet attention dlr s4d lru}; do
  suite "parity-$variant" --model "${variant%_neg}" --task parity_check --preset "negeig_quick/parity/$variant" \
    -o eval.test_lengths="$(test_lengths 40,80,160)"
done
