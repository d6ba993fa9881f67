"""How `ssmbench eval` trains on a task: where batches come from, which presets apply, groups, metric breakdowns.

A task says what its data *is* (`ssmbench.api.Task`); its `policy` attribute, a `TrainingPolicy` declared beside it,
says how the harness trains on that data. The harness, the CLI and suites read these rules only from here, so a
plug-in task that declares no policy trains with the default one: a fresh stream of samples every step, the
`generic` quick preset sized from its Spec (unless `quick.toml` has a section named after the task), no group but
"all", and no per-value accuracy breakdown.

Example (the policy of a folder-backed task whose paper rows depend on the image side):

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Cfg:
...     size: int = 128
>>> policy = TrainingPolicy(training_data="folder", groups={"higher_order": 1},
...                         paper_family=lambda config: f"pathfinder{config.size}")
>>> policy.reads_folder, policy.quick_section("pathfinder"), policy.paper_rows("pathfinder", Cfg(256))
(True, 'pathfinder', 'pathfinder256')
>>> default = TrainingPolicy()
>>> default.reads_folder, default.quick_section("residues"), default.paper_rows("residues", Cfg())
(False, 'residues', 'residues')
>>> default.paper_config(Cfg()), dict(default.groups), default.breakdowns(Cfg()), default.scoring_keys
(Cfg(size=128), {}, {}, ())

This module imports neither numba, torch, h5py nor click (`ssmbench.api` imports it to give `Task` its default).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ConfigError

__all__ = ["TrainingPolicy"]


@dataclass(frozen=True)
class TrainingPolicy:
    """The DLR-paper training rules of one task; every field has the default a plug-in task gets.

    Config-dependent rules (`paper_family`, `paper_data`, `metric_breakdowns`) take the task's config object and are
    plain functions of it, so a policy stays a value declared once in the task's module.
    """

    training_data: Literal["stream", "folder"] = "stream"
    """Where training batches come from: "stream" draws a fresh batch from `generate` every step (keys of the train
    split, nothing on disk: the atomic tasks); "folder" reads a dataset folder built once by `ssmbench generate`
    (de-duplicated or costly samples: ListOps, Pathfinder), found with `--data` or under the data root."""
    preset_family: str | None = None
    """The section of the `quick` training preset that applies (atomic tasks share "atomic"); None: a section named
    after the task. A task with no section trains with the `generic` quick preset, sized from its Spec."""
    groups: Mapping[str, int] = field(default_factory=dict)
    """Groups `ssmbench eval --task GROUP` runs, with the task's position in each: {"atomic": 0, "table1": 0}.
    Every task is also in the group "all"; tables list tasks by position, then name."""
    paper_family: str | Callable[[Any], str] | None = None
    """The family of `--preset paper` rows, named `dlr_paper/<family>/<model>`: a name, or a function of the config
    (atomic tasks: "atomic" at L = 4096, "atomic512"; SHIFT: "long_shift" at other lengths). None: `preset_family`,
    else the task's name."""
    paper_data: Callable[[Any], Any] | None = None
    """The config of the data the paper trained on, from the config of a dataset folder: a paper-preset run on a
    folder whose config differs says so in one line. None: the folder's own config (no such warning)."""
    metric_breakdowns: Mapping[str, int] | Callable[[Any], Mapping[str, int]] = field(default_factory=dict)
    """Stored per-position fields that break classification accuracy down by value, with their number of buckets
    ({"node_height": 10, "node_op": 4} for the DLR paper's Figure 2), or a function of the config giving them; read
    from dataset folders and reported in metrics.json."""

    model_keys: Mapping[str, Any] = field(default_factory=dict)
    """`model.*` keys the task's labels need under every preset, applied beneath the preset and `-o` (which may
    still override them) and recorded in config.json: MAD compression declares {"model.pool": "bottleneck"}, the
    autoencoder readout that decodes the sequence from the last position's state alone."""

    scoring_keys: tuple[str, ...] = ()
    """Task config keys a trained checkpoint may be scored at (`ssmbench eval --checkpoint ... -o KEY=VALUE`, bare or
    as `task.KEY`), beside the length `L` and side `size` every task may change there: keys that change the data a
    model sees, never the model (flip-flop: ("p_ignore",), a model trained at .8 scored on the dense .1 and sparse
    .98 streams; copying: its string lengths). Any other task key is refused when scoring (`harness.scoring`)."""

    def __post_init__(self) -> None:
        if self.training_data not in ("stream", "folder"):
            raise ConfigError("TrainingPolicy.training_data", f"must be 'stream' or 'folder', got "
                              f"{self.training_data!r}")
        groups = dict(self.groups)
        bad = [g for g, p in groups.items() if not isinstance(g, str) or not isinstance(p, int) or isinstance(p, bool)]
        if bad:
            raise ConfigError("TrainingPolicy.groups", f"maps group names to integer positions, got {bad[0]!r}: "
                              f"{groups[bad[0]]!r}")
        object.__setattr__(self, "groups", types.MappingProxyType(groups))
        bad_keys = [k for k in self.model_keys if not str(k).startswith("model.")]
        if bad_keys:
            raise ConfigError("TrainingPolicy.model_keys", f"holds model.* keys only, got {bad_keys[0]!r}")
        object.__setattr__(self, "model_keys", types.MappingProxyType(dict(self.model_keys)))
        keys = tuple(self.scoring_keys)
        bad_keys = [k for k in keys if not isinstance(k, str) or not k.isidentifier()]
        if bad_keys:
            raise ConfigError("TrainingPolicy.scoring_keys", f"holds bare task config key names (\"p_ignore\"), got "
                              f"{bad_keys[0]!r}")
        object.__setattr__(self, "scoring_keys", keys)

    @property
    def reads_folder(self) -> bool:
        """Whether runs train and score on a dataset folder (`training_data == "folder"`)."""
        return self.training_data == "folder"

    def quick_section(self, task_name: str) -> str:
        """The `quick.toml` section to look up for the task named `task_name` (`preset_family`, else the name)."""
        return self.preset_family or task_name

    def paper_rows(self, task_name: str, config: Any) -> str:
        """The paper-preset family for `config` of the task named `task_name`."""
        if self.paper_family is None:
            return self.quick_section(task_name)
        return self.paper_family if isinstance(self.paper_family, str) else self.paper_family(config)

    def paper_config(self, config: Any) -> Any:
        """The config of the paper's data, for data built with `config`."""
        return config if self.paper_data is None else self.paper_data(config)

    def breakdowns(self, config: Any) -> dict[str, int]:
        """Field name -> number of buckets that accuracy is broken down by, for runs on `config`."""
        found = self.metric_breakdowns if isinstance(self.metric_breakdowns, Mapping) else \
            self.metric_breakdowns(config)
        return dict(found)
