#!/usr/bin/env bash
# CPU proxy of issue 25's learning-rate question: the paper's 1-layer DLR row (--preset paper) shrunk to L = 256 with
# N = 256 and the learning rate scaled to keep lr * N of the real run (5e-5 * 4096 = 0.2048 -> 8e-4; 1e-4 * 4096 ->
# 1.6e-3), 2,000 steps, on SELECT-FIXED (noise and zeros: their GPU results calibrate the proxy) and CUMMAX.
# One run at a time; a finished run is skipped on a re-run. Then the compare table.
#   benchmarks/paper/cpu/paper_lr_proxy.sh OUT
set -euo pipefail
out="${1:?usage: paper_lr_proxy.sh OUT}"
mkdir -p "$out"
common=(-o L=256 -o model.d_state=256 -o train.steps=2000 -o train.eval_every=500 -o eval.val_samples=640
        -o eval.test_samples=640 -o data.workers=1 --device cpu -q)
# afterwards: rm -r OUT/*/checkpoints OUT/*/plots (12 MB; results keep config.json and metrics)
for spec in "select_fixed noise" "select_fixed zeros" "cummax -"; do
  set -- $spec
  for lr in 8e-4 1.6e-3; do
    name="$1-${2}-lr$lr"; extra=(); [ "$2" != - ] && extra=(-o "values=$2")
    [ -f "$out/$name/metrics.json" ] && continue
    rm -rf "${out:?}/$name"
    ssmbench eval --model dlr --task "$1" --preset paper -o train.lr="$lr" "${extra[@]}" "${common[@]}" \
        --out "$out/$name"
  done
done
ssmbench compare "$out"/*/ --markdown | tee "$out/table.md"
