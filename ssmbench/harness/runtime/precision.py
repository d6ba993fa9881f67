"""Mixed precision that keeps SSM kernels in float32.

`--precision bf16|fp16` runs the model under torch.autocast; every mixer that does not declare
`autocast_safe = True` is run with autocast disabled on float32 inputs (its FFTs, complex powers and scans keep
float32 / float64 phases), and its output is cast back. Only the encoder, projections and decoder then run in
half precision unless a mixer opts in. fp16 uses a gradient scaler.

Example:
    >>> import torch
    >>> ctx, scaler = autocast_context("fp32", torch.device("cpu")), grad_scaler("fp32", torch.device("cpu"))
    >>> scaler is None
    True
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from typing import Any

import torch
from torch import nn

from ...errors import ConfigError

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_precision(precision: str, device: torch.device) -> None:
    if precision not in ("fp32", *DTYPES):
        raise ConfigError("--precision", f"must be fp32, bf16 or fp16, got {precision!r}")
    if precision == "fp16" and device.type != "cuda":
        raise ConfigError("--precision", "fp16 needs a CUDA device", "use bf16 on the CPU, or fp32")


def autocast_context(precision: str, device: torch.device) -> Any:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def grad_scaler(precision: str, device: torch.device) -> Any:
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def step_and_schedule(optimizer: torch.optim.Optimizer, scaler: Any, scheduler: Any) -> None:
    """Update the weights (through the fp16 gradient scaler, if any), then advance the schedule by one step.

    The scaler skips an update whose gradients overflowed (the first steps of an fp16 run, while it lowers its
    scale); the learning-rate schedule still follows the training step, so PyTorch's warning about a scheduler step
    before an optimizer step is expected there, and silenced.
    """
    if scaler is None:
        optimizer.step()
        scheduler.step()
        return
    scaler.step(optimizer)
    scaler.update()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"Detected call of `lr_scheduler\.step\(\)` before", UserWarning)
        scheduler.step()


def keep_mixers_float32(model: nn.Module) -> int:
    """Patch every mixer's forward (instance attribute; state_dict unchanged) to run without autocast."""
    patched = 0
    for module in model.modules():
        if hasattr(module, "causal") and callable(getattr(module, "forward", None)) \
                and not getattr(module, "autocast_safe", False) and not getattr(module, "_float32_patched", False):
            module.forward = functools.partial(_float32_forward, module.forward)  # type: ignore[method-assign]
            module._float32_patched = True
            patched += 1
    return patched


def _float32_forward(forward: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    with torch.autocast(x.device.type, enabled=False):
        return forward(x.float(), *args, **kwargs).to(x.dtype)
