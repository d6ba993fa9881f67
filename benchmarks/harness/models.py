"""Forward+backward time and peak memory of every reference model, and DLR against the paper's Figure 4.

    python benchmarks/harness/models.py [--quick] [--models dlr,lru] [--lengths 1024,4096] [--threads N] [--device cuda]

H = 128, B = 1, N = 1024 (DLR, DSS_EXP, S4D), N = 256 (LRU), N = 64 (S4), d = 4096 (SGConv, Table 2), N = 16 and E = 2H
(Mamba), L in {1K, 4K, 16K, 64K} (--quick: 1K, 4K). Each cell
runs in a fresh subprocess; the time is the best of up to two runs after a first one at the same length, and peak
memory is the growth of the resident set during the first forward+backward. A cell whose
estimate (extrapolated from the previous length: linear for SSMs and chunked attention, quadratic for full
attention and LaS) exceeds 8 GiB or 120 s is printed as skipped with the estimate. The DLR layer is also timed
against a straightforward implementation of the paper's Figure 4 (N x L power table with float32 phases, FFT size
2L), and both kernels are compared with a float64 reference at dt = 1e-5 (long kernels, where phase errors show).

With --device cuda every cell runs in this process (no CUDA start-up per cell): the time is the median of 5 runs
after two warm-ups, synchronised, and peak memory is the growth of the allocator's peak during them; the skip limit
is 80 % of the device's memory, and the kernel errors (a CPU float64 check) are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MODELS = {
    "dlr": {"d_state": 1024}, "dlr_figure4": {"d_state": 1024}, "dss_exp": {"d_state": 1024},
    "s4d": {"d_state": 1024}, "lru": {"d_state": 256}, "attention": {}, "local_attention": {}, "las": {},
    "las_chunk": {}, "s4": {"d_state": 64}, "sgconv": {"kernel_dim": 4096}, "mamba": {"d_state": 16},
}
QUADRATIC = {"attention", "las"}
H, BATCH = 128, 1
LIMIT_S, LIMIT_GIB = 120.0, 8.0


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _figure4_layer(layer, u):
    """The paper's Figure 4 (plus the skip and GELU of the layer): a full N x L power table, n = 2L."""
    import torch
    import torch.nn.functional as F

    L = u.shape[1]
    log_lam = torch.complex(-layer.a[0] ** 2, layer.b[0])  # (N,)
    w = torch.complex(layer.W[0, ..., 0], layer.W[0, ..., 1])  # (H, N)
    k = (w @ (log_lam.unsqueeze(-1) * torch.arange(L, device=u.device)).exp()).real  # (H, L) via an (N, L) table
    y = torch.fft.irfft(torch.fft.rfft(u.transpose(1, 2), n=2 * L) * torch.fft.rfft(k, n=2 * L), n=2 * L)[..., :L]
    return F.gelu(y.transpose(1, 2) + layer.D * u)  # (B, L, H)


def _kernel_errors(L: int) -> tuple[float, float]:
    """Max relative error of the fast and the Figure-4 kernels against float64, at dt = 1e-5."""
    import numpy as np
    import torch

    from ssmbench.reference_models.dlr import DLR

    torch.manual_seed(0)
    layer = DLR(H, l_max=L, d_state=1024, dt_min=1e-5, dt_max=1e-5)
    with torch.no_grad():
        fast = layer.kernel(L)[0].double().numpy()
        log_lam = torch.complex(-layer.a[0] ** 2, layer.b[0])
        w = torch.complex(layer.W[0, ..., 0], layer.W[0, ..., 1])
        naive = (w @ (log_lam.unsqueeze(-1) * torch.arange(L)).exp()).real.double().numpy()
    a2 = (layer.a.detach().double().numpy()[0]) ** 2
    b = layer.b.detach().double().numpy()[0]
    w64 = w.detach().numpy().astype(np.complex128)
    ref = np.empty((H, L))
    for s in range(0, L, 4096):  # float64 reference in slices of 4096 positions
        k = np.arange(s, min(L, s + 4096))
        table = np.exp(-np.outer(a2, k)) * np.exp(1j * np.remainder(np.outer(b, k), 2 * np.pi))
        ref[:, s:s + len(k)] = (w64 @ table).real
    scale = np.abs(ref).max()
    return float(np.abs(fast - ref).max() / scale), float(np.abs(naive - ref).max() / scale)


def _build(name: str, L: int, device: str):
    import torch

    from ssmbench.registry import models

    torch.manual_seed(0)
    base = "dlr" if name == "dlr_figure4" else name
    layer = models.get(base)(H, l_max=L, **MODELS[name]).to(device)
    step = (lambda u: _figure4_layer(layer, u)) if name == "dlr_figure4" else layer
    return layer, step


def run_cell_cuda(name: str, L: int) -> dict:
    """One cell on the GPU: median seconds of 5 synchronised forward+backward runs, peak allocator growth in MiB."""
    import torch

    layer, step = _build(name, L, "cuda")

    def once(length: int) -> float:
        u = torch.randn(BATCH, length, H, device="cuda", requires_grad=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(u).square().mean().backward()
        layer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    try:
        once(256)
        once(L)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        times = sorted(once(L) for _ in range(5))
        peak = torch.cuda.max_memory_allocated() - before
        return {"seconds": times[2], "peak_mib": peak / 2 ** 20}
    except torch.cuda.OutOfMemoryError:
        return {"error": "out of memory"}


def run_cell(name: str, L: int) -> dict:
    """Build one model, run forward+backward at length L; report seconds, peak MiB (and kernel errors for DLR)."""
    import torch

    layer, step = _build(name, L, "cpu")

    def once(length: int) -> float:
        u = torch.randn(BATCH, length, H, requires_grad=True)
        t0 = time.perf_counter()
        step(u).square().mean().backward()
        layer.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    once(256)  # lazy initialisation at a small size
    before = _rss_bytes()
    first = once(L)  # also warms up allocator and FFT plans at this size
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    seconds = min([once(L) for _ in range(2 if first < 5.0 else 1 if first < 40.0 else 0)] or [first])
    out = {"seconds": seconds, "peak_mib": max(0, peak) / 2 ** 20}
    if name == "dlr":
        out["err_fast"], out["err_figure4"] = _kernel_errors(L)
    return out


def _fmt_cell(cell: dict) -> str:
    if "skipped" in cell:
        return f"skipped (est. {cell['est_s']:.0f} s, {cell['est_gib']:.1f} GiB)"
    if "error" in cell:
        return cell["error"]
    t = cell["seconds"]
    return (f"{t:.2f} s" if t >= 0.1 else f"{t * 1e3:.1f} ms") + f" / {cell['peak_mib']:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="L in {1K, 4K} only")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--lengths", default=None, help="comma-separated L (default 1K,4K,16K,64K)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads in each cell")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--cell", nargs=2, metavar=("MODEL", "L"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.cell:
        print(json.dumps(run_cell(args.cell[0], int(args.cell[1]))))
        return
    lengths = [int(x) for x in args.lengths.split(",")] if args.lengths else \
        ([1024, 4096] if args.quick else [1024, 4096, 16384, 65536])
    names = [n for n in args.models.split(",") if n]
    import platform

    import torch

    limit_gib = LIMIT_GIB
    if args.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        limit_gib = 0.8 * props.total_memory / 2 ** 30
        print(f"# {props.name}, {props.total_memory / 2 ** 30:.0f} GiB, torch {torch.__version__}; H={H}, B={BATCH}; "
              "forward+backward seconds (median of 5) / peak MiB")
    else:
        print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads; H={H}, B={BATCH}; forward+backward seconds / peak MiB")
    results: dict[str, dict[int, dict]] = {}
    for name in names:
        results[name] = {}
        prev: tuple[int, dict] | None = None
        for L in lengths:
            cell: dict
            if prev is not None and "seconds" in prev[1]:
                grow = (L / prev[0]) ** (2 if name in QUADRATIC else 1) * (1.1 if name not in QUADRATIC else 1)
                est_s, est_gib = prev[1]["seconds"] * grow, prev[1]["peak_mib"] * grow / 1024
                if est_s > LIMIT_S or est_gib > limit_gib:
                    results[name][L] = {"skipped": True, "est_s": est_s, "est_gib": est_gib}
                    print(f"{name:16s} L={L:6d}  {_fmt_cell(results[name][L])}", flush=True)
                    prev = (L, results[name][L])
                    continue
            if args.device == "cuda":
                results[name][L] = cell = run_cell_cuda(name, L)
                torch.cuda.empty_cache()  # the cell's layer and activations are gone with its frame
                prev = (L, cell)
                print(f"{name:16s} L={L:6d}  {_fmt_cell(cell)}", flush=True)
                continue
            cmd = [sys.executable, os.path.abspath(__file__), "--cell", name, str(L)]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=3 * LIMIT_S)
                if done.returncode == 0:
                    cell = json.loads(done.stdout.strip().splitlines()[-1])
                else:
                    why = done.stderr.strip().splitlines()[-1][:60] if done.stderr.strip() else done.returncode
                    cell = {"error": f"failed ({why})"}
            except subprocess.TimeoutExpired:
                cell = {"error": f"timeout > {3 * LIMIT_S:.0f} s"}
            results[name][L] = cell
            prev = (L, cell)
            print(f"{name:16s} L={L:6d}  {_fmt_cell(cell)}", flush=True)

    print("\n| model | " + " | ".join(f"L={L // 1024}K" for L in lengths) + " |")
    print("|---|" + "---|" * len(lengths))
    for name in names:
        print(f"| {name} | " + " | ".join(_fmt_cell(results[name][L]) for L in lengths) + " |")
    if "dlr" in results and "dlr_figure4" in results:
        print("\n| L | DLR (s) | Figure 4 (s) | speed-up | kernel error DLR | kernel error Figure 4 |")
        print("|---|---|---|---|---|---|")
        for L in lengths:
            fast, fig = results["dlr"][L], results["dlr_figure4"][L]
            if "seconds" in fast and "seconds" in fig:
                ratio = fig["seconds"] / fast["seconds"]
                errors = f"{fast['err_fast']:.1e} | {fast['err_figure4']:.1e}" if "err_fast" in fast else "- | -"
                print(f"| {L} | {fast['seconds']:.4f} | {fig['seconds']:.4f} | {ratio:.1f}x | {errors} |")


if __name__ == "__main__":
    main()
