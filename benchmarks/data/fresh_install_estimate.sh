#!/bin/bash
# The --dry-run estimate right after a fresh install, against the build that follows it (issue 37, item 5).
#
#   benchmarks/data/fresh_install_estimate.sh OUT [dry|cold]
#
# A fresh install is simulated with an empty private Numba cache (NUMBA_CACHE_DIR=OUT/numba: no *.nbi / *.nbc)
# and an empty ssmbench record of compile times (XDG_CACHE_HOME=OUT/xdg); the shared caches are not touched.
# `dry` (default): a cold --dry-run, then the build, then a warm --dry-run; `cold`: the build alone (its own
# estimate compiles). Set PYTHONPATH to an unpacked older tree (`git archive REV`, generators/ etc. copied into
# ssmbench/) to measure that code. Prints the estimate lines, the wall times and the load.
set -u
OUT=$1; MODE=${2:-dry}
rm -rf "$OUT"; mkdir -p "$OUT"
export NUMBA_CACHE_DIR=$OUT/numba XDG_CACHE_HOME=$OUT/xdg PYTHONSAFEPATH=1
cd "$OUT"
ARGS=(generate pathfinder --size 128 --n 6000 --workers 2 --out "$OUT/data")
run() {  # LABEL ARGS...: the estimate line (if any) and the wall time
    local label=$1; shift
    local t0; t0=$(date +%s.%N)
    ssmbench "$@" 2>&1 | tr '\r' '\n' | grep -E "^pathfinder-128:|complete" | sed "s/^/  /"
    echo "$label: wall $(echo "$(date +%s.%N) - $t0" | bc) s"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$MODE" = dry ]; then
    run "dry run, cold cache" "${ARGS[@]}" --dry-run
    run "build" "${ARGS[@]}"
    run "dry run, warm cache" "${ARGS[@]}" --dry-run
else
    run "build, cold cache" "${ARGS[@]}"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
