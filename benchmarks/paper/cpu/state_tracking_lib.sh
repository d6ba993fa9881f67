# Sourced by the state-tracking reproductions (state_tracking_parity.sh, chomsky_regular.sh, word_problems.sh,
# flipflop.sh): `suite NAME ARGS...` runs `ssmbench eval ARGS --seeds $SEEDS` into OUT/NAME at the lowest priority,
# single-threaded, and marks it OUT/NAME.done (a re-run skips it; a failure is listed in OUT/failed.txt).
#   STEPS=tiny  a seconds-long check of the script itself: 4 steps, 32 samples, one seed, one short test length
#   SEEDS=0,1,2 the training seeds (default); THREADS=1 torch threads a run
set -euo pipefail
out="${1:?usage: $(basename "$0") OUT}"
mkdir -p "$out"
seeds="${SEEDS:-0,1,2}"
tiny=()        # training runs
tiny_score=()  # scoring a checkpoint (eval.* keys only)
if [ "${STEPS:-}" = tiny ]; then
  seeds="${SEEDS:-0}"
  tiny_score=(-o eval.val_samples=32 -o eval.test_samples=32)
  tiny=(-o train.steps=4 -o train.warmup_steps=0 -o train.eval_every=2 -o train.batch_size=8 -o eval.metric_batch_size=8
        "${tiny_score[@]}")
fi

# suite NAME [ssmbench eval arguments...]: one run a seed, OUT/NAME/<task>-seed<S>
suite() {
  local name="$1"; shift
  [ -f "$out/$name.done" ] && return 0
  if nice -n 19 ssmbench eval "$@" --seeds "$seeds" --device cpu -q -o hardware.threads="${THREADS:-1}" \
      -o data.workers=0 "${tiny[@]}" --out "$out/$name" > "$out/$name.log" 2>&1; then
    touch "$out/$name.done"
  else
    echo "failed: $name (see $out/$name.log)" >> "$out/failed.txt"
  fi
}

# test_lengths LIST: LIST, or its first length alone under STEPS=tiny
test_lengths() {
  if [ "${STEPS:-}" = tiny ]; then echo "${1%%,*}" | cut -d- -f1 | cut -d: -f1; else echo "$1"; fi
}
