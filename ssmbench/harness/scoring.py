"""Score a trained checkpoint on one split, without training: `ssmbench eval --checkpoint RUN/checkpoints/best.pt`.

The checkpoint carries its run's config, so the model and the evaluation set are rebuilt exactly. Only settings that
cannot change the scores may be overridden (`eval.batch_size`, `hardware.*`, `data.workers`); asking for another
task, length or size is refused with the checkpoint's own values. The scores go to a run folder of their own
(`--out`, or runs/<task>-<model>-score-<time>) with config.json and metrics.json, like a training run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..plain import file_sha256
from .evaluation import EvalResult, model_facts
from .run_config import RunConfig
from .run_folder import RunFolder, default_run_dir, load_checkpoint

SCORING_KEYS = ("eval.batch_size", "hardware.device", "hardware.precision", "data.workers")


def score_checkpoint(checkpoint: str | Path, split: str = "test", *, task: str | None = None,
                     length: int | None = None, size: int | None = None, out: str | Path | None = None,
                     runs_root: str | Path = "runs", device: str | None = None,
                     overrides: Mapping[str, Any] | None = None, quiet: bool = False,
                     data: str | Path | None = None) -> EvalResult:
    """Exact and per-batch metrics of a checkpoint on `split`, written to a run folder of their own.

    `data`: score on this dataset folder instead of the run's own (ListOps / Pathfinder; a moved folder, or the
    other Pathfinder label rule): it must hold the checkpoint's task with the same configuration otherwise.
    """
    from . import distributed as D
    from .folder_feed import eval_set_for
    from .trainer import evaluate_split, setup

    ckpt = load_checkpoint(checkpoint)
    if not isinstance(ckpt, dict) or "config" not in ckpt or "model" not in ckpt:
        raise ConfigError("--checkpoint", f"{checkpoint} is not an ssmbench training checkpoint")
    cfg = RunConfig.from_json(ckpt["config"])
    _same(cfg, task, length, size)
    bad = [k for k in (overrides or {}) if k not in SCORING_KEYS]
    if bad:
        raise ConfigError(bad[0], "cannot change when scoring a checkpoint (it would no longer be that model)",
                          f"allowed: {', '.join(SCORING_KEYS)}")
    cfg = cfg.with_overrides({**(overrides or {}), **({"hardware.device": device} if device else {})})
    if data is not None:
        cfg = _on_folder(cfg, data)
    start = time.time()
    s = setup(cfg)
    try:
        s.bare.load_state_dict(ckpt["model"])
    except RuntimeError as exc:
        raise ConfigError("--checkpoint", f"{checkpoint} does not fit the model its config describes "
                          f"({str(exc).splitlines()[0]})") from None
    n = cfg.eval.test_samples if split == "test" else cfg.eval.val_samples
    data = eval_set_for(cfg, split, s.env.rank, s.env.world_size, n)
    scores = evaluate_split(s, data)
    path = Path(out) if out else D.broadcast_object(default_run_dir(runs_root, cfg.task, f"{cfg.model}-score"))
    run = RunFolder(path)
    metrics = {split: scores, "scored_checkpoint": str(checkpoint), "checkpoint_sha256": file_sha256(checkpoint),
               "checkpoint_step": ckpt.get("state", {}).get("step"), **model_facts(cfg, s.env),
               "wall_time_s": time.time() - start}
    if s.env.is_main:
        run.create()
        run.write_config(cfg.to_json())
        run.write_metrics(metrics)
    D.barrier()
    return EvalResult(run.path, cfg, metrics)


def _same(cfg: RunConfig, task: str | None, length: int | None, size: int | None) -> None:
    """Refuse a request for another task / length / size than the checkpoint was trained on."""
    asked = {"--task": (task, cfg.task), "--length": (length, cfg.task_config.get("L")),
             "--size": (size, cfg.task_config.get("size"))}
    for option, (want, have) in asked.items():
        if want is not None and want != have:
            raise ConfigError(option, f"the checkpoint was trained with {option} {have}, not {want}",
                              "drop the option (the checkpoint's config is used) or pick another checkpoint")


def _on_folder(cfg: RunConfig, data: str | Path) -> RunConfig:
    from ..registry import get_task
    from .data_folders import FOLDER_TASKS, attach_folder, is_folder_task

    if not is_folder_task(cfg.task):
        raise ConfigError("--data", f"{cfg.task} draws fresh samples and takes no dataset folder",
                          f"--data applies to {', '.join(FOLDER_TASKS)}")
    exempt = set(get_task(cfg.task).stream_exempt)  # e.g. Pathfinder's label rule: the same images, other masks
    return attach_folder(cfg, data, {k: v for k, v in cfg.task_config.items() if k not in exempt})


