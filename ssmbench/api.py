"""The contracts every plug-in implements: task configs, the shape `Spec`, `Task`, mixers, factories, evaluators.

Plug-ins import their types from here. Classes are abstract or final, one level deep: concrete tasks are
`@typing.final` and share code through plain functions (`ssmbench.generators._kernels`), not base-class methods.
This module imports neither numba nor torch.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np

__all__ = ["TaskConfig", "Field", "Spec", "Task", "Mixer", "ModelFactory", "Evaluator", "MetricState"]


@dataclass(frozen=True)
class TaskConfig:
    """Base of every task config: a frozen dataclass of JSON primitives, validated in `__post_init__`."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


C = TypeVar("C", bound=TaskConfig)


@dataclass(frozen=True)
class Field:
    """One stored per-sample array: dtype and per-sample shape, plus how it is compressed on disk."""

    dtype: str
    """NumPy dtype name: "uint8", "int8", "int16", "int32", "int64", "float32"."""
    shape: tuple[int, ...]
    """Per-sample shape, e.g. (4096, 3); () for a per-sample scalar (stored one chunk per shard)."""
    description: str
    codec: str = "gzip:4"
    """"gzip:<level>" or "none" (fields that compress below about 1.15x are stored uncompressed)."""
    shuffle: bool = False
    """HDF5 byte shuffle before compression; on for multi-byte dtypes."""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    """Extra HDF5 dataset attributes (JSON-serialisable), e.g. {"classes": [...]} or {"vocab": [...]}."""

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "description": self.description,
                "codec": self.codec, "shuffle": self.shuffle, "attrs": dict(self.attrs)}


@dataclass(frozen=True)
class Spec:
    """What is stored and what a model needs to know, without any data."""

    fields: Mapping[str, Field]
    input_kind: Literal["real", "tokens", "pixels"]
    d_input: int
    seq_len: int
    target_kind: Literal["regress", "classify"]
    d_output: int
    l_output: int
    ignore_index: int | None
    causal: bool
    input_scale: tuple[float, float] | None
    metrics: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "fields"}
        out["fields"] = {k: v.to_json() for k, v in self.fields.items()}
        out["input_scale"] = list(self.input_scale) if self.input_scale else None
        out["metrics"] = list(self.metrics)
        return out

    def bytes_per_sample(self) -> int:
        return int(sum(np.dtype(f.dtype).itemsize * int(np.prod(f.shape, dtype=np.int64))
                       for f in self.fields.values()))


class Task(abc.ABC, Generic[C]):
    """A dataset generator: a config class, presets, a `Spec`, a batched generator and an oracle.

    The task never sees the root seed, the split or the shard: the core derives one uint64 key per sample
    (`ssmbench.seeding`) and row i of `generate` depends only on `keys[i]`.
    """

    name: ClassVar[str]
    """Registry key == module stem == data card stem == HDF5 `task` attribute."""
    version: ClassVar[str]
    """Bumped whenever the bytes produced for the same (config, seed) change."""
    Config: ClassVar[type]
    presets: ClassVar[Mapping[str, Any]]
    default_preset: ClassVar[str]
    default_n: ClassVar[int]
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.8, "val": 0.1, "test": 0.1}
    preset_option: ClassVar[Literal["length", "size", "preset"]] = "length"
    """Which CLI option selects a preset: --length (atomic), --size (pathfinder), --preset (ListOps)."""

    @abc.abstractmethod
    def spec(self, config: C) -> Spec: ...

    @abc.abstractmethod
    def generate(self, config: C, keys: np.ndarray) -> dict[str, np.ndarray]:
        """keys: (N,) uint64, one per sample. Returns every field of `spec(config).fields`, first dim N."""

    @abc.abstractmethod
    def oracle(self, config: C, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Recompute the targets of one sample from its inputs in plain NumPy (tests, `verify --deep`)."""

    def fixed_arrays(self, config: C) -> dict[str, np.ndarray]:
        """Objects shared by every sample (fixed variants), stored in a `fixed/` group; empty by default."""
        return {}


@runtime_checkable
class Mixer(Protocol):
    """A sequence mixer (a torch.nn.Module): (B, L, D) -> (B, L, D). See models.md section 14.1."""

    causal: bool

    def forward(self, x: Any, *, mask: Any | None = None) -> Any: ...


class ModelFactory(Protocol):
    """Builds a whole model from the task's Spec: (B, T, ...) -> (B, l_output, d_output)."""

    def __call__(self, spec: Spec, **hparams: Any) -> Any: ...


class MetricState(Protocol):
    """Sufficient statistics of a metric, summable across batches and ranks."""

    def update(self, pred: Any, target: Any, valid: Any) -> None: ...

    def state_tensors(self) -> list[Any]: ...

    def compute(self) -> dict[str, float]: ...


class Evaluator(abc.ABC):
    """Trains and evaluates a model on one task; concrete evaluators are final."""

    name: ClassVar[str]
    Config: ClassVar[type]

    @abc.abstractmethod
    def run(self, model: Any, data: Any, config: Any, run_dir: Path) -> Any: ...
