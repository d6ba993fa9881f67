"""Process-group helpers for single-process and torchrun (DDP) runs: device choice, sums across ranks, rank-0 I/O.

Under `torchrun --nproc-per-node K --no-python ssmbench eval ...` every rank reads RANK / WORLD_SIZE / LOCAL_RANK
from the environment; the backend is nccl on CUDA and gloo on CPU. Without those variables everything here is a
no-op on one process.

Example:
    >>> env = init_distributed("cpu")
    >>> env.rank, env.world_size, env.device.type, env.is_main
    (0, 1, 'cpu', True)
    >>> env.contiguous_slice(10)      # this rank's share of an evaluation set: every sample exactly once
    (0, 10)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ...errors import ConfigError


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    local_world_size: int = 1
    """Training processes on this machine (torchrun's LOCAL_WORLD_SIZE): they share its /dev/shm."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def contiguous_slice(self, n: int) -> tuple[int, int]:
        """[start, stop) of this rank in n items split into near-equal contiguous parts (no padding, no drops)."""
        return self.rank * n // self.world_size, (self.rank + 1) * n // self.world_size


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """`auto` -> this rank's GPU when CUDA is available, else the CPU; `cuda` without CUDA is a ConfigError."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError("--device", f"{name} was asked for but this machine has no usable CUDA device",
                              "use --device cpu (or auto)")
        index = int(name.split(":")[1]) if ":" in name else local_rank
        if index >= torch.cuda.device_count():
            raise ConfigError("--device", f"{name}: only {torch.cuda.device_count()} CUDA device(s) visible")
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    if name != "cpu":
        raise ConfigError("--device", f"expected auto, cpu, cuda or cuda:i, got {name!r}")
    return torch.device("cpu")


def init_distributed(device: str = "auto") -> DistEnv:
    """Join the torchrun process group when launched by torchrun; pick the device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    dev = pick_device(device, local)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return DistEnv(rank, world, local, dev, local_world)


def sum_across_ranks(tensor: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over all ranks (in place, returned); identity on one process. Works for CPU tensors on nccl."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    backend_device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    work = tensor.to(backend_device) if backend_device is not None else tensor
    dist.all_reduce(work, op=dist.ReduceOp.SUM)
    if work is not tensor:
        tensor.copy_(work.to(tensor.device))
    return tensor


def any_rank(flag: bool, device: torch.device) -> bool:
    """True when `flag` is true on any rank (so every rank takes the same branch)."""
    if not (dist.is_available() and dist.is_initialized()):
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    return bool(sum_across_ranks(t).item() > 0)


def broadcast_object(obj: Any) -> Any:
    """Rank 0's object on every rank (e.g. the run folder name)."""
    if not (dist.is_available() and dist.is_initialized()):
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
