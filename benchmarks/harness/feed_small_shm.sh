#!/bin/sh
# The host-bound proxy beside the feeds, alternating a roomy /dev/shm with a container's default 64 MiB one
# (a tmpfs mounted over /dev/shm in a private mount namespace; needs root or unprivileged user namespaces).
# Run from the repository root:  sh benchmarks/harness/feed_small_shm.sh [PAIRS] > benchmarks/results/feed_small_shm_cpu.txt
for i in $(seq "${1:-3}"); do
  echo "== /dev/shm as it is ($(df -m --output=avail /dev/shm | tail -1 | tr -d ' ') MiB free)"
  python benchmarks/harness/feed_host_cost.py --beside-step --rounds 6 2>&1 | grep -v "UserWarning\|rationality"
  echo "== /dev/shm of 64 MiB"
  unshare -m sh -c 'mount -t tmpfs -o size=64m tmpfs /dev/shm && python benchmarks/harness/feed_host_cost.py --beside-step --rounds 6' 2>&1 | grep -v "UserWarning\|rationality"
done
