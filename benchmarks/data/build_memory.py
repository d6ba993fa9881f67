"""Peak memory of a dataset build, summed over its processes (the CLI and its workers).

    PYTHONSAFEPATH=1 python benchmarks/data/build_memory.py -- pathfinder --size 512 -n 512 --split train=1.0 --workers 2

Runs `ssmbench generate ARGS --out TMP -q` (the CLI beside sys.executable) and polls /proc every 50 ms: each
process's VmHWM (its own peak RSS, kept by the kernel, so no spike is missed) is read until it exits, and the peaks
of all processes of the tree are summed (an upper bound of the simultaneous total); so are their CPU seconds
(the last reading before each exits, so up to 50 ms per process may be missed). Prints the wall time, the
per-process peaks and the sum, and the load average at start and end (other processes may share the cores).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _status(pid: int, key: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*") if Path(f"/proc/{p}/task").exists() else []:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def _cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def watch(cmd: list[str]) -> dict:
    """Run cmd; its wall time and, per process of its tree (polled every 50 ms), peak RSS and CPU seconds."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks: dict[int, float] = {}
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        for p in _tree(proc.pid):
            hwm, used = _status(p, "VmHWM"), _cpu(p)
            if hwm is not None:
                peaks[p] = max(peaks.get(p, 0.0), hwm)
            if used is not None:
                cpu[p] = max(cpu.get(p, 0.0), used)
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])} exited with {proc.returncode}: {proc.stderr.read().decode()[-500:]}")
    return {"wall_s": wall, "peaks_mib": sorted(peaks.values(), reverse=True), "sum_mib": sum(peaks.values()),
            "cpu_s": sum(cpu.values())}


def measure(args: list[str]) -> dict:
    cli = Path(sys.executable).with_name("ssmbench")
    with tempfile.TemporaryDirectory() as tmp:
        return watch([str(cli), "generate", *args, "--out", tmp, "-q"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("generate_args", nargs=argparse.REMAINDER, help="arguments of `ssmbench generate` after --")
    args = ap.parse_args()
    gen = [a for a in args.generate_args if a != "--"]
    load0 = os.getloadavg()
    res = measure(gen)
    load1 = os.getloadavg()
    print(f"ssmbench generate {' '.join(gen)}: {res['wall_s']:.1f} s wall; peak RSS per process "
          f"{', '.join(f'{p:.0f}' for p in res['peaks_mib'])} MiB, summed {res['sum_mib']:.0f} MiB; "
          f"load average {load0[0]:.2f} at start, {load1[0]:.2f} at end")


if __name__ == "__main__":
    main()
