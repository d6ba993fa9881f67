"""The resolved configuration of one training run: data, model, training, evaluation and hardware, as plain data.

A run is fully described by its `RunConfig`; `config.json` in the run folder is `RunConfig.to_json()`, and
`RunConfig.from_json` rebuilds it, so a run can be repeated exactly from its folder. Keys use the override syntax
of `-o key=value` everywhere:

* `model.<key>`: backbone and mixer settings, checked by the model builder (did-you-mean on unknown keys);
* `train.<key>`, `eval.<key>`, `data.<key>`, `hardware.<key>`: the fields of the dataclasses below;
* `task.<key>` or a bare `<key>`: a field of the task's config (e.g. `L`, `num_shifts`, `label_rule`).

Example:
    >>> cfg = RunConfig(task="cumsum", task_config={"L": 128}, model="dlr")
    >>> cfg = cfg.with_overrides({"train.steps": "300", "model.d_model": "32", "L": "64"})
    >>> cfg.train.steps, cfg.model_overrides["d_model"], cfg.task_config["L"]
    (300, 32, 64)
    >>> RunConfig.from_json(cfg.to_json()) == cfg
    True
    >>> cfg.with_overrides({"train.stepz": 1})
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: train.stepz: unknown key; did you mean 'train.steps'?
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import _parse_value, config_sha256
from ..errors import ConfigError
from ..plain import json_plain


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    """Optimiser steps trained."""
    batch_size: int = 16
    """Global batch (split evenly across ranks)."""
    lr: float = 1e-3
    """Global learning rate (AdamW)."""
    lr_ssm: float | None = None
    """Learning rate of the SSM parameter group (default: the global one)."""
    weight_decay: float = 0.0
    """Global weight decay; SSM kernel parameters carry their own (0) through `_optim` hints."""
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    schedule: str = "constant"
    """`constant` (atomic tasks) or `cosine` (linear warm-up then cosine decay)."""
    warmup_steps: int = 0
    """Linear warm-up steps W of the cosine schedule."""
    schedule_steps: int | None = None
    """Cosine schedule length S_total (default: `steps`); training may stop before it."""
    eval_every: int = 500
    """Steps between validation passes (checkpoint selection)."""
    checkpoint_every: int | None = None
    """Steps between `last.pt` checkpoints (default: every evaluation)."""
    log_every: int = 50
    """Steps between training-loss lines in metrics.jsonl."""
    grad_clip: float | None = None
    """Clip the global gradient norm (None: no clipping, as in the paper)."""


@dataclass(frozen=True)
class EvalConfig:
    val_samples: int = 640
    """Validation samples (fixed set, same keys as `ssmbench generate`)."""
    test_samples: int = 640
    """Test samples, scored once at the best checkpoint."""
    batch_size: int = 64
    """Real evaluation batch (does not affect any metric)."""
    metric_batch_size: int = 16
    """Virtual batch of the paper's per-batch-averaged metrics."""
    monitor: str = "auto"
    """Selection metric on val: `auto` (min MSE for regression, max accuracy / macro-F1 for classification)."""
    monitor_variant: str = "exact"
    """`exact` or `batchavg` (the paper's per-batch average) for the selection metric."""


@dataclass(frozen=True)
class DataConfig:
    seed: int = 0
    """Root seed of the task data (independent of the training seed)."""
    workers: int = 1
    """Background processes producing training batches ahead of the step (0: in the training process)."""
    prefetch: int = 4
    """Batches each worker keeps ready."""
    path: str | None = None
    """Dataset folder of a folder-backed task (ListOps, Pathfinder): `--data`; found under the data root if unset."""
    dataset_id: str | None = None
    """The folder's dataset_id, recorded when the run starts (a resumed run refuses a folder rebuilt since)."""


@dataclass(frozen=True)
class HardwareConfig:
    device: str = "auto"
    """`auto`, `cpu`, `cuda` or `cuda:i` (under torchrun each rank uses its local GPU)."""
    precision: str = "fp32"
    """`fp32` (the paper), `bf16` or `fp16` mixed precision; SSM mixers always run in float32."""
    compile: bool = False
    """Wrap the model in torch.compile."""


SECTIONS = {"train": TrainConfig, "eval": EvalConfig, "data": DataConfig, "hardware": HardwareConfig}


def _literal(value: Any) -> Any:
    """A command-line string as the value it spells (8, 1e-3, true, [1,2]), so `-o model.d_model=8` and
    `overrides={"model.d_model": 8}` give the same config (and digest); other strings stay strings.

    >>> [_literal(v) for v in ("8", "1e-3", "false", "[1, 2]", "lin", 4)]
    [8, 0.001, False, [1, 2], 'lin', 4]
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return json.loads(text)
    except ValueError:
        return value


@dataclass(frozen=True)
class RunConfig:
    task: str
    task_config: Mapping[str, Any]
    model: str
    model_overrides: Mapping[str, Any] = field(default_factory=dict)
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    data: DataConfig = DataConfig()
    hardware: HardwareConfig = HardwareConfig()
    seed: int = 0
    """Training seed (initialisation and everything random in training)."""
    preset: str = "custom"
    allow_noncausal: bool = False

    def with_overrides(self, overrides: Mapping[str, Any]) -> RunConfig:
        """A new config with `-o`-style keys applied; unknown sections or keys are ConfigErrors with a did-you-mean."""
        sections = {name: {} for name in SECTIONS}
        model = dict(self.model_overrides)
        task_keys: dict[str, Any] = {}
        for key, value in overrides.items():
            head, dot, rest = key.partition(".")
            if not dot or head == "task":
                task_keys[rest if dot else key] = value
            elif head == "model":
                if value is None:  # a Python caller removes a preset's model key (e.g. for its own plug-in)
                    model.pop(rest, None)
                else:
                    model[rest] = _literal(value)
            elif head in SECTIONS:
                sections[head][rest] = value
            else:
                close = difflib.get_close_matches(head, [*SECTIONS, "model", "task"], n=1)
                hint = f"; did you mean '{close[0]}.{rest}'?" if close else \
                    "; keys start with model., train., eval., data., hardware. or task."
                raise ConfigError(key, f"unknown section {head!r}{hint}")
        changes: dict[str, Any] = {"model_overrides": model}
        for name, values in sections.items():
            if values:
                changes[name] = _replace_section(getattr(self, name), name, values)
        if task_keys:
            changes["task_config"] = _task_config(self.task, {**self.task_config, **task_keys})
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["task_config"] = dict(self.task_config)
        out["model_overrides"] = dict(self.model_overrides)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunConfig:
        data = dict(data)
        for name, section in SECTIONS.items():
            data[name] = section(**data.get(name, {}))
        return cls(**data)

    def digest(self) -> str:
        """sha256 of the canonical JSON of everything that determines the run's results."""
        return config_sha256(self.to_json())

    def task_digest(self) -> str:
        return config_sha256({"task": self.task, "config": dict(self.task_config), "seed": self.data.seed})


def _replace_section(section: Any, name: str, values: Mapping[str, Any]) -> Any:
    names = [f.name for f in dataclasses.fields(section)]
    parsed = {}
    for key, raw in values.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean '{name}.{close[0]}'?" if close else f"; known: {', '.join(names)}"
            raise ConfigError(f"{name}.{key}", f"unknown key{hint}")
        hint = typing.get_type_hints(type(section))[key]
        if isinstance(raw, str) and type(None) in typing.get_args(hint) and raw.strip().lower() in ("none", "null"):
            parsed[key] = None
        elif isinstance(raw, str) and hint == (str | None):
            parsed[key] = raw.strip()  # a path or an id: never parsed as JSON
        else:
            parsed[key] = _parse_value(type(section), key, raw)
    return dataclasses.replace(section, **parsed)


def _task_config(task_name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Validate task keys through the task's own config class; returns its full dict (JSON primitives)."""
    from ..config import apply_overrides
    from ..registry import get_task

    task = get_task(task_name)
    base = task.presets[task.default_preset]
    try:
        config = apply_overrides(base, dict(values))
    except ConfigError as exc:
        raise ConfigError(f"task.{exc.field}" if not exc.field.startswith("task.") else exc.field,
                          exc.message.split(": ", 1)[-1]) from None
    return json_plain(config.to_dict())


def task_config_object(task_name: str, values: Mapping[str, Any]) -> Any:
    """The task's frozen config instance for a stored `task_config` dict."""
    from ..config import config_from_dict
    from ..registry import get_task

    task = get_task(task_name)
    return config_from_dict(type(task.presets[task.default_preset]), dict(values))
