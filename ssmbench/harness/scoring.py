"""Score a trained checkpoint on one split, without training: `ssmbench eval --checkpoint RUN/checkpoints/best.pt`.

The checkpoint carries its run's config, so the model and the evaluation set are rebuilt exactly. Only settings that
cannot change the model may be overridden (`SCORING_KEYS`); another task is refused, while `--length` / `--size`
(or `-o L=...` / `-o size=...`) score the trained model at another length or image side, resolved exactly as
`ssmbench generate` resolves it. The scores go to a run folder of their own (`--out`, or
runs/<task>-<model>-score-<time>) with config.json and metrics.json, like a training run. This is the `score_only`
evaluator (`evaluators/score_only.py`), which without a checkpoint scores the freshly initialised model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..plain import file_sha256
from .config.run_config import RunConfig
from .results.eval_result import EvalResult
from .results.run_folder import RunFolder, default_run_dir, load_checkpoint

SCORING_KEYS = ("eval.batch_size", "eval.val_samples", "eval.test_samples", "eval.log_samples", "hardware.device",
                "hardware.precision", "hardware.threads", "data.workers", "L", "task.L", "size", "task.size")
"""What may change when scoring any checkpoint: nothing that changes the model; `L` / `size` score it at another
length or image side (a length-generalisation test: the config is resolved as `ssmbench generate` would). A task adds
the config keys of its own that it lets a checkpoint be scored at (`scoring_keys_for`)."""


def scoring_keys_for(task: Any) -> tuple[str, ...]:
    """`SCORING_KEYS` and the task's own `policy.scoring_keys`, each bare and as `task.KEY`.

    >>> from ssmbench.registry import get_task
    >>> [k for k in scoring_keys_for(get_task("flipflop")) if "p_ignore" in k]
    ['p_ignore', 'task.p_ignore']
    >>> "p_ignore" in scoring_keys_for(get_task("parity_check"))
    False
    """
    own = tuple(task.policy.scoring_keys)
    return SCORING_KEYS + tuple(k for key in own for k in (key, f"task.{key}") if k not in SCORING_KEYS)


def score_checkpoint(checkpoint: str | Path, split: str = "test", *, task: str | None = None,
                     length: int | None = None, size: int | None = None, out: str | Path | None = None,
                     runs_root: str | Path = "runs", device: str | None = None,
                     overrides: Mapping[str, Any] | None = None, quiet: bool = False,
                     data: str | Path | None = None, model: str | None = None,
                     loaded: Mapping[str, Any] | None = None) -> EvalResult:
    """Exact and per-batch metrics of a checkpoint on `split`, written to a run folder of their own.

    `data`: score on this dataset folder instead of the run's own (ListOps / Pathfinder; a moved folder, or the
    other Pathfinder label rule): it must hold the checkpoint's task with the same configuration otherwise.
    The config goes through the resolver's `resolve_saved`, as a resumed run's does. `loaded`: the checkpoint
    already read from `checkpoint` (a length sweep reads it once for all its lengths).
    """
    from .config.resolver import resolve_saved

    ckpt = load_checkpoint(checkpoint) if loaded is None else loaded
    if not isinstance(ckpt, dict) or "config" not in ckpt or "model" not in ckpt:
        raise ConfigError("--checkpoint", f"{checkpoint} is not an ssmbench training checkpoint")
    cfg = RunConfig.from_json(ckpt["config"])
    if model is not None and model != cfg.model:
        raise ConfigError("--model", f"the checkpoint holds a {cfg.model!r} model, not {model!r}",
                          "drop --model (the checkpoint's model is scored) or pick another checkpoint")
    if task is not None and task != cfg.task:
        raise ConfigError("--task", f"the checkpoint was trained on {cfg.task}, not {task}",
                          "drop --task (the checkpoint's task is used) or pick another checkpoint")
    overrides = {**(overrides or {}), **{k: v for k, v in (("L", length), ("size", size)) if v is not None}}
    from ..registry import get_task

    allowed = scoring_keys_for(get_task(cfg.task))  # the task's own policy; its Spec is made once, below
    bad = [k for k in (overrides or {}) if k not in allowed]
    if bad:
        raise ConfigError(bad[0], f"cannot change when scoring a {cfg.task} checkpoint (it would no longer be that "
                          "model, or the task does not declare it among its scoring keys)",
                          f"allowed: {', '.join(allowed)}")
    trained = cfg.task_config.get("L")
    cfg = resolve_saved(cfg, {**(overrides or {}), **({"hardware.device": device} if device else {})})
    if data is not None:
        cfg = _on_folder(cfg, data)
    info = {"scored_checkpoint": str(checkpoint), "checkpoint_sha256": file_sha256(checkpoint),
            "checkpoint_step": ckpt.get("state", {}).get("step")}
    try:
        return score(cfg, ckpt["model"], split, out=out, runs_root=runs_root, info=info)
    except CheckpointMismatch:
        if cfg.task_config.get("L") == trained:
            raise
        raise ConfigError("--length", f"{cfg.model}'s parameters depend on the sequence length: built for "
                          f"L = {cfg.task_config.get('L')} they do not fit its checkpoint, trained at L = {trained}",
                          f"score it at L = {trained}; it cannot be scored at other lengths") from None


class CheckpointMismatch(ConfigError):
    """The weights given do not fit the model the config builds (names or shapes differ); `score_checkpoint` turns
    it into a `--length` error when only the scored length differs from the trained one."""


def score(cfg: RunConfig, weights: Mapping[str, Any] | None, split: str = "test", *, out: str | Path | None = None,
          runs_root: str | Path = "runs", info: Mapping[str, Any] | None = None) -> EvalResult:
    """The `score_only` protocol: exact and per-batch metrics of the model of `cfg` with `weights` (None: as
    initialised from the training seed, the untrained baseline) on one split, in a run folder of its own."""
    from .feed.folder_feed import eval_set_for
    from .runtime import distributed as D
    from .runtime.threads import apply_threads
    from .training.facts import model_facts
    from .training.trainer import StopFlag, TrainingInterrupted, evaluate_split, save_predictions, setup

    threads = apply_threads(cfg.hardware.threads, cfg.data.workers)
    start = time.time()
    s = setup(cfg)
    if weights is not None:
        try:
            s.bare.load_state_dict(weights)
        except RuntimeError as exc:
            raise CheckpointMismatch("--checkpoint", f"the checkpoint does not fit the model its config describes "
                                     f"({str(exc).splitlines()[0]})") from None
    n = cfg.eval.test_samples if split == "test" else cfg.eval.val_samples
    facts = model_facts(s)
    kept: list[Any] | None = [] if cfg.eval.log_samples else None
    with StopFlag() as stop:
        scores = evaluate_split(s, eval_set_for(cfg, split, s.env.rank, s.env.world_size, n), kept)
        if D.any_rank(stop.signum is not None, s.env.device):
            raise TrainingInterrupted("interrupted while scoring; nothing was written",
                                      "run the same command again (scoring starts over)")
    path = Path(out) if out else D.broadcast_object(default_run_dir(runs_root, cfg.task, f"{cfg.model}-score"))
    run = RunFolder(path)
    metrics = {split: scores, **(info or {"scored_checkpoint": None}), **facts, **threads,
               "wall_time_s": time.time() - start}
    if s.env.is_main:
        run.create()
        run.write_config(cfg.to_json())
    D.barrier()
    if kept is not None:
        save_predictions(run, kept, s.env, split)
    if s.env.is_main:
        run.write_metrics(metrics)
    D.barrier()
    return EvalResult(run.path, cfg, metrics)


def _on_folder(cfg: RunConfig, data: str | Path) -> RunConfig:
    from .config.data_folders import attach_folder

    task = cfg.resolved_task.task
    if not task.policy.reads_folder:
        raise ConfigError("--data", f"{cfg.task} draws fresh samples and takes no dataset folder",
                          "--data applies to tasks that train from a dataset folder (ListOps, Pathfinder)")
    exempt = set(task.stream_exempt)  # e.g. Pathfinder's label rule: the same images, other masks
    return attach_folder(cfg, data, {k: v for k, v in cfg.task_config.items() if k not in exempt})
