"""The one resolver of task configs: task name + values -> frozen task config, and back to plain JSON.

Every path that turns values into a task config goes through here: `ssmbench generate`, `ssmbench eval` /
`ssmbench.evaluate`, `RunConfig.with_overrides` (so `--resume -o` and `--checkpoint -o size=...`), the streamed
batches, dataset-folder matching, manifests and cards. The order is always defaults -> the preset the selector
picks -> config file -> values -> validation (the config class's `__post_init__`).

The selector is the task's own option (`Task.preset_option`): `--length L` (atomic tasks: the preset named L, or
the defaults at that L), `--size S` (Pathfinder: the preset named S, or the nearest one passed through
`Task.resize_config`), `--preset P` (ListOps). A value of the selector's field (`L`, `size`) among the values
selects exactly as the option does, so `-o size=200` and `--size 200` build the same config.

Example:
    >>> config, note = resolve("pathfinder", {"size": 200, "num_distractors": 4})
    >>> config.size, config.num_distractors, note
    (200, 4, 'size 200 has no preset: preset 256 resized to 200 (lengths scaled by the task)')
    >>> plain = to_plain(config)
    >>> from_plain("pathfinder", plain) == config
    True
    >>> rebase("pathfinder", to_plain(resolve("pathfinder", {"size": 128})[0]), {"size": 200}) == \\
    ...     resolve("pathfinder", {"size": 200})[0]
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .config import apply_overrides, load_config_file, parse_overrides, parse_value
from .errors import ConfigError
from .plain import json_plain
from .registry import get_task

if TYPE_CHECKING:
    from .api import Spec, Task, TaskConfig

__all__ = ["resolve", "resolve_config", "to_plain", "from_plain", "rebase", "explicit_values",
           "nearest_size_preset", "extra_overrides", "ResolvedTask", "OPTION_OF", "SELECTOR_FIELD"]

OPTION_OF = {"length": "--length", "size": "--size", "preset": "--preset"}
SELECTOR_FIELD = {"length": "L", "size": "size"}
"""The config field that doubles as the preset selector of each `preset_option`."""


@dataclasses.dataclass(frozen=True, eq=False)
class ResolvedTask:
    """A task settled once for a run: the task object, its frozen config and the Spec at that config.

    The run's resolver makes it (`harness.config.resolver`) and the run carries it (`RunConfig.resolved_task`)
    to everything that needs the task: the model builder, the objective, the feeds, `TaskStream`, the message
    sizing. Nothing downstream looks the task up by name or computes its Spec again. Two are equal when their task
    and config are (the Spec follows from them).

    Example:
        >>> rt = ResolvedTask.of("cumsum", {"L": 64})
        >>> rt.name, rt.config.L, rt.spec.seq_len, rt.plain["L"]
        ('cumsum', 64, 64, 64)
        >>> rt == ResolvedTask.of("cumsum", rt.plain)
        True
    """

    task: Task[Any]
    config: TaskConfig
    spec: Spec
    plain: dict[str, Any] = dataclasses.field(repr=False)
    """The config's JSON form (`to_plain(config)`: what config.json stores)."""

    @classmethod
    def of(cls, task: str | Task[Any], config: TaskConfig | Mapping[str, Any]) -> ResolvedTask:
        """The resolved task of a config object or of a full stored config (`from_plain`); the Spec is computed
        here, once."""
        task = _task(task)
        if isinstance(config, Mapping):
            config = from_plain(task, config)
        return cls(task, config, task.spec(config), to_plain(config))

    @classmethod
    def settle(cls, task: str | Task[Any] | ResolvedTask,
               config: TaskConfig | Mapping[str, Any] | None = None) -> ResolvedTask:
        """`task` as given when it is resolved already (then `config` must be None); else the task with `config`
        resolved as `ssmbench generate` resolves it: a mapping of values (the preset its selector picks, then the
        other values), a config object as it is, None the default preset.

        >>> ResolvedTask.settle("pathfinder", {"size": 200}).spec.seq_len
        40000
        >>> rt = ResolvedTask.settle("shift"); ResolvedTask.settle(rt) is rt
        True
        """
        if isinstance(task, ResolvedTask):
            if config is not None:
                raise TypeError("a resolved task carries its config: pass no other")
            return task
        task = _task(task)
        if config is None:
            config = task.presets[task.default_preset]
        elif isinstance(config, Mapping):
            config = resolve(task, config)[0]
        return cls(task, config, task.spec(config), to_plain(config))

    @property
    def name(self) -> str:
        return self.task.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResolvedTask) and (self.name, self.config) == (other.name, other.config)

    def __hash__(self) -> int:
        return hash((self.name, self.config))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (to data workers, other ranks) by registry name: a task object is not pickled, and a plug-in
        task registered in the parent is found the same way in the child."""
        return (_unpickle_resolved, (self.name, self.config, self.spec))


def _unpickle_resolved(name: str, config: TaskConfig, spec: Spec) -> ResolvedTask:
    return ResolvedTask(get_task(name), config, spec, to_plain(config))


def _task(task: str | Task[Any]) -> Task[Any]:
    return get_task(task) if isinstance(task, str) else task


def resolve(task: str | Task[Any], values: Mapping[str, Any] | None = None, *, length: int | None = None,
            size: int | None = None, preset: str | None = None) -> tuple[TaskConfig, str]:
    """(config, note) from field values: the preset they select first, then every other value on top.

    `task` is a name or a Task instance. The note says which preset a size without a preset started from.
    """
    task = _task(task)
    changes = dict(values or {})
    given: dict[str, int | str | None] = {"length": length, "size": size, "preset": preset}
    for option, value in given.items():
        if value is not None and option != task.preset_option:
            raise ConfigError(OPTION_OF[option], f"{task.name} takes no {OPTION_OF[option]}; "
                                                 f"use {OPTION_OF[task.preset_option]}")
    key = SELECTOR_FIELD.get(task.preset_option)
    if key is not None and key in changes:
        value = parse_value(changes.pop(key), int, key)
        if given[task.preset_option] is not None and given[task.preset_option] != value:
            raise ConfigError(OPTION_OF[task.preset_option], f"{given[task.preset_option]} disagrees with "
                              f"{key} = {value} given as a config value; give one of them")
        given[task.preset_option] = value
    note = ""
    value = given[task.preset_option]
    if task.preset_option == "length":
        config = task.presets.get(str(value)) if value is not None else task.presets[task.default_preset]
        if config is None:
            config = _build(task, L=value)
    elif task.preset_option == "size":
        if value is None:
            config = task.presets[task.default_preset]
        elif str(value) in task.presets:
            config = task.presets[str(value)]
        else:
            side = cast(int, value)  # the `size` argument or the size= value, parsed as an int above
            start = nearest_size_preset(task, side)
            config = task.resize_config(task.presets[start], side)
            note = f"size {value} has no preset: preset {start} resized to {value} (lengths scaled by the task)"
    else:
        name = value if value is not None else task.default_preset
        if not isinstance(name, str) or name not in task.presets:
            raise ConfigError("--preset", f"{task.name} has no preset {name!r}; choose from "
                                          f"{', '.join(task.presets)}")
        config = task.presets[name]
    if changes:
        config = apply_overrides(config, changes)
    return config, note


def resolve_config(task_name: str, length: int | None = None, size: int | None = None, preset: str | None = None,
                   config_file: str | None = None,
                   overrides: Sequence[str] = ()) -> tuple[Task[Any], TaskConfig, str]:
    """(task instance, config, note) from command-line inputs: `--length/--size/--preset`, `--config FILE` and
    `key=value` strings (-o and extra --key options)."""
    task = get_task(task_name)
    changes: dict[str, Any] = {}
    if config_file:
        changes.update(load_config_file(config_file))
    changes.update(parse_overrides(overrides))
    config, note = resolve(task, changes, length=length, size=size, preset=preset)
    return task, config, note


def to_plain(config: TaskConfig) -> dict[str, Any]:
    """A config's JSON form (tuples as lists): what manifests, run configs and digests store."""
    return json_plain(config.to_dict())


def from_plain(task: str | Task[Any], values: Mapping[str, Any]) -> TaskConfig:
    """The config instance of a stored full JSON form (a manifest's or a run's `config`), field for field."""
    task = _task(task)
    fields = {f.name for f in dataclasses.fields(task.Config)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(unknown[0], f"unknown config key for {task.name} (task version {task.version})")
    base = task.presets[task.default_preset]
    return apply_overrides(base, dict(values))


def explicit_values(task: str | Task[Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The values of a full config that differ from what its selector alone resolves to (what a user changed)."""
    task = _task(task)
    key = SELECTOR_FIELD.get(task.preset_option)
    selector = {key: values[key]} if key is not None and key in values else {}
    base = to_plain(resolve(task, selector)[0]) if selector or task.preset_option != "preset" else \
        _preset_base(task, values)
    return {k: v for k, v in values.items() if base.get(k) != v or k == key}


def _preset_base(task: Task[Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The preset a `--preset` task's config is closest to (fewest differing fields; the default on ties)."""
    plain = {name: to_plain(config) for name, config in task.presets.items()}

    def distance(name: str) -> tuple[int, bool]:
        return sum(plain[name].get(k) != v for k, v in values.items()), name != task.default_preset

    return plain[min(plain, key=distance)]


def rebase(task: str | Task[Any], current: Mapping[str, Any], changes: Mapping[str, Any]) -> TaskConfig:
    """`current` (a full JSON config) with `changes` applied as `generate` would resolve them.

    Changing the selector (`L`, `size`) re-resolves from the preset it selects and keeps only the fields the
    current config had changed against its own preset, so a 128 Pathfinder config moved to `size = 200` equals
    `ssmbench generate pathfinder --size 200` (not the 128 geometry at side 200).
    """
    task = _task(task)
    key = SELECTOR_FIELD.get(task.preset_option)
    if key is None or key not in changes:
        return apply_overrides(from_plain(task, current), dict(changes))
    kept = {k: v for k, v in explicit_values(task, current).items() if k != key}
    return resolve(task, {**kept, **changes})[0]


def nearest_size_preset(task: Task[Any], size: int) -> str:
    """The name of the preset with the nearest side to `size` (ties: the smaller), for `--size` tasks.

    >>> class Sizes:
    ...     presets = {"128": None, "256": None, "512": None}
    >>> nearest_size_preset(Sizes, 300), nearest_size_preset(Sizes, 192), nearest_size_preset(Sizes, 4000)
    ('256', '128', '512')
    """
    return min(task.presets, key=lambda k: (abs(int(k) - size), int(k)))


def extra_overrides(args: Sequence[str]) -> list[str]:
    """Task options given as extra CLI arguments, as `key=value` pairs for `ssmbench.config.parse_overrides`.

    >>> extra_overrides(["--min-length", "500", "--consecutive=true"])
    ['min-length=500', 'consecutive=true']
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or arg == "--":
            raise ConfigError("arguments", f"unexpected argument {arg!r}", "run `ssmbench generate --help`")
        if "=" in arg:
            out.append(arg[2:])
        elif i + 1 >= len(args):
            raise ConfigError(arg, "expects a value")
        else:
            out.append(f"{arg[2:]}={args[i + 1]}")
            i += 1
        i += 1
    return out


def _build(task: Task[Any], **fields: Any) -> TaskConfig:
    try:
        return task.Config(**fields)
    except TypeError as exc:
        raise ConfigError("config", str(exc)) from None
