"""Resolve a task config from CLI-style inputs: defaults -> preset -> config file -> overrides -> validation.

`--length L` selects an atomic task's preset named L (every other field at its default); `--size S` selects a
pathfinder preset, or starts from the nearest one and sets `size = S`; `--preset P` selects a ListOps preset.
Using the option of another task family is a ConfigError that names the right one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..config import apply_overrides, load_config_file, parse_overrides
from ..errors import ConfigError
from ..registry import get_task

OPTION_OF = {"length": "--length", "size": "--size", "preset": "--preset"}


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
    """(task instance, resolved config, a note for the user such as which preset a size started from)."""
    task = get_task(task_name)
    given = {"length": length, "size": size, "preset": preset}
    for option, value in given.items():
        if value is not None and option != task.preset_option:
            raise ConfigError(OPTION_OF[option], f"{task.name} takes no {OPTION_OF[option]}; "
                                                 f"use {OPTION_OF[task.preset_option]}")
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
            config = _replace(task.presets[start], size=value)
            note = f"size {value} has no preset: starting from preset {start} with size = {value}"
    else:
        name = value if value is not None else task.default_preset
        if name not in task.presets:
            raise ConfigError("--preset", f"{task.name} has no preset {name!r}; choose from "
                                          f"{', '.join(task.presets)}")
        config = task.presets[name]
    changes: dict[str, Any] = {}
    if config_file:
        changes.update(load_config_file(config_file))
    changes.update(parse_overrides(overrides))
    if changes:
        config = apply_overrides(config, changes)
    return task, config, note


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


def _replace(config: Any, **fields: Any) -> Any:
    return dataclasses.replace(config, **fields)
