#!/usr/bin/env bash
# Harness overhead and data wait at the paper setting on one GPU (issue 25, item 6): for DLR, ATTENTION, S4D and
# LRU, `ssmbench.evaluate` with batches sent through the feed's pinned buffers (staged, the default) and through the
# former DataLoader pin-memory thread (loader-pinned), each against the bare loop; then the other models with a
# paper row (DSS_EXP, LaS, LaS-chunk), staged only. About 2 minutes on an H100 / H200.
# Usage: benchmarks/gpu/harness_overhead.sh OUTDIR [DEVICE] [STEPS]
# Dry run on a CPU: SKIP_INSTALL=1 AB_LIMIT=900 MORE_LIMIT=900 benchmarks/gpu/harness_overhead.sh /tmp/ho cpu 1
[ -n "${SKIP_INSTALL:-}" ] || python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
set -u
out=${1:?OUTDIR}; device=${2:-cuda}; steps=${3:-150}
mkdir -p "$out"
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; git rev-parse HEAD
  git status --short -- ssmbench benchmarks reference_models; } > "$out/env.txt" 2>&1
run() {  # NAME TIMEOUT_S ARGS...: one benchmark process, its rows as they come, never past its time
  local name=$1 limit=$2; shift 2
  timeout -s INT -k 10 "$limit" python3 benchmarks/harness.py --settings paper --device "$device" --steps "$steps" \
      --workers 4 --json "$out/$name.json" "$@" > "$out/$name.txt" 2> "$out/$name.err"
  echo "$name: exit $?" >> "$out/status.txt"
}
run paper_ab "${AB_LIMIT:-90}" --models dlr attention s4d lru --feed staged loader-pinned
run paper_more "${MORE_LIMIT:-40}" --models dss_exp las_chunk las --feed staged
cat "$out"/paper_ab.txt "$out"/paper_more.txt
