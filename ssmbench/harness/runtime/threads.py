"""CPU threads of a run: torch's intra-op threads from the CPUs this process may use, single-threaded data workers.

torch's default is one thread per core it sees, whatever else runs there. On a shared machine (a cluster node, a
laptop, a CI runner) that oversubscribes the cores: OpenMP threads that spin while waiting for each other make a
step several times slower (measured: 5.7-7.5x on a 2-core machine at load 8; `benchmarks/harness/contention.py`). The
harness therefore uses

    threads = CPUs this process may use (affinity, cgroup CPU quota) - data worker processes   (at least 1)

unless `-o hardware.threads=N` or `OMP_NUM_THREADS` says otherwise, and every data worker runs one thread and
ignores SIGINT / SIGTERM (the training process owns them, saves its step and shuts them down).

Example:
    >>> choose_threads(requested=3, workers=1, environ={})
    (3, 'hardware.threads')
    >>> choose_threads(requested=None, workers=1, environ={"OMP_NUM_THREADS": "2"})
    (2, 'OMP_NUM_THREADS')
    >>> n, why = choose_threads(requested=None, workers=10 ** 6, environ={})
    >>> n, why.startswith("usable CPUs")
    (1, True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def cgroup_cpu_limit(root: Path = CGROUP) -> float | None:
    """CPUs the cgroup quota allows (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), None
    when there is no quota."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), capped by the cgroup quota; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        n = min(n, max(1, math.ceil(limit)))
    return max(1, n)


def choose_threads(requested: int | None, workers: int,
                   environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """(torch intra-op threads, why): `requested` (hardware.threads) > `OMP_NUM_THREADS` > usable CPUs minus the
    data worker processes."""
    environ = os.environ if environ is None else environ
    if requested:
        return int(requested), "hardware.threads"
    omp = environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp), "OMP_NUM_THREADS"
    cpus = usable_cpus()
    return max(1, cpus - workers), f"usable CPUs ({cpus}) - data workers ({workers})"


def apply_threads(requested: int | None, workers: int) -> dict[str, object]:
    """Set torch's intra-op threads for this process; returns what metrics.json records."""
    import torch

    n, why = choose_threads(requested, workers)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return {"threads": n, "threads_rule": why}


def data_worker_init(worker_id: int) -> None:
    """DataLoader `worker_init_fn`: one thread (torch and Numba), and SIGINT / SIGTERM ignored, so a signal sent to
    the whole process group (Ctrl-C, a scheduler's preemption) reaches the training process, which saves its step
    and shuts the workers down, instead of killing a worker under it."""
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)
    try:
        import numba

        numba.set_num_threads(1)
    except (ImportError, ValueError):  # pragma: no cover - numba is a dependency; a layer without thread control
        pass
