"""A run's peak memory, estimated before the first step from one measured probe, and a refusal when it cannot fit.

The probe runs the built model forward on one training-shaped sample with autograd on and counts the bytes of every
tensor autograd saves for the backward pass (`torch.autograd.graph.saved_tensors_hooks`; the hook keeps nothing, so
the probe itself needs little more than one sample's transient memory). The estimate is

    parameters x 4 (weights, gradients, AdamW's two moments)  +  saved bytes per sample x samples per rank per step

and the run is refused, before its folder exists, when that exceeds the memory the device has free (CUDA:
`torch.cuda.mem_get_info`; CPU: `MemAvailable` of /proc/meminfo), with one line naming the batch size, the precision
and the device; `--force` runs it anyway. The number is a lower bound (it leaves out the allocator's slack and
temporary buffers), so a run it lets through can still run out; a run it refuses would not have fit.

The probe runs the model at full length, which for a long sequence and a large state takes as long as a training
step (minutes at T = 65536 with N = T on a CPU), and so do the causality check and the facts probe before it. So
`check_batch_fits` first compares a bound that needs no model run with the free memory, before the model is built:
the model's parameters x 4 (weights, gradients, AdamW's moments: the parameters are counted on a build on torch's
`meta` device, which allocates nothing, so `-o model.d_model=100000`, 40 GB for one output projection, is refused
before the real build tries to allocate it), plus the samples of one step (their inputs and targets, as stored)
plus, for a mixer in the harness backbone, the encoder's output, one d_model-wide activation per position. All of
these exist at once in any training step, so a run that fails this bound cannot fit, whatever the layers add.

Example:
    >>> import torch
    >>> layer = torch.nn.Linear(8, 8)
    >>> saved_bytes_per_sample(layer, torch.zeros(1, 4, 8))  # the input (1 x 4 x 8 float32) is saved for the weight
    128
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ...errors import ConfigError
from ...plain import human_bytes

OPTIMIZER_COPIES = 4
"""Weights, gradients and AdamW's two moment buffers, each the size of the parameters."""


def saved_bytes_per_sample(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes autograd saves for the backward pass of `model(x)` (x: one sample, (1, T, ...)), each storage once."""
    seen: set[tuple[int, int]] = set()
    total = 0

    def pack(t: torch.Tensor) -> None:
        nonlocal total
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()

    def unpack(_: None) -> torch.Tensor:  # pragma: no cover - the probe never runs backward
        raise RuntimeError("the memory probe does not run backward")

    was_training = model.training
    model.train()
    try:
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            model(x)
    finally:
        model.train(was_training)
    return total


def free_bytes(device: torch.device, meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Memory the device has free now (None when unknown). CPU: `MemAvailable` of `meminfo` (what can be given to
    a process without swapping, page cache included), not `MemFree` (unused pages only)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def estimate(s: Any, x1: torch.Tensor) -> dict[str, int]:
    """The run's peak estimate for a built `trainer.Setup` and one sample `x1` (1, T, ...) on its device."""
    params = sum(p.numel() * p.element_size() for p in s.model.parameters())
    per_sample = saved_bytes_per_sample(s.model, x1)
    local_batch = max(1, s.cfg.train.batch_size // s.env.world_size)
    return {"parameter_bytes": params, "saved_bytes_per_sample": per_sample,
            "estimated_peak_bytes": OPTIMIZER_COPIES * params + per_sample * local_batch}


def check_fits(s: Any, x1: torch.Tensor, force: bool = False) -> dict[str, int]:
    """The estimate, or a ConfigError when it exceeds the free memory of the device (unless `force`)."""
    est = estimate(s, x1)
    free = free_bytes(s.env.device)
    est["free_bytes_at_start"] = free if free is not None else -1
    if free is not None and est["estimated_peak_bytes"] > free and not force:
        t, precision = s.cfg.train, s.cfg.hardware.precision
        per_rank = max(1, t.batch_size // s.env.world_size)
        tips = [f"-o train.batch_size={max(1, t.batch_size // 2)}" if t.batch_size > 1 else None,
                "--precision bf16" if precision == "fp32" and s.env.device.type == "cuda" else None,
                "--device cuda" if s.env.device.type == "cpu" and torch.cuda.is_available() else None]
        raise ConfigError("train.batch_size", f"this run needs at least {human_bytes(est['estimated_peak_bytes'])} "
                          f"of {s.env.device.type} memory ({human_bytes(est['saved_bytes_per_sample'])} of "
                          f"activations per sample x {per_rank} samples per step, {precision}), and "
                          f"{human_bytes(free)} is free",
                          "try " + " or ".join(x for x in tips if x) + "; --force runs it anyway" if any(tips)
                          else "--force runs it anyway")
    return est


def model_bytes(config: Any, spec: Any) -> int:
    """Bytes the model holds through training: its trainable parameters x `OPTIMIZER_COPIES`, plus frozen
    parameters and buffers once; counted on a build on the `meta` device (nothing is allocated or run, no
    causality check); 0 when the model cannot be built there (a plug-in that computes with its tensors in
    `__init__`): the real build then reports whatever is wrong."""
    from ..models.build import build_model

    try:
        with torch.device("meta"):
            model = build_model(config.model, spec, dict(config.model_overrides), allow_noncausal=True, check=False)
    except Exception:  # noqa: BLE001 - the real build, next, names the problem
        return 0
    held = [(OPTIMIZER_COPIES if p.requires_grad else 1) * p.numel() * p.element_size() for p in model.parameters()]
    return sum(held) + sum(b.numel() * b.element_size() for b in model.buffers())


def batch_lower_bound(config: Any, spec: Any, world_size: int = 1, weights: int | None = None) -> dict[str, int]:
    """Bytes one training step needs at the least, from shapes alone (nothing is run): per sample, the stored
    inputs and targets, plus the backbone encoder's output (T x d_model, float32; 2 bytes under bf16 / fp16
    autocast) when the model is a mixer; times the samples per rank and step; plus what the model holds
    (`weights`, default `model_bytes`: its parameters x 4, from a build on the meta device)."""
    import numpy as np

    from ..config.model_lookup import is_mixer
    from ..config.model_lookup import resolve as resolve_model
    from ..models.backbone import SequenceModel

    per_sample = 0
    for name in ("inputs", "targets"):
        field = spec.fields.get(name)
        if field is not None:
            per_sample += np.dtype(field.dtype).itemsize * int(np.prod(field.shape, dtype=np.int64))
    obj, _ = resolve_model(config.model)
    width = 0
    if is_mixer(obj):
        import inspect

        raw = config.model_overrides.get("d_model",
                                         inspect.signature(SequenceModel.__init__).parameters["d_model"].default)
        try:
            width = max(0, int(raw))
        except (TypeError, ValueError):  # the model builder names a bad value; no bound from it here
            width = 0
        act = 4 if config.hardware.precision == "fp32" or spec.input_kind == "tokens" else 2
        per_sample += spec.seq_len * width * act
    local_batch = max(1, config.train.batch_size // world_size)
    weights = model_bytes(config, spec) if weights is None else weights
    return {"bytes_per_sample": per_sample, "samples_per_step": local_batch, "d_model": width,
            "model_bytes": weights, "bytes": per_sample * local_batch + weights}


def check_batch_fits(config: Any, spec: Any, device: torch.device, world_size: int = 1, force: bool = False) -> None:
    """Refuse (ConfigError on train.batch_size) a run whose `batch_lower_bound` already exceeds the device's free
    memory, unless `force`: the quick refusal that comes before the model is built or run."""
    if force:
        return
    free = free_bytes(device)
    if free is None:  # unknown: nothing to compare the bound with (and no model built on the meta device)
        return
    bound = batch_lower_bound(config, spec, world_size)
    if bound["bytes"] <= free:
        return
    precision, n = config.hardware.precision, bound["samples_per_step"]
    what = "its inputs and targets" + (f" and one {bound['d_model']}-wide activation per position" if
                                       bound["d_model"] else "")
    weights = bound["model_bytes"]
    model = (f"; {human_bytes(weights)} for the model: its parameters x {OPTIMIZER_COPIES}, weights, gradients "
             "and AdamW's two moments" if weights else "")
    if weights > free:  # the model alone cannot fit: no batch size helps
        key, tips = "model", [f"a smaller model (-o model.d_model={bound['d_model'] // 4})" if bound["d_model"]
                              else "a smaller model"]
    else:
        fits = (free - weights) // max(1, bound["bytes_per_sample"]) * world_size
        key, tips = "train.batch_size", [f"-o train.batch_size={fits}" if fits >= 1 else "a shorter sequence"]
    tips.append("--device cuda" if device.type == "cpu" and torch.cuda.is_available() else None)
    raise ConfigError(key, f"this run needs at least {human_bytes(bound['bytes'])} of "
                      f"{device.type} memory ({n} samples per step x {human_bytes(bound['bytes_per_sample'])}: "
                      f"{what}, T = {spec.seq_len}, {precision}{model}), and {human_bytes(free)} is free",
                      "try " + " or ".join(x for x in tips if x) + " (or less: the layers need more); --force "
                      "runs it anyway")
