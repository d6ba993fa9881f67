"""Minimal third-party task plug-ins for the contract tests: only the required members, every hook at its default.

`Residues` writes a sample's key modulo `modulus`; `DistinctResidues` is the same with `deduplicate = True` and the
default de-duplication rules (exact repeats dropped), so a small modulus forces duplicates among the candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ssmbench.api import Field, Spec, Task, TaskConfig
from ssmbench.errors import ConfigError


@dataclass(frozen=True)
class ResiduesConfig(TaskConfig):
    L: int = 6
    modulus: int = 40

    def __post_init__(self) -> None:
        for name in ("L", "modulus"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(name, f"must be an integer >= 1, got {value!r}")


def _spec(config: ResiduesConfig, extra: Mapping[str, Field]) -> Spec:
    fields = {"inputs": Field("int64", (config.L,), "the residue, repeated", codec="none"),
              "targets": Field("int64", (), "the residue", codec="none"), **extra}
    return Spec(fields=fields, input_kind="tokens", d_input=config.modulus, seq_len=config.L,
                target_kind="classify", d_output=config.modulus, l_output=1, ignore_index=None, causal=True,
                input_scale=None, metrics=("accuracy",))


def _generate(config: ResiduesConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
    r = (np.asarray(keys, dtype=np.uint64) % np.uint64(config.modulus)).astype(np.int64)
    return {"inputs": np.repeat(r[:, None], config.L, axis=1), "targets": r}


class Residues(Task[ResiduesConfig]):
    """Repeat the sample key's residue modulo `modulus` over L positions (a minimal plug-in task)"""

    name: ClassVar[str] = "residues"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ResiduesConfig
    presets: ClassVar[Mapping[str, Any]] = {"small": ResiduesConfig()}
    default_preset: ClassVar[str] = "small"
    default_n: ClassVar[int] = 20
    preset_option: ClassVar[Any] = "preset"

    def spec(self, config: ResiduesConfig) -> Spec:
        return _spec(config, {})

    def generate(self, config: ResiduesConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return _generate(config, keys)

    def oracle(self, config: ResiduesConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"targets": np.int64(np.asarray(sample["inputs"])[0])}


class DistinctResidues(Task[ResiduesConfig]):
    """Residues without repeats: built from a candidate stream with the default de-duplication rules"""

    name: ClassVar[str] = "distinct_residues"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = ResiduesConfig
    presets: ClassVar[Mapping[str, Any]] = {"small": ResiduesConfig()}
    default_preset: ClassVar[str] = "small"
    default_n: ClassVar[int] = 20
    preset_option: ClassVar[Any] = "preset"
    deduplicate: ClassVar[bool] = True

    def spec(self, config: ResiduesConfig) -> Spec:
        return _spec(config, {"candidate_index": Field("int64", (), "index in the candidate stream", codec="none")})

    def generate(self, config: ResiduesConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return {**_generate(config, keys), "candidate_index": np.full(len(keys), -1, dtype=np.int64)}

    def oracle(self, config: ResiduesConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"targets": np.int64(np.asarray(sample["inputs"])[0])}


class MisspeltHook(Residues):
    """Residues with a misspelt hook: `statistcs` would be ignored if the core used getattr"""

    name: ClassVar[str] = "misspelt_hook"

    def statistcs(self, config: ResiduesConfig, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"count": np.array([len(block["targets"])])}


class GroupsOnTheTask(Residues):
    """Residues declaring `groups` on the task itself, where only its training policy may hold it"""

    name: ClassVar[str] = "groups_on_the_task"
    groups: ClassVar[Mapping[str, int]] = {"atomic": 11}


class PolicyAsDict(Residues):
    """Residues with a plain dict for `policy` instead of a TrainingPolicy"""

    name: ClassVar[str] = "policy_as_dict"
    policy: ClassVar[Any] = {"training_data": "folder"}


@dataclass(frozen=True)
class RunningMeanConfig(TaskConfig):
    L: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.L, int) or isinstance(self.L, bool) or self.L < 2:
            raise ConfigError("L", f"must be an integer >= 2, got {self.L!r}")


class RunningMean(Task[RunningMeanConfig]):
    """Output the running mean of a noise sequence (a minimal plug-in regression task)"""

    name: ClassVar[str] = "running_mean"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = RunningMeanConfig
    presets: ClassVar[Mapping[str, Any]] = {"16": RunningMeanConfig()}
    default_preset: ClassVar[str] = "16"
    default_n: ClassVar[int] = 40

    def spec(self, config: RunningMeanConfig) -> Spec:
        L = config.L
        fields = {"inputs": Field("float32", (L, 1), "uniform noise in [-1, 1)", codec="none"),
                  "targets": Field("float32", (L, 1), "running mean of the noise", codec="none")}
        return Spec(fields=fields, input_kind="real", d_input=1, seq_len=L, target_kind="regress", d_output=1,
                    l_output=L, ignore_index=None, causal=True, input_scale=None, metrics=("r2",))

    def generate(self, config: RunningMeanConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        x = np.stack([np.random.default_rng(int(k)).uniform(-1, 1, (config.L, 1)) for k in keys.tolist()])
        x = x.reshape(len(keys), config.L, 1).astype(np.float32)
        return {"inputs": x, **self.oracle(config, {"inputs": x})} if len(keys) else \
            {"inputs": x, "targets": np.zeros((0, config.L, 1), np.float32)}

    def oracle(self, config: RunningMeanConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = np.asarray(sample["inputs"], dtype=np.float64)
        steps = np.arange(1, config.L + 1).reshape(config.L, 1)
        return {"targets": (np.cumsum(x, axis=-2) / steps).astype(np.float32)}
