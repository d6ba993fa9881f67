"""The contracts every plug-in implements: task configs, the shape `Spec`, `Task`, mixers, factories, evaluators.

Plug-ins import their types from here. Classes are abstract or final: concrete tasks are `@typing.final` and derive
from `Task`, or from at most one abstract base of their own between them and `Task` (the atomic tasks' `AtomicTask`,
ssmbench.generators._atomic, which holds their shared attributes and `generate`); other shared code is plain
functions (`ssmbench.generators._kernels`).
This module imports neither numba nor torch.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np

from .training_policy import TrainingPolicy

if TYPE_CHECKING:
    import torch

__all__ = ["TaskConfig", "Field", "Spec", "Task", "TrainingPolicy", "Mixer", "ModelFactory", "Evaluator",
           "MetricState", "declared_hooks", "undeclared_names"]


@dataclass(frozen=True)
class TaskConfig:
    """Base of every task config: a frozen dataclass of JSON primitives, validated in `__post_init__`.

    A key added to a task after its datasets were published names the value that reproduces the old bytes in
    `added_defaults`: `to_dict()` (the identity that enters the sample keys, manifests and digests) leaves the key
    out while it holds that value, so existing datasets, goldens and catalogue entries keep their bytes, and any
    other value makes a new dataset.

    >>> @dataclass(frozen=True)
    ... class Demo(TaskConfig):
    ...     L: int = 8
    ...     values: str = "noise"
    ...     added_defaults: ClassVar[Mapping[str, Any]] = {"values": "noise"}
    >>> Demo().to_dict(), Demo(values="zeros").to_dict()
    ({'L': 8}, {'L': 8, 'values': 'zeros'})
    """

    added_defaults: ClassVar[Mapping[str, Any]] = {}
    """Keys added after a task's first release -> the value that reproduces the bytes built before them."""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key, old_behaviour in self.added_defaults.items():
            if key in out and out[key] == old_behaviour:
                del out[key]
        return out


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

    The public names of this class are the whole contract: the identity attributes (`name`, `version`, `Config`,
    `presets`, `default_preset`, `default_n`) and `spec`, `generate` and `oracle` are required; every other hook
    has a default (how the dataset folder is built and its data card written). How the harness trains on the task
    is not a hook here but one value, `policy` (`ssmbench.training_policy.TrainingPolicy`). The registry refuses a
    task class that defines any other public name (`undeclared_names`), so a misspelt hook fails loudly when the
    task is loaded. docs/plugins.md shows the smallest task.
    """

    name: ClassVar[str]
    """Registry key == module stem == data card stem == HDF5 `task` attribute."""
    version: ClassVar[str]
    """Bumped whenever the bytes produced for the same (config, seed) change."""
    Config: ClassVar[type[TaskConfig]]
    """The task's config class: a frozen `TaskConfig` dataclass that validates itself in `__post_init__`."""
    presets: ClassVar[Mapping[str, TaskConfig]]
    """Named configs, e.g. {"4096": Config(L=4096), "512": Config(L=512)}; selected by `preset_option`."""
    default_preset: ClassVar[str]
    """The preset used when the user names none."""
    default_n: ClassVar[int]
    """The number of samples `ssmbench generate` builds when --n is not given."""
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.8, "val": 0.1, "test": 0.1}
    """Fractions (or counts) of train, val and test when --split is not given."""
    preset_option: ClassVar[Literal["length", "size", "preset"]] = "length"
    """Which CLI option selects a preset: --length (atomic), --size (pathfinder), --preset (ListOps)."""

    @abc.abstractmethod
    def spec(self, config: C) -> Spec:
        """What `generate` returns for `config` (field dtypes and per-sample shapes) and what a model needs."""

    @abc.abstractmethod
    def generate(self, config: C, keys: np.ndarray) -> dict[str, np.ndarray]:
        """keys: (N,) uint64, one per sample. Returns every field of `spec(config).fields`, first dim N."""

    @abc.abstractmethod
    def oracle(self, config: C, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Recompute the targets of one sample from its inputs in plain NumPy (tests, `verify --deep`)."""

    def fixed_arrays(self, config: C) -> dict[str, np.ndarray]:
        """Objects shared by every sample (fixed variants), stored in a `fixed/` group; empty by default."""
        return {}

    # ------------------------------------------------------------------------------------------ optional hooks
    # Everything below has a default, so a task overrides only what it needs. The core calls these directly;
    # `undeclared_names` (checked when the registry loads a task) rejects any other public name on a task class,
    # so a misspelt hook (`statistcs`) is an error instead of being silently ignored.

    samples_per_shard: ClassVar[int | None] = None
    """Shard size used when the user passes no --samples-per-shard; None: chosen from the sample size."""
    hf_task_category: ClassVar[str] = "other"
    """The Hugging Face `task_categories` value in the data card's front matter."""
    card_preview: ClassVar[bool] = False
    """Render `preview.png` (a few samples) into the dataset folder and its data card at finalize."""
    deduplicate: ClassVar[bool] = False
    """Build from a candidate stream with duplicates dropped (`dedup_hashes`, `select_survivors`, `dedup_report`).

    Candidates are drawn on the split "candidates" and written under `.build/`; survivors are assigned in candidate
    order to train, val and test, and the task's Spec must have an int64 `candidate_index` field.
    """
    stream_exempt: ClassVar[tuple[str, ...]] = ()
    """Config fields left out of the sample keys: they change how targets are labelled and never a random draw, so
    datasets that differ only in them hold the same inputs (Pathfinder's `label_rule`)."""
    dedup_fields: ClassVar[tuple[str, ...]] = ()
    """The fields `dedup_hashes` reads from candidate shards; empty: every field of the Spec but `candidate_index`."""

    policy: ClassVar[TrainingPolicy] = TrainingPolicy()
    """How `ssmbench eval` trains on the task (`ssmbench.training_policy`): data from a fresh stream or a dataset
    folder, the training presets that apply, the groups it belongs to, per-value accuracy breakdowns. The default
    trains on a stream with the `generic` quick preset; a task that needs other rules declares its own."""

    def card_markdown(self) -> str:
        """The task's data-card source: optional front matter, then the Markdown sections (what it probes, a worked
        example, known discrepancies) that every dataset folder's README.md includes.

        Default: the packaged `ssmbench/data_cards/<name>.md` for built-in tasks, else the class docstring.
        """
        import inspect
        from importlib import resources

        card = resources.files("ssmbench.data_cards").joinpath(f"{self.name}.md")
        if card.is_file():
            return card.read_text()
        return inspect.getdoc(type(self)) or self.name

    def resize_config(self, config: C, size: int) -> C:
        """The config for a `--size` that no preset is named after (`preset_option = "size"` tasks only).

        `config` is the preset of the nearest size (ties: the smaller); the default changes only its `size`.
        A task whose geometry must follow the image side (path lengths, radii) scales those fields here.
        """
        import dataclasses

        # a --size task's config has a `size` field, which TaskConfig (the bound of C) cannot declare
        return dataclasses.replace(config, **{"size": size})

    def statistics(self, config: C, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-split statistics of a block of rows, as arrays that add up across blocks (counts, histograms).

        The core sums them over every shard of a split into manifest.json's `statistics`; none by default.
        """
        return {}

    def statistics_markdown(self, config: C, stats: Mapping[str, Mapping[str, Any]]) -> str:
        """Markdown for the data card's statistics section, from manifest.json's `statistics`.

        The default "" makes the card show a generic table of the stored statistics.
        """
        return ""

    def dedup_hashes(self, config: C, block: Mapping[str, np.ndarray]) -> np.ndarray:
        """(n, k) uint64 hashes of candidate rows; rows with equal hashes are duplicates (`deduplicate` only).

        The default hashes every field's bytes (blake2b-128), so only exact repeats are duplicates:

        >>> class Tiny(Task):
        ...     pass
        >>> block = {"x": np.array([[1, 2], [3, 4], [1, 2]], dtype=np.uint8)}
        >>> h = Tiny.dedup_hashes(None, None, block)
        >>> h.shape, bool((h[0] == h[2]).all()), bool((h[0] == h[1]).all())
        ((3, 2), True, False)
        >>> Tiny.select_survivors(None, None, h, needed=5).tolist()
        [0, 1]
        """
        import hashlib

        names = sorted(block)
        n = len(block[names[0]]) if names else 0
        out = np.empty((n, 2), dtype=np.uint64)
        for i in range(n):
            h = hashlib.blake2b(digest_size=16)
            for name in names:
                h.update(np.ascontiguousarray(block[name][i]).tobytes())
            out[i] = np.frombuffer(h.digest(), dtype="<u8")
        return out

    def select_survivors(self, config: C, hashes: np.ndarray, needed: int) -> np.ndarray:
        """Ascending indices of the first `needed` surviving candidates (fewer if the candidates run out).

        The default keeps the first candidate of every group of equal hash rows.
        """
        hashes = np.asarray(hashes)
        if hashes.shape[0] == 0:
            return np.zeros(0, dtype=np.int64)
        _, first = np.unique(hashes, axis=0, return_index=True)
        return np.sort(first)[:needed].astype(np.int64)

    def dedup_report(self, config: C, hashes: np.ndarray, split_sizes: Mapping[str, int]) -> dict[str, Any]:
        """Counts for manifest.json's `deduplication` entry (JSON primitives)."""
        needed = int(sum(split_sizes.values()))
        kept = self.select_survivors(config, hashes, needed)
        used = int(kept[-1]) + 1 if kept.size else 0
        return {"candidates_used": used, "survivors": int(kept.size), "needed": needed,
                "dropped_duplicates": used - int(kept.size)}


def declared_hooks() -> frozenset[str]:
    """Every public name `Task` declares: what the core may read from a task class."""
    import inspect

    names = {name for klass in Task.__mro__ if klass is not object
             for name in (*vars(klass), *inspect.get_annotations(klass))}
    return frozenset(name for name in names if not name.startswith("_"))


def undeclared_names(cls: type) -> list[str]:
    """Public names a Task subclass defines that `Task` does not declare (a misspelt hook, a stray helper).

    >>> class Typo(Task):
    ...     def statistcs(self, config, block):
    ...         return {}
    >>> undeclared_names(Typo)
    ['statistcs']
    """
    hooks = declared_hooks()
    names = {name for klass in cls.__mro__ if isinstance(klass, type) and issubclass(klass, Task)
             and klass is not Task for name in vars(klass) if not name.startswith("_")}
    return sorted(names - hooks)


@runtime_checkable
class Mixer(Protocol):
    """A sequence mixer (a torch.nn.Module): (B, L, D) -> (B, L, D). See docs/models.md (A mixer)."""

    causal: bool

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor: ...


class ModelFactory(Protocol):
    """Builds a whole model from the task's Spec: (B, T, ...) -> (B, l_output, d_output)."""

    def __call__(self, spec: Spec, **hparams: Any) -> torch.nn.Module: ...


class MetricState(Protocol):
    """Sufficient statistics of a metric, summable across batches and ranks."""

    def update(self, pred: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> None: ...

    def state_tensors(self) -> list[torch.Tensor]: ...

    def compute(self) -> dict[str, float]: ...


class Evaluator(abc.ABC):
    """An evaluation protocol: what `ssmbench eval --evaluator NAME` runs on a resolved run config.

    Built-ins (`ssmbench ls evaluators`): `train_eval` (train with the task's protocol, select on validation, score
    test once; the default) and `score_only` (score a checkpoint, or the freshly initialised model, on one split).
    Third-party protocols register in the entry-point group `ssmbench.evaluators`. Concrete evaluators are final.
    """

    name: ClassVar[str]

    @abc.abstractmethod
    def run(self, config: Any, *, out: str | Path | None = None, runs_root: str | Path = "runs",
            quiet: bool = False, logger: str | None = None, **options: Any) -> Any:
        """Run the protocol for `config` (a `ssmbench.harness.config.run_config.RunConfig`) in the run folder `out` (or a
        new one under `runs_root`); returns an `EvalResult` (run_dir, config, metrics)."""
