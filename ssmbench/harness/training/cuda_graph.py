"""The training step as one CUDA graph (`--cuda-graph`): the host launches one graph a step, not hundreds of kernels.

A small model's step on a GPU waits on the host (DLR, S4D and LRU launch 127-336 kernels a step; their kernels fill
57-78 % of it on an H200). With static shapes the whole step, forward, loss, backward, gradient clip and the AdamW
update, can be recorded once and replayed: `GraphedStep` wraps a step function that reads its batch from tensors on
the device and changes only tensors in place.

    steps 0 .. WARMUP-1  eager, on a side stream (real training steps: the allocator and cuDNN / cuBLAS settle)
    step WARMUP          the batch is copied into static buffers, the step is captured, then replayed once
    every later step     the batch is copied into the static buffers (device to device), the graph is replayed

What the step may not do inside the graph, and how the harness keeps it out: host synchronisation (the loss is summed
on the device; `.item()` happens at log lines, outside the step); Python-side state that changes per step (the
learning-rate schedule runs after the replay and writes its factor into a tensor the graph reads: torch AdamW
with `capturable=True` and a tensor `lr`; `PackedAdamW` with its device step count and factor buffer); shapes that
change (the step length of a run is fixed). A capture that fails (an op that syncs, a dynamic shape) falls back to
eager steps with one line saying why; that step is then run eagerly, so no step is lost.

Compared with `--compile`: torch.compile fuses kernels (fewer, larger launches) but still launches per step unless
its own "reduce-overhead" mode (which also uses CUDA graphs) is chosen; the two options are refused together
here, so each measurement says what it measured. fp16 (a loss scaler that skips steps on the host) and torchrun
(DDP's bucketed all-reduce) keep eager steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger(__name__)

WARMUP = 3
"""Eager steps before the capture (PyTorch's advice for whole-network capture: a few iterations on a side stream)."""


class GraphedStep:
    """`step(batch)` run eagerly WARMUP times, then captured and replayed; `batch` is a pytree of device tensors
    whose shapes do not change (a dict of a single run's inputs / targets, or a pack's list of them)."""

    def __init__(self, step: Callable[[Any], None], device: torch.device) -> None:
        self.step, self.device = step, device
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: Any = None
        self.failed: str | None = None
        self.side = torch.cuda.Stream(device)

    def __call__(self, batch: Any) -> None:
        from torch.utils._pytree import tree_map

        if self.failed is not None:
            self.step(batch)
        elif self.calls < WARMUP:
            self.side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.side):
                self.step(batch)
            torch.cuda.current_stream(self.device).wait_stream(self.side)
        elif self.graph is None:
            self.static = tree_map(lambda t: t.clone(), batch)
            self._capture(batch)
        else:
            tree_map(lambda dst, src: dst.copy_(src, non_blocking=True), self.static, batch)
            self.graph.replay()
        self.calls += 1

    def _capture(self, batch: Any) -> None:
        graph = torch.cuda.CUDAGraph()
        try:
            torch.cuda.synchronize(self.device)
            with torch.cuda.graph(graph):
                self.step(self.static)
        except Exception as exc:  # noqa: BLE001 - any capture failure means eager steps; the reason is reported
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            self.failed = f"{type(exc).__name__}: {first[:160]}"
            log.warning("--cuda-graph: the training step cannot be captured (%s); training with eager steps",
                        self.failed)
            torch.cuda.synchronize(self.device)
            self.step(batch)  # the step the capture did not run
            return
        self.graph = graph
        graph.replay()


def check_cuda_graph(cfg: Any, device: torch.device, distributed: bool) -> None:
    """A ConfigError for `--cuda-graph` where it cannot work: not on CUDA, fp16, torchrun, or with --compile."""
    from ...errors import ConfigError

    if not cfg.hardware.cuda_graph:
        return
    if device.type != "cuda":
        raise ConfigError("--cuda-graph", f"captures the training step on a CUDA device; this run is on {device}",
                          "drop --cuda-graph, or train on a GPU (--device cuda)")
    if cfg.hardware.precision == "fp16":
        raise ConfigError("--cuda-graph", "fp16's loss scaler skips steps on the host, which a graph cannot",
                          "use --precision bf16 or fp32 with --cuda-graph")
    if cfg.hardware.compile:
        raise ConfigError("--cuda-graph", "and --compile are refused together",
                          "choose one (torch.compile's own CUDA graphs: its 'reduce-overhead' mode)")
    if distributed:
        raise ConfigError("--cuda-graph", "is not supported under torchrun (DDP's all-reduce runs eagerly)",
                          "drop --cuda-graph for multi-GPU runs")
