"""The one resolver of a run: a `RunRequest` (a single run's) -> its validated `RunConfig` (`resolve_request`), or
the same from Python arguments (`resolve_run`). The resolver imports the request and the config; neither imports it.

The order, each step once:

1. the task, then the user's keys: `--config FILE`, then `-o`, then `--device/--precision/--compile`;
2. the selector: `--length` / `--size`, or the same field among the keys (`-o size=S`), or, for `--data` alone,
   the folder's size; the task's own resolver (`task_config.resolve`) settles it with the user's task keys and
   refuses an option the task does not take or two values that disagree;
3. the training preset that config selects (`quick`, `paper`, a row), minus model keys a user factory does not take;
4. the task config from the preset's task keys and the user's (only when the preset adds task keys: otherwise the
   config of step 2 is the run's), then every other key (`${T}` in a preset is the task's input length);
5. a folder task's dataset folder (`data_folders.attach_folder`): found once under the data root, or `--data`,
   whose config is compared with the resolved values of the keys the user pinned (a mismatch is refused) and, under
   `--data`, becomes the run's; then `RunConfig.validate`.

Example:
    >>> r = RunRequest("single", "dlr", TaskSelector("shift", length=64), RunSettings(overrides={"train.steps": "5"}))
    >>> cfg = resolve_request(r)
    >>> cfg.task_config["L"], cfg.train.steps, cfg.preset
    (64, 5, 'quick')
    >>> resolve_request(RunRequest("single", "dlr", TaskSelector("shift"),
    ...                            RunSettings(overrides={"L": "64", "train.steps": "5"}))) == cfg
    True
    >>> resolve_run("dlr", "shift", length=64, overrides={"train.steps": 5}) == cfg
    True
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ConfigError, UnknownNameError
from .run_config import RunConfig
from .run_request import RunOptions, RunRequest, RunSettings, TaskSelector


def resolve_run(model: str, task: str, preset: str = "quick", *, length: int | None = None, size: int | None = None,
                config_file: str | Path | None = None, overrides: Mapping[str, Any] | None = None, seed: int = 0,
                allow_noncausal: bool = False, data: str | Path | None = None) -> RunConfig:
    """The validated config of a run from Python arguments: the task's config (selector, then the user's task keys)
    -> training preset -> `--config FILE` -> `-o` overrides; `${T}` in a preset becomes the task's input length.

    Folder tasks (`policy.training_data == "folder"`) also settle their dataset folder (`data`, else `data.path`,
    else a matching folder under the data root) and take the folder's task config (`data_folders`): the config
    `resolve_request` resolves from a request of these arguments.
    """
    settings = RunSettings(preset=preset, config_file=config_file, overrides=dict(overrides or {}), seed=seed,
                           allow_noncausal=allow_noncausal)
    return resolve_request(RunRequest(mode="single", model=model, selector=TaskSelector(task, length, size),
                                      settings=settings, options=RunOptions(data=data)))


def resolve_request(request: RunRequest) -> RunConfig:
    """The validated config of the single run `request` asks for (`ssmbench eval` builds it from its options; see
    the module's docstring for the order); a request carrying a resolved `config` takes only its hardware
    options."""
    if request.config is not None:
        return _settled(request.config.with_overrides(request.options.hardware_keys())).validate()
    from ...registry import get_task
    from ...task_config import ResolvedTask, to_plain
    from ...task_config import resolve as resolve_task
    from .data_folders import attach_folder, folder_size
    from .presets import resolve_preset

    s, model, sel, name = request.settings, request.model or "dlr", request.selector, request.selector.task
    if name is None:
        raise ConfigError("--task", "a run needs a task")
    flags = {k: v for k, v in (("L", sel.length), ("size", sel.size)) if v is not None}  # --length / --size
    try:
        t = get_task(name)  # unknown task: did-you-mean (tasks and groups), before anything else
    except UnknownNameError:
        from .task_groups import unknown_task

        raise unknown_task(name) from None
    user: dict[str, Any] = s.config_keys  # --config FILE, read once where the settings were made
    user.update(s.overrides)
    user.update(request.options.hardware_keys())
    data = request.options.data if request.options.data is not None else user.get("data.path")
    folder_task = t.policy.reads_folder
    if data is not None and not folder_task:
        raise ConfigError("--data", f"{name} draws fresh samples every step and takes no dataset folder",
                          "--data applies to tasks that train from a dataset folder (ListOps, Pathfinder)")
    explicit = _task_keys(user)
    if data is not None and not flags and "size" not in explicit and t.preset_option == "size":
        side = folder_size(data)  # the folder's size picks the paper preset's family
        flags = {"size": side} if side is not None else {}
    asked, _ = resolve_task(t, explicit, length=flags.get("L"), size=flags.get("size"))
    plain = to_plain(asked)
    p = resolve_preset(s.preset, t, model, asked, length=flags.get("L"), size=flags.get("size"))
    keys = _for_model(model, {**t.policy.model_keys, **p.keys})  # the task's own model keys, beneath the preset
    keys.update(user)
    task_keys = {**_task_keys(keys), **flags}
    dataset_preset = p.dataset.get("preset") if t.preset_option == "preset" else None
    task_config = asked
    if task_keys != {**explicit, **flags} or dataset_preset is not None:  # the preset changes the task config
        task_config = resolve_task(t, task_keys, **({"preset": dataset_preset} if dataset_preset else {}))[0]
        plain = to_plain(task_config)
    resolved = ResolvedTask(t, task_config, t.spec(task_config), plain)  # the one Spec of the run
    cfg = RunConfig(task=t.name, task_config=plain, model=model, seed=s.seed, preset=p.name,
                    allow_noncausal=s.allow_noncausal, resolved=resolved)
    T = resolved.spec.seq_len
    cfg = cfg.with_overrides({k: (T if v == "${T}" else v) for k, v in keys.items() if not _is_task_key(k)})
    if folder_task:
        pinned = {k: cfg.task_config[k] for k in {**explicit, **flags}}  # as resolved: compared, not re-resolved
        cfg = attach_folder(cfg, data, pinned, p.dataset.get("n"))
    return cfg.validate()


def resolve_saved(saved: Mapping[str, Any] | RunConfig, overrides: Mapping[str, Any] | None = None) -> RunConfig:
    """The validated config of a saved run (its config.json, a checkpoint's config) with `overrides`: the path of
    `--resume`, `--checkpoint` and `--lengths` (each refuses the keys it does not take before calling this); the
    task is settled once here, at the config the overrides leave.

    Example:
        >>> saved = resolve_run("dlr", "shift", length=64).to_json()
        >>> resolve_saved(saved, {"L": 128}).resolved_task.spec.seq_len
        128
    """
    config = saved if isinstance(saved, RunConfig) else RunConfig.from_json(saved)
    return _settled(config.with_overrides(dict(overrides or {}))).validate()


def _settled(config: RunConfig) -> RunConfig:
    """`config` carrying its resolved task (made here when it does not carry one yet)."""
    config.resolved_task  # noqa: B018  (made once, kept on the config)
    return config


def _is_task_key(key: str) -> bool:
    return key.startswith("task.") or "." not in key


def _task_keys(keys: Mapping[str, Any]) -> dict[str, Any]:
    return {k.removeprefix("task."): v for k, v in keys.items() if _is_task_key(k)}


def _for_model(model: str, keys: Mapping[str, Any]) -> dict[str, Any]:
    """A preset's keys minus the `model.*` keys a user's factory does not take (it builds its own backbone)."""
    from .model_lookup import is_mixer
    from .model_lookup import resolve as resolve_model

    obj, _ = resolve_model(model)
    if is_mixer(obj):
        return dict(keys)
    accepted = set(list(inspect.signature(obj).parameters)[1:])
    return {k: v for k, v in keys.items() if not k.startswith("model.") or k.removeprefix("model.") in accepted}
