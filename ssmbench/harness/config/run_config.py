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
    >>> cfg.resolved_task.spec.seq_len  # the task, its config and Spec, settled once and carried
    64
    >>> cfg.with_overrides({"train.stepz": 1})
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: train.stepz: unknown key; did you mean 'train.steps'?
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...config import Bound, config_sha256, parse_value
from ...errors import ConfigError
from ...plain import did_you_mean

if TYPE_CHECKING:
    from ...api import Spec, TaskConfig
    from ...task_config import ResolvedTask


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
    length_min: int | None = None
    """Train short, test long (`runtime.lengths`): the task's L of each step drawn uniformly in [length_min,
    length_max], a pure function of (data seed, step); None: every step at the task's L."""
    length_max: int | None = None
    """The longest training length of that range (both ends or neither)."""
    time_limit: float | None = None
    """Wall-clock limit of this command in seconds (`--time-limit`; `-o` also takes 90s, 45m, 4h, 1h30m, 1:30:00):
    stop cleanly before it, resumable (exit 75). A setting of the command, not of the run: never stored in
    config.json or a checkpoint, so not part of the digest."""


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
    test_lengths: str | None = None
    """Train short, test long: the lengths the best checkpoint is scored at when training ends ("41-500",
    "64,128,256", "40-256:8"), per-length scores and their mean in metrics.json (`runtime.lengths`)."""
    log_samples: bool = False
    """Write the test split's per-sample predictions to RUN/predictions/test.npz (`--log-samples`)."""


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
    train_samples: int | None = None
    """Streamed tasks: train on the first N samples of the train split only, reshuffled every epoch (MAD's fixed
    training sets); None: a fresh sample at every position of every step (the DLR paper's protocol)."""


@dataclass(frozen=True)
class HardwareConfig:
    device: str = "auto"
    """`auto`, `cpu`, `cuda` or `cuda:i` (under torchrun each rank uses its local GPU)."""
    precision: str = "fp32"
    """`fp32` (the paper), `bf16` or `fp16` mixed precision; SSM mixers always run in float32."""
    compile: bool = False
    """Wrap the model in torch.compile."""
    cuda_graph: bool = False
    """Capture the training step as a CUDA graph after 3 eager steps (`training.cuda_graph`; CUDA, fp32 / bf16, one
    process)."""
    threads: int | None = None
    """torch intra-op threads of the training process (None: the CPUs this process may use, minus the data
    workers; `OMP_NUM_THREADS` also decides when set)."""


SECTIONS = {"train": TrainConfig, "eval": EvalConfig, "data": DataConfig, "hardware": HardwareConfig}

COMMAND_ONLY = (("train", "time_limit"),)
"""Keys that belong to one command, not to the run: left out of `to_json` (config.json, checkpoints) and so of the
digest; a resumed run may set them anew."""


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
    resolved: ResolvedTask | None = field(default=None, compare=False, repr=False)
    """The task of `task` / `task_config` settled once (`resolved_task`): set by the resolver, carried by
    `dataclasses.replace`, dropped when the task config changes; never stored (config.json has the name and the
    config it is made from)."""

    @functools.cached_property
    def resolved_task(self) -> ResolvedTask:
        """The run's task object, config and Spec, made once: the resolver's, or (a config built by hand) made on
        first use and kept; read from the instance after its first use."""
        r = self.resolved  # (a config changed by dataclasses.replace since it was resolved is made anew)
        if r is None or r.task.name != self.task or r.plain != self.task_config:
            from ...task_config import ResolvedTask

            object.__setattr__(self, "resolved", ResolvedTask.of(self.task, self.task_config))
        assert self.resolved is not None
        return self.resolved

    def with_overrides(self, overrides: Mapping[str, Any]) -> RunConfig:
        """A new config with `-o`-style keys applied; unknown sections or keys are ConfigErrors with a did-you-mean."""
        sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        model = dict(self.model_overrides)
        task_keys: dict[str, Any] = {}
        for key, value in overrides.items():
            head, dot, rest = key.partition(".")
            if not dot or head == "task":
                task_keys[rest if dot else key] = value
            elif head == "model":
                if value is None:  # ~model.KEY on the command line, or None from Python: the preset's key goes
                    model.pop(rest, None)
                else:
                    model[rest] = parse_value(value)
            elif head in SECTIONS:
                sections[head][rest] = value
            else:
                hint = did_you_mean(head, [*SECTIONS, "model", "task"], "'{}." + rest + "'") or \
                    "; keys start with model., train., eval., data., hardware. or task."
                raise ConfigError(key, f"unknown section {head!r}{hint}")
        changes: dict[str, Any] = {"model_overrides": model}
        for name, values in sections.items():
            if values:
                changes[name] = _replace_section(getattr(self, name), name, values)
        if task_keys:
            changes["task_config"] = _task_config(self.task, self.task_config, task_keys)
            if changes["task_config"] != dict(self.task_config):
                changes["resolved"] = None  # another config: its Spec is made when first asked for
        return dataclasses.replace(self, **changes)

    def validate(self) -> RunConfig:
        """Refuse values no run can use (a ConfigError naming the key); returns self. Every entry point calls it:
        `evaluate`, `resume` and checkpoint scoring."""
        from .schedule import lr_factor

        t, e = self.train, self.eval
        self._check_bounds(ONE_KEY_CHECKS)
        SEED.check("seed", self.seed)
        from .data_folders import check_metric_batches

        check_metric_batches(e.metric_batch_size, {s: (n, f"eval.{s}_samples = {n}") for s, n in
                                                   (("val", e.val_samples), ("test", e.test_samples))})
        total = t.schedule_steps or t.steps  # the cosine's length; checked here, before a run folder exists
        if t.schedule == "cosine" and total <= t.warmup_steps:
            raise ConfigError("train.schedule_steps" if t.schedule_steps else "train.steps",
                              f"must exceed train.warmup_steps ({t.warmup_steps}) for the cosine schedule, got "
                              f"{total}", f"pass -o train.warmup_steps=N with N < {total}, or more steps")
        lr_factor(t.schedule, t.warmup_steps, total)  # an unknown schedule name
        if self.data.train_samples is not None:
            if self.resolved_task.task.policy.reads_folder:
                raise ConfigError("data.train_samples", f"applies to streamed tasks; {self.task} trains on its "
                                  "dataset folder's whole train split", "build a smaller folder with "
                                  f"`ssmbench generate {self.task} --n N` instead")
        from ..runtime.lengths import check as check_lengths

        check_lengths(self)
        if t.time_limit is not None:
            from ..runtime.time_limit import parse_duration

            parse_duration(t.time_limit, "train.time_limit")  # > 0 and finite
        return self

    def _check_bounds(self, keys: Collection[str]) -> None:
        """The checks of `validate` that look at one key each (the declared `BOUNDS`, precision), for `keys`
        only."""
        for name in keys:
            bound = BOUNDS.get(name)
            if bound is not None:
                section, _, key = name.partition(".")
                bound.check(name, getattr(getattr(self, section), key))
        if "hardware.precision" in keys and self.hardware.precision not in ("fp32", "bf16", "fp16"):
            raise ConfigError("hardware.precision", f"must be fp32, bf16 or fp16, got {self.hardware.precision!r}")

    def task_object(self) -> TaskConfig:
        """The task's frozen config instance."""
        return self.resolved_task.config

    def spec(self) -> Spec:
        """The task's Spec at this config (what the model is built for)."""
        return self.resolved_task.spec

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "resolved"}
        out.update({name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS})
        out["task_config"] = dict(self.task_config)
        out["model_overrides"] = dict(self.model_overrides)
        for section, key in COMMAND_ONLY:
            out[section].pop(key, None)
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


MAX_STEPS = 10 ** 9
"""Most optimiser steps (and the longest interval, warm-up or schedule) a run may ask for: a billion, far beyond
any paper's protocol (at most a few hundred thousand), and far below what Python's integers would accept."""
MAX_BATCH = 2 ** 24
"""Largest batch size or sample count of one key; the memory check refuses what does not fit long before this."""

_STEPS = Bound(1, MAX_STEPS, why="a billion steps, more than any protocol trains")
_BATCH = Bound(1, MAX_BATCH)
BOUNDS: dict[str, Bound] = {
    "train.steps": _STEPS, "train.batch_size": _BATCH, "train.eval_every": _STEPS, "train.log_every": _STEPS,
    "train.checkpoint_every": _STEPS, "train.length_min": Bound(1, 2 ** 24), "train.length_max": Bound(1, 2 ** 24), "train.schedule_steps": _STEPS, "train.warmup_steps": Bound(0, MAX_STEPS),
    "train.lr": Bound(0, 10, low_open=True), "train.lr_ssm": Bound(0, 10, low_open=True),
    "train.weight_decay": Bound(0, 100), "train.beta1": Bound(0, 1, high_open=True),
    "train.beta2": Bound(0, 1, high_open=True),
    "train.eps": Bound(0, 1, low_open=True), "train.grad_clip": Bound(0, 1e9, low_open=True),
    "eval.batch_size": _BATCH, "eval.metric_batch_size": _BATCH, "eval.val_samples": Bound(1, MAX_BATCH),
    "eval.test_samples": Bound(0, MAX_BATCH), "data.workers": Bound(0, 1024), "data.prefetch": Bound(1, 1024),
    "data.train_samples": Bound(1, 2 ** 62), "data.seed": Bound(0, 2 ** 63 - 1),
    "hardware.threads": Bound(1, 2 ** 16)}
"""The declared range of every numeric key of the train, eval, data and hardware sections (`validate`, and
`check_keys` where `-o` is parsed); an optional key may also be None. Float keys are also finite
(`config.parse_value` refuses nan and infinity as it parses). The run's own seed is bounded as data.seed is
(`SEED`)."""

SEED = Bound(0, 2 ** 63 - 1)

ONE_KEY_CHECKS = (*BOUNDS, "hardware.precision")


def check_keys(keys: Mapping[str, Any]) -> None:
    """Check `-o`-style keys of the train, eval, data and hardware sections without the task, the preset, the model
    or torch (`ssmbench eval` runs this before its heavy imports): an unknown section or key (did-you-mean), a
    value that does not parse, and the bounds that concern one key. Model and task keys are left to the model
    builder and the task's resolver; checks across keys (the cosine schedule's length) to `validate`."""
    own = {k: v for k, v in keys.items() if "." in k and k.partition(".")[0] not in ("model", "task")}
    if own:
        base = RunConfig(task="", task_config={}, model="")
        base.with_overrides(own)._check_bounds([k for k in own if k in ONE_KEY_CHECKS])


def _replace_section(section: Any, name: str, values: Mapping[str, Any]) -> Any:
    names = [f.name for f in dataclasses.fields(section)]
    parsed: dict[str, Any] = {}
    for key, raw in values.items():
        if key not in names:
            hint = did_you_mean(key, names, f"'{name}." + "{}'") or f"; known: {', '.join(names)}"
            raise ConfigError(f"{name}.{key}", f"unknown key{hint}")
        hint = typing.get_type_hints(type(section))[key]
        if (name, key) == ("train", "time_limit") and raw is not None and \
                not (isinstance(raw, str) and raw.strip().lower() in ("none", "null")):
            from ..runtime.time_limit import parse_duration

            parsed[key] = parse_duration(raw, f"{name}.{key}")  # 90s, 45m, 1h30m, 1:30:00 or seconds
        elif isinstance(raw, str) and hint == (str | None) and raw.strip().lower() not in ("none", "null"):
            parsed[key] = raw.strip()  # a path or an id: never parsed as JSON
        else:
            parsed[key] = parse_value(raw, hint, f"{name}.{key}")
    return dataclasses.replace(section, **parsed)


def _task_config(task_name: str, current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """The task config after `changes`, resolved as `ssmbench generate` resolves it (`task_config.rebase`: a new
    `L` / `size` starts from the preset it selects), as JSON primitives."""
    from ...task_config import rebase, to_plain

    try:
        return to_plain(rebase(task_name, current, changes))
    except ConfigError as exc:
        field = exc.field if exc.field.startswith("task.") or exc.field.startswith("--") else f"task.{exc.field}"
        raise ConfigError(field, exc.message.split(": ", 1)[-1], exc.hint) from None
