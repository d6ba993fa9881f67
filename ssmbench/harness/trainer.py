"""The training loop: one readable function over a resolved `RunConfig` and a run folder.

    build model -> AdamW with parameter groups -> for each step: a batch (from background workers: a fresh one of
    the task's stream, or the next of a dataset folder's epoch, see `folder_feed`), forward, the task's loss
    (objectives.py), backward, step, schedule -> every `eval_every` steps: validation metrics, best.pt on a better
    monitor, last.pt -> at the end: best weights, val and test metrics, the task's figures, metrics.json, learning
    curves.

Under torchrun each rank trains on its slice of the global batch (DDP averages the gradients, so the update equals
the single-process one), evaluates its contiguous slice of val / test, and the metric states are summed across
ranks before any formula. Rank 0 writes the run folder. SIGINT / SIGTERM end the current step, save `last.pt`
and raise `TrainingInterrupted`; a non-finite loss stops the run with the last good checkpoint kept.
"""

from __future__ import annotations

import logging
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import SsmbenchError
from . import distributed as D
from .folder_feed import breakdowns_for, eval_set_for, feed_for
from .objectives import Objective, lr_factor, objective_for
from .precision import autocast_context, check_precision, grad_scaler, keep_mixers_float32
from .run_config import RunConfig, task_config_object
from .run_folder import RunFolder, load_checkpoint, save_checkpoint

log = logging.getLogger(__name__)


class TrainingInterrupted(SsmbenchError):
    exit_code = 130


class NonFiniteLoss(SsmbenchError):
    exit_code = 1


@dataclass
class TrainState:
    step: int = 0
    best_value: float | None = None
    best_step: int | None = None
    train_time: float = 0.0
    data_wait: float = 0.0
    timed_steps: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Setup:
    """Everything built from a RunConfig before the first step."""

    cfg: RunConfig
    env: D.DistEnv
    spec: Any
    model: torch.nn.Module
    objective: Objective

    @property
    def bare(self) -> torch.nn.Module:
        return getattr(self.model, "module", self.model)


def setup(cfg: RunConfig, env: D.DistEnv | None = None) -> Setup:
    """Seed, build the model on its device, pick the objective (shared by training and checkpoint scoring)."""
    from ..registry import get_task
    from .models import build_model

    env = env or D.init_distributed(cfg.hardware.device)
    check_precision(cfg.hardware.precision, env.device)
    torch.manual_seed(cfg.seed)
    task = get_task(cfg.task)
    spec = task.spec(task_config_object(cfg.task, cfg.task_config))
    model = build_model(cfg.model, spec, dict(cfg.model_overrides), allow_noncausal=cfg.allow_noncausal)
    model.to(env.device)
    if cfg.hardware.precision != "fp32":
        keep_mixers_float32(model)
    objective = objective_for(spec, cfg.eval.metric_batch_size, cfg.eval.monitor, cfg.eval.monitor_variant,
                              breakdowns_for(cfg.task, cfg.task_config))
    return Setup(cfg, env, spec, model, objective)


def evaluate_split(s: Setup, data: Any) -> dict[str, Any]:
    """Exact and per-batch metrics of the model on one split (an EvalSet or FolderEvalSet), summed across ranks."""
    from .metrics import all_reduce_metrics

    model = s.bare
    was_training = model.training
    model.eval()
    state = s.objective.new_metrics(data.num_samples)
    with torch.no_grad(), autocast_context(s.cfg.hardware.precision, s.env.device):
        for x, y, idx, *extra in data.batches(s.cfg.eval.batch_size):  # extra: Figure-2 fields of folder tasks
            pred = model(x.to(s.env.device, non_blocking=True))
            kw = {"extra": {k: v.to(s.env.device) for k, v in extra[0].items()}} if extra and extra[0] else {}
            state.update(pred.float(), y.to(s.env.device), idx.to(s.env.device), **kw)
    all_reduce_metrics(state)
    model.train(was_training)
    return state.compute()


def _optimizer(s: Setup) -> torch.optim.Optimizer:
    from .optim_groups import param_groups

    t = s.cfg.train
    groups = param_groups(s.bare, lr=t.lr, weight_decay=t.weight_decay, lr_ssm=t.lr_ssm)
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), eps=t.eps, weight_decay=t.weight_decay)


class _StopFlag:
    """SIGINT / SIGTERM set a flag checked between steps; a second SIGINT interrupts at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. a notebook worker): no preemption support
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def train(cfg: RunConfig, run: RunFolder, *, resume: bool = False, quiet: bool = False,
          logger: Any = None) -> dict[str, Any]:
    """Train, select on val, score test once at the best checkpoint; returns the final metrics (all ranks)."""
    s = setup(cfg)
    env, t = s.env, cfg.train
    optimizer = _optimizer(s)
    factor = lr_factor(t.schedule, t.warmup_steps, t.schedule_steps or t.steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    scaler = grad_scaler(cfg.hardware.precision, env.device)
    state = TrainState()
    if resume:
        ckpt = load_checkpoint(run.last)
        s.bare.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        state = TrainState(**ckpt["state"])
        torch.set_rng_state(ckpt["rng"]["torch"])
        if env.device.type == "cuda" and ckpt["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state(ckpt["rng"]["cuda"], env.device)
        if env.is_main:
            run.truncate_log(state.step)
    model = s.model
    if env.distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[env.device.index] if env.device.type == "cuda" else None)
    if cfg.hardware.compile:
        model = torch.compile(model)
    s.model = model
    val = eval_set_for(cfg, "val", env.rank, env.world_size)

    def checkpoint(path: Any) -> None:
        if env.is_main:
            save_checkpoint(path, {
                "model": s.bare.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "state": state.to_json(), "config": cfg.to_json(),
                "rng": {"torch": torch.get_rng_state(),
                        "cuda": torch.cuda.get_rng_state(env.device) if env.device.type == "cuda" else None}})
        D.barrier()

    if env.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(env.device)
    feed = feed_for(cfg, state.step, env, pin_memory=env.device.type == "cuda")
    bar = _progress(state.step, t.steps, quiet or not env.is_main, cfg)
    every_ckpt = t.checkpoint_every or t.eval_every
    loss_sum = torch.zeros((), dtype=torch.float64, device=env.device)
    loss_count = 0
    model.train()
    first_step = state.step
    with _StopFlag() as stop:
        tick = time.perf_counter()
        for step, batch in feed:
            got = time.perf_counter()
            x = batch["inputs"].to(env.device, non_blocking=True)
            y = batch["targets"].to(env.device, non_blocking=True)
            with autocast_context(cfg.hardware.precision, env.device):
                loss = s.objective.loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            if t.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            loss_sum += loss.detach().double()
            loss_count += 1
            state.step = step + 1
            done = state.step == t.steps
            if state.step % t.log_every == 0 or done or state.step % t.eval_every == 0:
                mean = float(D.sum_across_ranks(loss_sum.clone()).item()) / (loss_count * env.world_size)
                if not math.isfinite(mean):
                    raise NonFiniteLoss(f"the training loss became {mean} between steps {state.step - loss_count} "
                                        f"and {state.step}; stopped, the last good checkpoint is {run.last}",
                                        "lower train.lr or use --precision fp32")
                record = {"step": state.step, "split": "train", "loss": mean, "lr": scheduler.get_last_lr()[0],
                          "elapsed": state.train_time}
                state.history.append(record)
                if env.is_main:
                    run.log(record)
                    _log_external(logger, record)
                bar.set_postfix(loss=f"{mean:.4g}")
                loss_sum.zero_()
                loss_count = 0
            if env.device.type == "cuda" and (state.step % 50 == 0 or done):
                torch.cuda.synchronize(env.device)
            now = time.perf_counter()
            if step > first_step:  # the first step of a process pays for worker start-up and allocator warm-up
                state.data_wait += got - tick
                state.train_time += now - tick
                state.timed_steps += 1
            bar.update(1)
            if state.step % t.eval_every == 0 or done:
                metrics = evaluate_split(s, val)
                value = metrics[s.objective.monitor]
                record = {"step": state.step, "split": "val", **_scalars(metrics), "elapsed": state.train_time}
                improved = s.objective.better(value, state.best_value)
                if improved:
                    state.best_value, state.best_step = value, state.step
                record["best"] = improved
                state.history.append(record)
                if env.is_main:
                    run.log(record)
                    _log_external(logger, record)
                    bar.write(_describe(record, s.objective), file=sys.stderr) if not quiet else None
                if improved:
                    checkpoint(run.best)
            if state.step % every_ckpt == 0 or done:
                checkpoint(run.last)
            if D.any_rank(stop.signum is not None, env.device):
                checkpoint(run.last)
                bar.close()
                raise TrainingInterrupted(f"interrupted at step {state.step}/{t.steps}; the run is saved in "
                                          f"{run.path}", f"continue with `ssmbench eval --resume {run.path}`")
            tick = time.perf_counter()
    bar.close()
    return finish(s, run, state, val)


def finish(s: Setup, run: RunFolder, state: TrainState, val: Any) -> dict[str, Any]:
    """Load the best weights, score val and test, draw the task's figures, and assemble metrics.json (written by
    the caller)."""
    from .task_figures import task_figures

    cfg, env = s.cfg, s.env
    if run.best.exists():
        s.bare.load_state_dict(load_checkpoint(run.best)["model"])
    test = eval_set_for(cfg, "test", env.rank, env.world_size)
    scores = {"val": evaluate_split(s, val), "test": evaluate_split(s, test)}
    figures = task_figures(s, run, scores["val"], val) if env.is_main else {}
    return {**scores, **figures, "best_step": state.best_step,
            "monitor": {"key": s.objective.monitor, "mode": s.objective.mode, "value": state.best_value},
            "steps": state.step, "train_time_s": state.train_time,
            "time_per_step_s": state.train_time / max(1, state.timed_steps),
            "data_wait_share": state.data_wait / max(1e-12, state.train_time),
            "peak_memory_bytes": _peak_memory(env.device)}


def _peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def _scalars(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, int | float)}


def _describe(record: dict[str, Any], objective: Objective) -> str:
    parts = [f"{k} {record[k]:.4f}" for k in objective.headline if k in record]
    return f"step {record['step']}: val " + ", ".join(parts) + (" (best)" if record.get("best") else "")


def _progress(start: int, total: int, disable: bool, cfg: RunConfig) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, disable=disable, desc=f"{cfg.task}/{cfg.model}", unit="step",
                dynamic_ncols=True, leave=False)


def _log_external(logger: Any, record: dict[str, Any]) -> None:
    if logger is not None:
        logger.log(record)
