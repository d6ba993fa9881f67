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
