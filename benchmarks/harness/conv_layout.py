"""Interleaved A/B of the long-convolution mixer's output layout: `conv_layer` as it is (the FFT output laid out
once as the input, then D u and GELU) against the former version (D u and GELU applied to the transposed view of
the FFT output), one model layer forward+backward on the CPU, same weights and input.

    python benchmarks/harness/conv_layout.py --models sgconv dlr --length 4096 --batch 1 --threads 1 --rounds 15

Rounds alternate the order of the two; the median of each is printed with the per-round ratio's median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

import torch
import torch.nn.functional as F

from ssmbench.reference_models import _ssm_kernels

MODELS = {"sgconv": {"kernel_dim": 4096}, "dlr": {"d_state": 1024}, "s4d": {"d_state": 1024}}


def former_conv_layer(x, kernel_fn, D, *, bidirectional, max_kernel_length, mask):
    """`conv_layer` before the change (the A side), verbatim."""
    L = x.shape[1]
    if mask is not None and bidirectional:
        x = x.masked_fill(mask.unsqueeze(-1), 0.0)  # (B, L, H)
    L_k = min(L, max_kernel_length) if max_kernel_length else L
    k = kernel_fn(L_k)  # (C_k, H, L_k)
    y = _ssm_kernels.fft_conv(x.transpose(1, 2), k[0], k[1] if bidirectional else None)  # (B, H, L)
    return F.gelu(y.transpose(1, 2).to(x.dtype) + D * x)  # (B, L, H)


def ab(name: str, length: int, batch: int, width: int, rounds: int) -> None:
    """Print the median former / current times of one layer's forward+backward, interleaved."""
    import importlib

    module = importlib.import_module(f"ssmbench.reference_models.{name}")
    cls = {"sgconv": "SGConv", "dlr": "DLR", "s4d": "S4D"}[name]
    torch.manual_seed(0)
    layer = getattr(module, cls)(width, l_max=length, **MODELS[name])
    u = torch.randn(batch, length, width, requires_grad=True)

    def step(former: bool) -> float:
        with mock.patch.object(module, "conv_layer", former_conv_layer if former else _ssm_kernels.conv_layer):
            t0 = time.perf_counter()
            layer(u).square().mean().backward()
            elapsed = time.perf_counter() - t0
        layer.zero_grad(set_to_none=True)
        u.grad = None
        return elapsed

    with torch.no_grad():
        with mock.patch.object(module, "conv_layer", former_conv_layer):
            before = layer(u)
        diff = float((layer(u) - before).abs().max())
    for former in (True, False, True, False):  # warm-up: FFT plans, allocator
        step(former)
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for former in ((True, False) if r % 2 == 0 else (False, True)):
            times[former].append(step(former))
    a, b = statistics.median(times[True]), statistics.median(times[False])
    ratio = statistics.median(n / o for o, n in zip(times[True], times[False], strict=True))
    print(f"{name:7s} L={length} B={batch} H={width} threads={torch.get_num_threads()} rounds={rounds}: "
          f"former {1e3 * a:8.1f} ms  now {1e3 * b:8.1f} ms  ({100 * (ratio - 1):+.1f} % per round, median)  "
          f"max |output change| {diff:.1e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["sgconv"], choices=sorted(MODELS))
    ap.add_argument("--length", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.models:
        ab(name, args.length, args.batch, args.width, args.rounds)


if __name__ == "__main__":
    main()
