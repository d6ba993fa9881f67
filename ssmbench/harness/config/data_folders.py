"""Which dataset folder a folder-backed run trains on: `--data PATH`, or a matching folder under the data root.

Tasks whose `policy.training_data` is "folder" (ListOps-Subtrees, ListOps, Pathfinder) train on a finite dataset
made once by `ssmbench generate` (their samples are de-duplicated or costly to draw), not on a fresh stream.
`attach_folder` settles the folder when a run config is resolved and records it in the config (`data.path`,
`data.dataset_id`), with the folder's own task config:

* `--data PATH` (`data.path`): the folder must hold this task at the installed task version and agree with every
  task key the user asked for explicitly (`--size`, `-o key=value`); its config then becomes the run's.
* no `--data`: the first folder directly under the data root (`$SSMBENCH_DATA` or ./data) whose task, version and
  whole config equal the resolved ones (the largest training split wins); none -> a one-line `DatasetError` (exit 2)
  that names the `ssmbench generate ...` command that would make it.

Example:
    >>> generate_command("pathfinder", {"size": 128}, n=2000, root="data")
    'ssmbench generate pathfinder --size 128 --n 2000 --out data'
    >>> generate_command("listops_subtrees", {"min_length": 1500, "max_length": 2000, "max_args": 10,
    ...                                       "max_depth": 10}, n=1000, root="data")
    'ssmbench generate listops_subtrees --preset short --n 1000 --out data'
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ConfigError, DatasetError

log = logging.getLogger(__name__)

def _full_config(task: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The task's full config (JSON primitives) for some of its values, resolved as `ssmbench generate` does."""
    from ...task_config import resolve, to_plain

    return to_plain(resolve(task, values)[0])


def check_metric_batches(metric_batch_size: int, counts: Mapping[str, tuple[int, str]]) -> None:
    """Refuse (ConfigError) a split scored on fewer samples than `eval.metric_batch_size`: the per-batch metrics
    (`*_batchavg`) average complete virtual batches only, so with none every one of them would read nan.

    `counts`: split -> (samples scored, where that number comes from, for the message); 0 samples: not scored.

    >>> check_metric_batches(16, {"val": (16, ""), "test": (0, "")})  # enough; an unscored split is fine
    >>> check_metric_batches(16, {"val": (8, "eval.val_samples = 8")})
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: eval.metric_batch_size: 16 is more than the 8 val samples scored (eval.val_samples = 8): no complete virtual batch, so every per-batch metric (*_batchavg) would read nan
    """
    for split, (n, source) in counts.items():
        if 0 < n < metric_batch_size:
            more = f"-o eval.{split}_samples={metric_batch_size} (or more)" if source.startswith("eval.") else \
                f"use a folder with at least {metric_batch_size} {split} samples"
            raise ConfigError("eval.metric_batch_size", f"{metric_batch_size} is more than the {n} {split} samples "
                              f"scored ({source}): no complete virtual batch, so every per-batch metric (*_batchavg) "
                              "would read nan", f"pass -o eval.metric_batch_size={n} (or less), or {more}")


def folder_size(path: str | Path) -> int | None:
    """The `size` of a folder's config (None when unreadable): lets `--data` pick the paper preset's family."""
    try:
        return int(json.loads((Path(path) / "manifest.json").read_text())["config"]["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def generate_command(task: str, config: Mapping[str, Any], n: int | None = None, root: str | Path = "data") -> str:
    """The `ssmbench generate` command line that builds a folder of `task` with this (partial or full) config."""
    from ...registry import get_task

    t = get_task(task)
    full = _full_config(task, config)
    parts = ["ssmbench", "generate", task]
    if t.preset_option == "size":
        from ...task_config import resolve_config

        parts += ["--size", str(full["size"])]
        base = _full_config(task, resolve_config(task, size=int(full["size"]))[1].to_dict())
    else:
        name = next((k for k, v in t.presets.items() if _full_config(task, v.to_dict()) == full), t.default_preset)
        if name != t.default_preset:
            parts += ["--preset", name]
        base = _full_config(task, t.presets[name].to_dict())
    for key, value in full.items():
        if base.get(key) != value:
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            parts += ["-o", f"{key}={text}"]
    if n:
        parts += ["--n", str(n)]
    return " ".join([*parts, "--out", str(root)])


def find_folder(task: str, config: Mapping[str, Any], root: Path) -> Path | None:
    """The folder under `root` for (task, installed version, config), the one with most training samples."""
    from ...registry import get_task

    version = str(get_task(task).version)
    found: list[tuple[int, str, Path]] = []
    for manifest_path in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        try:
            m = json.loads(manifest_path.read_text())
            if m.get("task") != task or str(m.get("task_version")) != version:
                continue
            if m["config"] != dict(config) and _full_config(task, m["config"]) != dict(config):
                continue  # (a manifest holds its full config: equal as stored, it needs no resolving)
            found.append((-int(m["splits"]["train"]["num_samples"]), manifest_path.parent.name,
                          manifest_path.parent))
        except (OSError, ValueError, KeyError, TypeError, ConfigError):
            continue  # not a complete ssmbench folder of this task: not a candidate
    return min(found)[2] if found else None


def attach_folder(cfg: Any, data: str | Path | None, explicit: Mapping[str, Any], n_hint: int | None = None) -> Any:
    """`cfg` (a RunConfig of a folder-backed task) with its folder settled: data.path, data.dataset_id and the
    folder's task config. `explicit`: the task keys the user asked for, at their resolved values (a folder holding
    other values is refused)."""
    from ...data.folder.checks import check_folder
    from ...data.folder.locations import data_root
    from ...data.folder.manifest import load_manifest

    task = cfg.task
    data = data if data is not None else cfg.data.path
    if data is None:
        root = data_root()
        path = find_folder(task, cfg.task_config, root)
        if path is None:
            raise DatasetError(f"no {task} dataset folder with this configuration under {root}/ (task version "
                               f"{_version(task)})", f"make one with `{generate_command(task, cfg.task_config, n_hint, root)}`"
                               ", or pass --data PATH")
        log.warning("using the dataset folder %s (found under %s/; pass --data to choose another)", path, root)
    else:
        path = Path(data)
        if not (path / "manifest.json").is_file():
            raise DatasetError(f"--data {path}: no dataset folder there (no manifest.json)",
                               f"make one with `{generate_command(task, cfg.task_config, n_hint, path.parent)}`")
    manifest = load_manifest(path)
    check_folder(path, manifest, ("train", "val", "test"), expect_task=task)
    # a folder found by its config holds the resolved one; a folder given is read (once) and compared
    folder_config = dict(cfg.task_config) if data is None else _full_config(task, manifest.config)
    for key, want in explicit.items():
        if folder_config.get(key) != want:
            raise DatasetError(f"--data {path} holds {task} with {key} = {folder_config.get(key)!r}, not {want!r}",
                               f"pass a folder built with {key} = {want!r} "
                               f"(`{generate_command(task, dict(explicit), n_hint)}`), or drop the "
                               "option to train on this folder's data")
    if cfg.preset.startswith("dlr_paper/"):
        _warn_if_not_comparable(cfg, path, folder_config)
    held = {s: int(manifest.splits[s].num_samples or 0) for s in ("val", "test")}
    asked = {"val": cfg.eval.val_samples, "test": cfg.eval.test_samples}
    check_metric_batches(cfg.eval.metric_batch_size, {s: (min(asked[s], held[s]), f"all {held[s]} of {path}")
                                                      for s in held if asked[s] > held[s]})
    data_section = dataclasses.replace(cfg.data, path=str(path.resolve()), dataset_id=manifest.dataset_id)
    same = folder_config == dict(cfg.task_config)  # else the folder's config is the run's: its task made anew
    return dataclasses.replace(cfg, task_config=folder_config, data=data_section,
                               resolved=cfg.resolved if same else None)


def _warn_if_not_comparable(cfg: Any, path: Path, folder_config: Mapping[str, Any]) -> None:
    """One line when a paper-preset run trains on data other than the paper's (`policy.paper_data`: ListOps-Subtrees
    other than the `dlr` preset, Pathfinder masks other than the reference's, Table 3's)."""
    from ...registry import get_task
    from ...task_config import from_plain, to_plain

    task = get_task(cfg.task)
    paper = to_plain(task.policy.paper_config(from_plain(task, folder_config)))
    if dict(folder_config) != paper:
        differ = ", ".join(k for k in paper if folder_config.get(k) != paper[k])
        log.warning("%s is not the paper's %s data (it differs in %s): its scores are not comparable with the "
                    "paper's tables; for comparable data: `%s`", path, cfg.task, differ,
                    generate_command(cfg.task, paper, root=path.parent))


def _version(task: str) -> str:
    from ...registry import get_task

    return str(get_task(task).version)
