"""What one `ssmbench eval` (or `ssmbench.evaluate(...)`) asks for, as one frozen value made at the boundary.

A `RunRequest` groups the command's options by what they decide: the task and its selector (`TaskSelector`), what
defines the run (`RunSettings`: preset, keys, seeds, protocol) and where and how it runs (`RunOptions`: device,
folders, output, limits), with its mode: continue a run (`resume`), score a checkpoint (`checkpoint`), one run
(`single`) or several in a suite folder (`suite`). `dispatch.plan` decides the mode and `dispatch.run_request`
runs the request; `resolver.resolve_request` turns a single run's request into its
`RunConfig`.

Example:
    >>> r = RunRequest("single", "dlr", TaskSelector("pathfinder", size=128),
    ...                RunSettings(overrides={"train.steps": "10"}))
    >>> r.selector.size, r.settings.preset, r.options.runs_root
    (128, 'quick', 'runs')
    >>> m = r.member("shift", out="suite/shift-seed1", seed=1)
    >>> m.mode, m.selector.task, m.settings.seed, m.options.out
    ('single', 'shift', 1, 'suite/shift-seed1')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..runtime.time_limit import Deadline
    from .run_config import RunConfig

Mode = Literal["single", "suite", "resume", "checkpoint"]


@dataclass(frozen=True)
class TaskSelector:
    """`--task` and the option that selects the task's config: `--length` (an atomic task's `L`) or `--size`
    (Pathfinder's side). The same value as a key (`-o size=S`, `-o L=N`) stays among the keys; the resolver
    settles the two into one selector and refuses them when they disagree."""

    task: str | None = None
    length: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class RunSettings:
    """What defines the run (or the suite): its config is resolved from these."""

    preset: str = "quick"
    config_file: str | Path | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    seeds: tuple[int, ...] = ()
    allow_noncausal: bool = False
    evaluator: str = "train_eval"
    split: str | None = None
    config_read: tuple[str, Mapping[str, Any]] | None = None
    """`config_file` as read once where the settings are made: (its text, its keys); the resolver and a suite's
    identity use these, so the file is read once a command."""

    def __post_init__(self) -> None:
        if self.config_file is not None and self.config_read is None:
            from ...config import read_config_file

            object.__setattr__(self, "config_read", read_config_file(self.config_file))

    @property
    def config_keys(self) -> dict[str, Any]:
        """The keys of `--config FILE` (none without one)."""
        return dict(self.config_read[1]) if self.config_read is not None else {}


@dataclass(frozen=True)
class RunOptions:
    """Where and how the run goes: none of these changes its results."""

    device: str | None = None
    precision: str | None = None
    compile: bool | None = None
    cuda_graph: bool | None = None
    data: str | Path | None = None
    out: str | Path | None = None
    runs_root: str | Path = "runs"
    quiet: bool = False
    logger: str | None = None
    force: bool = False
    time_limit: Deadline | float | str | None = None
    pack: str = "auto"
    """How a suite trains the runs that share an architecture and shapes: `auto` as packs (one stacked model) where
    a packed step measures faster on this device, `always` as packs, `never` one by one. Either way each run's
    results are its single run's."""

    def hardware_keys(self) -> dict[str, Any]:
        """`--device`, `--precision`, `--compile` as `-o` keys (applied after the user's own keys)."""
        return {f"hardware.{k}": v for k, v in (("device", self.device), ("precision", self.precision),
                                                 ("compile", self.compile), ("cuda_graph", self.cuda_graph))
                if v is not None}


@dataclass(frozen=True)
class RunRequest:
    """One eval command, normalised: the mode, the model and the three groups above. `config` is a config resolved
    already (a run's config.json), which replaces the selector and the settings' keys; `resume_dir` and
    `checkpoint` are the folder or file of those modes."""

    mode: Mode
    model: str | None
    selector: TaskSelector = TaskSelector()
    settings: RunSettings = RunSettings()
    options: RunOptions = RunOptions()
    resume_dir: str | Path | None = None
    checkpoint: str | Path | None = None
    config: RunConfig | None = None
    lengths: tuple[int, ...] = ()
    """checkpoint mode: score at each of these lengths and write one table and plot (`length_sweep`)."""

    def member(self, task: str, out: str | Path, seed: int | None,
               time_limit: Deadline | float | str | None = None) -> RunRequest:
        """The single run of `task` (at `seed`, when the suite has several) that a suite places in `out`."""
        settings = self.settings if seed is None else dataclasses.replace(self.settings, seed=seed)
        options = dataclasses.replace(self.options, out=out, time_limit=time_limit)
        return dataclasses.replace(self, mode="single", selector=dataclasses.replace(self.selector, task=task),
                                   settings=settings, options=options)
