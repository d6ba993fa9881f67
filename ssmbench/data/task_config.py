"""Resolve a task config from CLI-style inputs: defaults -> preset -> config file -> overrides -> validation.

`--length L` selects an atomic task's preset named L (every other field at its default); `--size S` selects a
pathfinder preset, or starts from the nearest one and resizes it (`Task.resize_config`: pathfinder scales its
lengths with the side); `--preset P` selects a ListOps preset.
Using the option of another task family is a ConfigError that names the right one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import apply_overrides, load_config_file, parse_overrides
from ..errors import ConfigError
from ..registry import get_task

OPTION_OF = {"length": "--length", "size": "--size", "preset": "--preset"}
SELECTOR_FIELD = {"length": "L", "size": "size"}
"""The config field that doubles as the preset selector of each `preset_option`."""


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


def resolve_config(task_name: str, length: int | None = None, size: int | None = None, preset: str | None = None,
                   config_file: str | None = None, overrides: Sequence[str] = ()) -> tuple[Any, Any, str]:
    """(task instance, resolved config, a note for the user such as which preset a size started from).

    `overrides` are `key=value` strings (-o, extra --key options); a `size` or `L` among them (or in the config
    file) selects the preset exactly as `--size` / `--length` does, so `-o size=512` is the 512 preset.
    """
    task = get_task(task_name)
    changes: dict[str, Any] = {}
    if config_file:
        changes.update(load_config_file(config_file))
    changes.update(parse_overrides(overrides))
    config, note = config_from_values(task, changes, length=length, size=size, preset=preset)
    return task, config, note


def config_from_values(task: Any, values: Mapping[str, Any], length: int | None = None, size: int | None = None,
                       preset: str | None = None) -> tuple[Any, str]:
    """(config, note) from field values: the preset they select first, then every other value on top.

    The preset comes from `length` / `size` / `preset` or, for the task's own option, from the `L` / `size` value
    in `values` (`ssmbench generate` and `TaskStream` resolve alike). A size without a preset starts from the
    nearest preset and goes through the task's `resize_config`.

    >>> from ssmbench.registry import get_task
    >>> config, note = config_from_values(get_task("pathfinder"), {"size": 512, "num_distractors": 4})
    >>> config.seed_distance, config.num_distractors, note
    (40, 4, '')
    >>> config_from_values(get_task("pathfinder"), {"size": "200"})[1]
    'size 200 has no preset: preset 256 resized to 200 (lengths scaled by the task)'
    """
    changes = dict(values)
    given = {"length": length, "size": size, "preset": preset}
    for option, value in given.items():
        if value is not None and option != task.preset_option:
            raise ConfigError(OPTION_OF[option], f"{task.name} takes no {OPTION_OF[option]}; "
                                                 f"use {OPTION_OF[task.preset_option]}")
    key = SELECTOR_FIELD.get(task.preset_option)
    if key is not None and key in changes:
        value = _as_int(key, changes.pop(key))
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
            start = nearest_size_preset(task, value)
            config = task.resize_config(task.presets[start], value)
            note = f"size {value} has no preset: preset {start} resized to {value} (lengths scaled by the task)"
    else:
        name = value if value is not None else task.default_preset
        if name not in task.presets:
            raise ConfigError("--preset", f"{task.name} has no preset {name!r}; choose from "
                                          f"{', '.join(task.presets)}")
        config = task.presets[name]
    if changes:
        config = apply_overrides(config, changes)
    return config, note


def nearest_size_preset(task: Any, size: int) -> str:
    """The name of the preset with the nearest side to `size` (ties: the smaller), for `--size` tasks.

    >>> class Sizes:
    ...     presets = {"128": None, "256": None, "512": None}
    >>> nearest_size_preset(Sizes, 300), nearest_size_preset(Sizes, 192), nearest_size_preset(Sizes, 4000)
    ('256', '128', '512')
    """
    return min(task.presets, key=lambda k: (abs(int(k) - size), int(k)))


def _build(task: Any, **fields: Any) -> Any:
    try:
        return task.Config(**fields)
    except TypeError as exc:
        raise ConfigError("config", str(exc)) from None


def _as_int(key: str, value: Any) -> int:
    try:
        if isinstance(value, bool) or float(value) != int(float(value)):
            raise ValueError
        return int(float(value))
    except (TypeError, ValueError):
        raise ConfigError(key, f"must be an integer, got {value!r}") from None
