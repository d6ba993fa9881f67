"""The training loop: one readable loop over named steps, for a resolved `RunConfig` and a run folder.

    setup (model built once, objective)  ->  start (optimiser, schedule, restore from last.pt, DDP / compile)
    -> for each step: train_step (forward, the task's loss, backward, update) -> log_train every `log_every`
       -> validate every `eval_every` (best.pt on a better monitor) -> checkpoint (last.pt)
    -> finish: best weights, val and test scores, the task's figures (metrics.json is written by the caller).

Batches come from background workers (`folder_feed.feed_for`): a fresh batch of the task's stream, or the next of a
dataset folder's epoch. Under torchrun each rank trains on its slice of the global batch (DDP averages the
gradients, so the update equals the single-process one), evaluates its contiguous slice of val / test, and the
metric states are summed across ranks before any formula. Rank 0 writes the run folder.

SIGINT / SIGTERM (also sent to the whole process group, as cluster schedulers do; the data workers ignore them)
end the current step or evaluation, save `last.pt` and raise `TrainingInterrupted` (exit 130); a non-finite loss
stops the run with the last good checkpoint kept. With a time limit (`--time-limit`, `time_limit.Deadline`), the
loop stops at the step boundary where the next step, the evaluation / checkpoint it is due to run (after the last
step: the final scoring) and a checkpoint would no longer fit, saves `last.pt` and raises `TimeLimitReached`
(exit 75); a limit already spent when training would start stops before the optimiser and the data are built.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ...errors import SsmbenchError
from ..config.run_config import RunConfig
from ..config.schedule import lr_factor
from ..feed.device_feed import train_feed
from ..feed.folder_feed import eval_set_for
from ..metrics.objectives import Objective, objective_for
from ..results.checkpoints import load_checkpoint, load_last, save_checkpoint
from ..results.run_folder import RunFolder
from ..runtime import distributed as D
from ..runtime import time_limit
from ..runtime.lengths import build_spec, output_rows
from ..runtime.precision import (
    autocast_context,
    check_precision,
    grad_scaler,
    keep_mixers_float32,
    step_and_schedule,
)

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
    startup_s: float = 0.0
    """Wall time of this process's first step: the data workers' start-up (every worker's first batch), allocator
    and kernel warm-up and the step itself. Not in `train_time`, so `time_per_step_s` is the steady pace."""
    history: list[dict[str, Any]] = field(default_factory=list)
    loss_sum: float = 0.0
    """The training loss summed over steps and ranks since the last loss line, and its steps: a run resumed between
    two lines (a time limit stops at any step) logs the same mean as an uninterrupted one."""
    loss_count: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Setup:
    """Everything built from a RunConfig before the first step: the model is built here, once per run."""

    cfg: RunConfig
    env: D.DistEnv
    spec: Any
    model: torch.nn.Module
    objective: Objective

    @property
    def bare(self) -> torch.nn.Module:
        """The model without its DDP / torch.compile wrappers (what checkpoints hold)."""
        model = getattr(self.model, "_orig_mod", self.model)
        return getattr(model, "module", model)


def setup(cfg: RunConfig, env: D.DistEnv | None = None) -> Setup:
    """Refuse a causal-only mixer on a bidirectional task, seed, build the model on its device, pick the objective
    (shared by training and checkpoint scoring)."""
    from ..models.build import build_model
    from .facts import check_direction

    rt = cfg.resolved_task  # the task, its config and Spec: settled by the resolver, not looked up again
    task, config, spec = rt.task, rt.config, rt.spec
    check_direction(cfg, spec)  # before the build: its message, not the builder's, names the fix
    env = env or D.init_distributed(cfg.hardware.device)
    check_precision(cfg.hardware.precision, env.device)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, build_spec(cfg, spec), dict(cfg.model_overrides),  # l_max: the longest length
                        allow_noncausal=cfg.allow_noncausal)
    model.to(env.device)
    if cfg.hardware.precision != "fp32":
        keep_mixers_float32(model)
    objective = objective_for(spec, cfg.eval.metric_batch_size, cfg.eval.monitor, cfg.eval.monitor_variant,
                              task.policy.breakdowns(config))
    return Setup(cfg, env, spec, model, objective)


def evaluate_split(s: Setup, data: Any, keep: list[tuple[Any, Any, Any]] | None = None) -> dict[str, Any]:
    """Exact and per-batch metrics of the model on one split (an EvalSet or FolderEvalSet), summed across ranks.
    `keep`, a list, receives this rank's (sample_index, prediction, target) per batch (`--log-samples`)."""
    from ..metrics.states import all_reduce_metrics

    model = s.bare
    was_training = model.training
    model.eval()
    state = s.objective.new_metrics(data.num_samples)
    with torch.no_grad(), autocast_context(s.cfg.hardware.precision, s.env.device):
        for x, y, idx, *extra in data.batches(s.cfg.eval.batch_size):  # extra: breakdown fields of folder tasks
            pred = model(x.to(s.env.device, non_blocking=True))
            kw = {"extra": {k: v.to(s.env.device) for k, v in extra[0].items()}} if extra and extra[0] else {}
            state.update(pred.float(), y.to(s.env.device), idx.to(s.env.device), **kw)
            if keep is not None:
                keep.append((idx, pred.argmax(-1) if s.spec.target_kind == "classify" else pred.float(), y))
    all_reduce_metrics(state)
    model.train(was_training)
    return state.compute()


class StopFlag:
    """SIGINT / SIGTERM set a flag checked between steps and after evaluations; a second SIGINT interrupts at
    once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopFlag:
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


@dataclass
class Loop:
    """What the loop's steps share and change."""

    s: Setup
    run: RunFolder
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any
    state: TrainState
    val: Any
    logger: Any
    bar: Any
    quiet: bool
    loss_sum: torch.Tensor
    loss_count: int = 0


def start(s: Setup, run: RunFolder, *, resume: bool, quiet: bool, logger: Any,
          ckpt: dict[str, Any] | None = None, packed: bool = False) -> Loop:
    """Optimiser (AdamW with the mixers' parameter groups), schedule, restore from last.pt (or `ckpt`, last.pt
    loaded already), DDP / compile. `packed`: a member of a pack (`packed_loop`), which steps all members at once
    and averages their gradients across ranks itself: no DDP or compile wrapper, no progress bar of its own."""
    from ..models.optim_groups import param_groups

    cfg, env, t = s.cfg, s.env, s.cfg.train
    groups = param_groups(s.bare, lr=t.lr, weight_decay=t.weight_decay, lr_ssm=t.lr_ssm)
    graphed = cfg.hardware.cuda_graph and not packed  # a pack's own optimiser is graph-ready
    optimizer = torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), eps=t.eps, weight_decay=t.weight_decay,
                                  **({"capturable": True, "foreach": True} if graphed else {}))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(t.schedule, t.warmup_steps,
                                                                       t.schedule_steps or t.steps))
    loop = Loop(s, run, optimizer, scheduler, grad_scaler(cfg.hardware.precision, env.device), TrainState(),
                None, logger, None, quiet, torch.zeros((), dtype=torch.float64, device=env.device))
    if resume:
        restore(loop, ckpt)
    _rates_as_tensors(optimizer, graphed, env.device)
    if env.distributed and not packed:
        s.model = torch.nn.parallel.DistributedDataParallel(
            s.model, device_ids=[env.device.index] if env.device.type == "cuda" else None)
    if cfg.hardware.compile and not packed:
        s.model = torch.compile(s.model)
    loop.val = eval_set_for(cfg, "val", env.rank, env.world_size)
    loop.bar = _progress(loop.state.step, t.steps, quiet or packed or not env.is_main, cfg)
    if env.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(env.device)
    return loop


def _rates_as_tensors(optimizer: torch.optim.Optimizer, tensors: bool, device: torch.device) -> None:
    """Each group's rate as a device tensor (`--cuda-graph`: the captured update reads it, the schedule fills it in
    place) or as a float (else; also when a graph run's checkpoint is resumed without graphs)."""
    for group in optimizer.param_groups:
        lr = group["lr"]
        if tensors and not isinstance(lr, torch.Tensor):
            group["lr"] = torch.tensor(float(lr), device=device)
        elif not tensors and isinstance(lr, torch.Tensor):
            group["lr"] = float(lr)


def restore(loop: Loop, ckpt: dict[str, Any] | None = None) -> None:
    """Model, optimiser, schedule, loop state and random state of `last.pt` (a resumed run equals an
    uninterrupted one); `ckpt`: last.pt as loaded already."""
    s, run = loop.s, loop.run
    if ckpt is None:
        ckpt = load_last(run.last)  # the previous last.pt when this one is damaged, with a line saying so
    s.bare.load_state_dict(ckpt["model"])
    loop.optimizer.load_state_dict(ckpt["optimizer"])
    loop.scheduler.load_state_dict(ckpt["scheduler"])
    loop.state = TrainState(**ckpt["state"])
    loop.loss_sum.fill_(loop.state.loss_sum / s.env.world_size)  # log_train sums over ranks again
    loop.loss_count = loop.state.loss_count
    torch.set_rng_state(ckpt["rng"]["torch"])
    if s.env.device.type == "cuda" and ckpt["rng"].get("cuda") is not None:
        torch.cuda.set_rng_state(ckpt["rng"]["cuda"], s.env.device)
    if s.env.is_main:
        run.truncate_log(loop.state.step, loop.state.history)


def train_step(loop: Loop, batch: dict[str, torch.Tensor]) -> None:
    """Forward, the task's loss, backward, (clip), update, schedule."""
    if loop.scaler is not None:
        update(loop, batch, scaled=True)
    else:
        update(loop, batch)
        loop.scheduler.step()
    loop.loss_count += 1


def update(loop: Loop, batch: dict[str, torch.Tensor], scaled: bool = False) -> None:
    """The step's device work: forward, loss, backward, (clip), the optimiser's update, the loss summed on the
    device; no host synchronisation and no schedule (`--cuda-graph` captures exactly this). `scaled`: through
    the fp16 loss scaler, which also advances the schedule (it may skip the update)."""
    s, opt, scaler = loop.s, loop.optimizer, loop.scaler
    x = batch["inputs"].to(s.env.device, non_blocking=True)   # (B_rank, T, ...)
    y = batch["targets"].to(s.env.device, non_blocking=True)  # (B_rank, l_output, ...)
    with autocast_context(s.cfg.hardware.precision, s.env.device), output_rows(s.bare, y.shape[1] if y.dim() > 1 else None):
        loss = s.objective.loss(s.model(x), y)  # output_rows: a step at another length has other target rows
    opt.zero_grad(set_to_none=True)
    if scaled:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    else:
        loss.backward()
    if s.cfg.train.grad_clip:
        torch.nn.utils.clip_grad_norm_(s.model.parameters(), s.cfg.train.grad_clip)
    if scaled:
        step_and_schedule(opt, scaler, loop.scheduler)
    else:
        opt.step()
    loop.loss_sum += loss.detach().double()


def step_function(loop: Loop) -> Any:
    """What the loop calls a step: `train_step`, or with `--cuda-graph` the captured `update` then the schedule."""
    if not loop.s.cfg.hardware.cuda_graph:
        return lambda batch: train_step(loop, batch)
    from .cuda_graph import GraphedStep

    graphed = GraphedStep(lambda batch: update(loop, batch), loop.s.env.device)

    def step(batch: dict[str, torch.Tensor]) -> None:
        graphed(batch)
        loop.scheduler.step()  # writes the next rate into the lr tensor the graph reads
        loop.loss_count += 1

    return step


def log_train(loop: Loop) -> None:
    """The mean training loss since the last line, across ranks; a non-finite one stops the run."""
    s, state = loop.s, loop.state
    mean = float(D.sum_across_ranks(loop.loss_sum.clone()).item()) / (loop.loss_count * s.env.world_size)
    if not math.isfinite(mean):
        raise NonFiniteLoss(f"the training loss became {mean} between steps {state.step - loop.loss_count} and "
                            f"{state.step}; stopped, the last good checkpoint is {loop.run.last}",
                            "lower train.lr or use --precision fp32")
    _record(loop, {"step": state.step, "split": "train", "loss": mean, "lr": loop.scheduler.get_last_lr()[0],
                   "elapsed": state.train_time})
    loop.bar.set_postfix(loss=f"{mean:.4g}")
    loop.loss_sum.zero_()
    loop.loss_count = 0


def validate(loop: Loop) -> None:
    """Validation metrics; best.pt only when the monitor improves."""
    s, state = loop.s, loop.state
    metrics = evaluate_split(s, loop.val)
    value = metrics[s.objective.monitor]
    improved = s.objective.better(value, state.best_value)
    if improved:
        state.best_value, state.best_step = value, state.step
    record = {"step": state.step, "split": "val", **_scalars(metrics), "elapsed": state.train_time, "best": improved}
    _record(loop, record)
    if s.env.is_main and not loop.quiet:
        loop.bar.write(_describe(record, s.objective), file=sys.stderr)
    if improved:
        checkpoint(loop, loop.run.best)


def checkpoint(loop: Loop, path: Any) -> None:
    """Everything a resumed run needs, written atomically by rank 0."""
    s = loop.s
    loop.state.loss_sum = float(D.sum_across_ranks(loop.loss_sum.clone()).item())  # every rank: a collective
    loop.state.loss_count = loop.loss_count
    if s.env.is_main:
        save_checkpoint(path, keep_previous=path == loop.run.last, state={
            "model": s.bare.state_dict(), "optimizer": loop.optimizer.state_dict(),
            "scheduler": loop.scheduler.state_dict(), "state": loop.state.to_json(), "config": s.cfg.to_json(),
            "rng": {"torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state(s.env.device) if s.env.device.type == "cuda" else None}})
    D.barrier()


def interrupted(loop: Loop) -> TrainingInterrupted:
    loop.bar.close()
    run, t = loop.run, loop.s.cfg.train
    return TrainingInterrupted(f"interrupted at step {loop.state.step}/{t.steps}; the run is saved in {run.path}",
                               f"continue with `ssmbench eval --resume {run.path}`")


def train(s: Setup, run: RunFolder, *, resume: bool = False, quiet: bool = False, logger: Any = None,
          last: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train, select on val, score test once at the best checkpoint; returns the final metrics (all ranks).
    `last`: with `resume`, the run's last.pt as its caller loaded it already (read once, not twice)."""
    with StopFlag() as stop:
        try:
            return _train(s, run, stop, resume=resume, quiet=quiet, logger=logger, last=last)
        except KeyboardInterrupt:  # a second Ctrl-C: at once, without saving this step
            raise TrainingInterrupted(f"interrupted at once (a second Ctrl-C); {run.last} holds the last saved step",
                                      f"continue with `ssmbench eval --resume {run.path}`") from None


def _train(s: Setup, run: RunFolder, stop: StopFlag, *, resume: bool, quiet: bool, logger: Any,
           last: dict[str, Any] | None = None) -> dict[str, Any]:
    """The loop itself (see the module docstring); `stop` is set by SIGINT / SIGTERM."""
    t, env = s.cfg.train, s.env
    deadline = time_limit.current(s.cfg)
    budget = time_limit.Budget(deadline, s.cfg, time_limit.state_bytes(s.bare)) if deadline else None
    ckpt = (last if last is not None else load_last(run.last)) if resume else None
    if budget is not None:  # a limit spent already (by the start-up): stop before the optimiser and the data
        step = int(ckpt["state"]["step"]) if ckpt is not None else 0  # (seconds), with nothing new to save
        if D.any_rank(not budget.fits(step), env.device):
            raise time_limit.reached(budget.deadline, run, step, t.steps, budget)
    loop = start(s, run, resume=resume, quiet=quiet, logger=logger, ckpt=ckpt)
    state = loop.state
    first_step = state.step
    if budget is not None and D.any_rank(not budget.fits(state.step), env.device):
        stop_at_time_limit(loop, budget, saved=resume)  # before the data workers start
    feed = train_feed(s.cfg, state.step, env)  # batches on the device, through pinned buffers on CUDA
    train_one = step_function(loop)
    tick = time.perf_counter()
    for step, batch in feed:
        train_one(batch)
        state.step = step + 1
        done = state.step == t.steps
        if state.step % t.log_every == 0 or state.step % t.eval_every == 0 or done:
            log_train(loop)
        if env.device.type == "cuda" and (state.step % 50 == 0 or done):
            torch.cuda.synchronize(env.device)
        if step > first_step:  # the first step of a process pays for worker start-up and allocator warm-up
            state.data_wait += feed.last_wait  # waiting for the workers only, not for the device
            state.train_time += time.perf_counter() - tick
            state.timed_steps += 1
        else:
            state.startup_s = time.perf_counter() - tick
        loop.bar.update(1)
        if state.step % t.eval_every == 0 or done:
            with _timed(budget, "eval"):
                validate(loop)
        saved = state.step % (t.checkpoint_every or t.eval_every) == 0 or done
        if saved:
            with _timed(budget, "save"):
                checkpoint(loop, run.last)
        if budget is not None:
            budget.boundary()
        reason = _stop_reason(loop, stop, budget)
        if reason == "signal":
            checkpoint(loop, run.last)
            raise interrupted(loop)
        if reason == "time":
            stop_at_time_limit(loop, budget, saved)
        tick = time.perf_counter()
    loop.bar.close()
    metrics = finish(loop)
    if D.any_rank(stop.signum is not None, env.device):  # during the final scoring: last.pt is the last step
        raise interrupted(loop)
    return metrics


def _stop_reason(loop: Loop, stop: StopFlag, budget: time_limit.Budget | None) -> str | None:
    """"signal" (SIGINT / SIGTERM on any rank), "time" (the next step does not fit before the time limit on some
    rank) or None; every rank gets the same answer (one collective under torchrun)."""
    signalled = stop.signum is not None
    late = budget is not None and not budget.fits(loop.state.step)
    if loop.s.env.distributed:
        flags = D.sum_across_ranks(torch.tensor([float(signalled), float(late)], device=loop.s.env.device))
        signalled, late = (bool(v > 0) for v in flags.tolist())
    return "signal" if signalled else "time" if late else None


def stop_at_time_limit(loop: Loop, budget: time_limit.Budget, saved: bool) -> None:
    """Save last.pt (unless this step's is already saved) and raise `TimeLimitReached` (exit 75)."""
    if not saved:
        with budget.timed("save"):
            checkpoint(loop, loop.run.last)
    loop.bar.close()
    raise time_limit.reached(budget.deadline, loop.run, loop.state.step, loop.s.cfg.train.steps, budget)


def _timed(budget: time_limit.Budget | None, what: str) -> Any:
    return budget.timed(what) if budget is not None else contextlib.nullcontext()


def finish(loop: Loop) -> dict[str, Any]:
    """Load the best weights, score val and test, draw the task's figures, and assemble the metrics."""
    from .task_figures import task_figures

    s, run, state = loop.s, loop.run, loop.state
    cfg, env = s.cfg, s.env
    if run.best.exists():
        s.bare.load_state_dict(load_checkpoint(run.best)["model"])
    test = eval_set_for(cfg, "test", env.rank, env.world_size)
    kept: list[Any] | None = [] if cfg.eval.log_samples else None
    scores = {"val": evaluate_split(s, loop.val), "test": evaluate_split(s, test, kept)}
    if kept is not None:
        save_predictions(run, kept, env)
    figures = task_figures(s, run, scores["val"], loop.val) if env.is_main else {}
    return {**scores, **figures, "best_step": state.best_step,
            "monitor": {"key": s.objective.monitor, "mode": s.objective.mode, "value": state.best_value},
            "steps": state.step, "train_time_s": state.train_time,
            "time_per_step_s": state.train_time / max(1, state.timed_steps), "startup_s": state.startup_s,
            "data_wait_share": state.data_wait / max(1e-12, state.train_time),
            "peak_memory_bytes": _peak_memory(env.device)}


def save_predictions(run: RunFolder, kept: list[tuple[Any, Any, Any]], env: D.DistEnv, split: str = "test") -> None:
    """RUN/predictions/<split>.npz (<split>.rank<r>.npz under torchrun: each rank its slice): `sample_index` (n,), the
    `predictions` (regression: (n, l_output, d_output) float32; classification: (n, positions) class ids) and the
    `targets`, in sample order."""
    import numpy as np

    from ...data.folder.atomic import atomic_write_bytes

    folder = run.path / "predictions"
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"sample_index": torch.cat([k[0] for k in kept]).cpu().numpy() if kept else np.zeros(0, np.int64),
              "predictions": torch.cat([k[1] for k in kept]).cpu().numpy() if kept else np.zeros(0, np.float32),
              "targets": torch.cat([k[2] for k in kept]).cpu().numpy() if kept else np.zeros(0, np.float32)}
    import io

    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    name = f"{split}.npz" if env.world_size == 1 else f"{split}.rank{env.rank}.npz"
    atomic_write_bytes(folder / name, buffer.getvalue())


def _record(loop: Loop, record: dict[str, Any]) -> None:
    loop.state.history.append(record)
    if loop.s.env.is_main:
        loop.run.log(record, loop.state.history)
        if loop.logger is not None:
            loop.logger.log(record)


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
