#!/usr/bin/env bash
# One device call of the paper-protocol grid: install, run the next unfinished cells of benchmarks/paper/paper_grid.py
# (priority order, committed cells skipped) within BUDGET seconds, then pack what the call made into OUT:
#   paper_results.tar.gz   benchmarks/results/paper/<cell>/ of the cells finished in this call (commit them)
#   stopped_runs.tar.gz    config.json and metrics.jsonl of the runs stopped at the budget (their validation curve so far);
#                          their last.pt (13 MB for a DLR row) stays in runs/paper/ on the machine: the device returns
#                          only a few small files, so a stopped run resumes only on the same warm machine
# Usage (repository root, GPU machine): benchmarks/paper/gpu/paper_table1.sh OUT [BUDGET_SECONDS] [WORKERS] [PARALLEL]
# PARALLEL cells share the one GPU (a 1-layer DLR leaves most of an H100 idle)
# PACKED=1 (environment): the cells at their preset's own settings run as one packed suite per model (tasks x seeds
# 0 and 1 in one process; issue 39), e.g. PACKED=1 benchmarks/paper/gpu/paper_table1.sh OUT 540 2
set -u
out=${1:?OUT}; budget=${2:-540}; workers=${3:-6}; parallel=${4:-1}
export PYTHONUNBUFFERED=1
mkdir -p "$out" runs/paper
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 || cat "$out/install.log"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; df -m /dev/shm
  python3 -c "import torch, numba; print('torch', torch.__version__, 'numba', numba.__version__)"; } \
  > "$out/environment.txt" 2>&1
before=$(ls benchmarks/results/paper 2>/dev/null)
mode=(--parallel "$parallel"); [ "${PACKED:-0}" = 1 ] && mode=(--packed)
python3 benchmarks/paper/paper_grid.py --budget "$budget" --device cuda --workers "$workers" "${mode[@]}" 2>&1 | tee "$out/grid.log"
new=$(for d in benchmarks/results/paper/*/; do n=$(basename "$d"); echo "$before" | grep -qx "$n" || echo "$n"; done)
[ -n "$new" ] && tar czf "$out/paper_results.tar.gz" -C benchmarks/results/paper $new grid_log.tsv
stopped=$(for d in runs/paper/*/; do [ -f "$d/metrics.json" ] || basename "$d"; done 2>/dev/null)
[ -n "$stopped" ] && (cd runs/paper && tar czf "$out/stopped_runs.tar.gz" $(for n in $stopped; do
  ls "$n/config.json" "$n/metrics.jsonl" 2>/dev/null; done))
ls -la "$out"
