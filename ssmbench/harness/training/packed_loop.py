"""The training loop of a pack: N member runs of one architecture stepped together, each a single run in its folder.

Every member is an ordinary `trainer.Loop` (its own `Setup`, run folder, objective, torch AdamW and LambdaLR, train
state, validation set and data feed), built by `trainer.start` exactly as its single run would build it (restored from
its own last.pt on resume). Only the training step is shared: the members' models are stacked into one `pack.Pack`
and one forward, backward and `PackedAdamW` update steps them all, each with its own batch, learning rate (its own
schedule's factor at this step), weight decay and gradient clip. Before anything reads a member's model or optimiser
(validation, best.pt, last.pt, the final scoring) the pack writes each member's weights and AdamW moments back into
them (`sync`), so its checkpoints are single-run checkpoints that `--resume` and `--checkpoint` open alone.

    start every member (trainer.start, packed=True)  ->  Pack + PackedAdamW from the members (their restored state)
    -> each step: every member's batch (its own feed) -> packed forward, each member's loss, one backward,
       cross-rank gradient mean (torchrun), per-member clip, one update, every member's schedule steps
    -> log / validate / checkpoint / stop checks on the single-run cadence, per member (after `sync`)
    -> finish: every member scored at its best checkpoint, as a single run is.

A member whose training loss turns non-finite stops alone at its log line (its last good last.pt is kept, its outcome
is the `NonFiniteLoss` its single run would raise); the pack is rebuilt from the others and goes on. SIGINT / SIGTERM
and the time limit stop the whole pack at a step boundary with every member's last.pt written.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from ...errors import SsmbenchError
from ..feed.device_feed import train_feed
from ..results.checkpoints import load_last
from ..results.run_folder import RunFolder
from ..runtime import distributed as D
from ..runtime import time_limit
from ..runtime.precision import autocast_context
from .pack import Pack, PackedAdamW
from .trainer import (
    Loop,
    NonFiniteLoss,
    Setup,
    StopFlag,
    TrainingInterrupted,
    _progress,
    _stop_reason,
    _timed,
    checkpoint,
    finish,
    interrupted,
    log_train,
    start,
    validate,
)


class PackedSteps:
    """The stacked model and optimiser of the members still training; rebuilt when one stops."""

    def __init__(self, loops: Sequence[Loop]) -> None:
        self.loops = list(loops)
        self.pack = Pack([loop.s.bare for loop in self.loops], checked=True)
        settings = [{"lr": t.lr, "weight_decay": t.weight_decay, "lr_ssm": t.lr_ssm, "betas": (t.beta1, t.beta2),
                     "eps": t.eps} for t in (loop.s.cfg.train for loop in self.loops)]
        self.opt = PackedAdamW(self.pack, settings)
        self.opt.load([loop.optimizer for loop in self.loops])
        self.synced = True
        cfg = self.loops[0].s.cfg
        self.compute: Any = self.update
        if cfg.hardware.cuda_graph:
            from .cuda_graph import GraphedStep

            self.compute = GraphedStep(self.update, self.loops[0].s.env.device)

    def step(self, batches: Sequence[dict[str, torch.Tensor]]) -> None:
        """One update of every member on its own batch (member i's batch at batches[i]), then their schedules."""
        self.opt.set_factors([loop.scheduler.lr_lambdas[0](loop.scheduler.last_epoch) for loop in self.loops])
        self.compute(list(batches))
        with warnings.catch_warnings():  # its torch AdamW did not step (the pack's did): the schedule is in step
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before")
            for loop in self.loops:
                loop.scheduler.step()  # the member's own LambdaLR stays in step (its last.pt saves it)
                loop.loss_count += 1
        self.synced = False

    def update(self, batches: Sequence[dict[str, torch.Tensor]]) -> None:
        """The device work of a step (what `--cuda-graph` captures): forward, each member's loss, backward, the
        cross-rank mean, each member's clip, the packed AdamW update, each member's loss summed on the device."""
        env, cfg = self.loops[0].s.env, self.loops[0].s.cfg
        x = torch.stack([b["inputs"].to(env.device, non_blocking=True) for b in batches])   # (N, B_rank, T, ...)
        y = torch.stack([b["targets"].to(env.device, non_blocking=True) for b in batches])  # (N, B_rank, l_out, ...)
        with autocast_context(cfg.hardware.precision, env.device):
            pred = self.pack(x)  # (N, B_rank, l_output, ...)
            losses = [loop.s.objective.loss(pred[i], y[i]) for i, loop in enumerate(self.loops)]
        self.opt.zero_grad()
        torch.stack(losses).sum().backward()  # members share no parameter: each slice gets its own loss's gradient
        if env.distributed:  # what DDP does for a single run: the gradient averaged over ranks
            for p in self.pack.parameters():
                if p.grad is not None:
                    D.sum_across_ranks(p.grad).div_(env.world_size)
        self.opt.clip([loop.s.cfg.train.grad_clip for loop in self.loops])  # each member's own clip, if any
        self.opt.update()
        for i, loop in enumerate(self.loops):
            loop.loss_sum += losses[i].detach().double()

    def sync(self) -> None:
        """Every member's weights and AdamW state back into its own model and optimiser."""
        if not self.synced:
            self.pack.store()
            self.opt.store([loop.optimizer for loop in self.loops])
            self.synced = True


def train_pack(setups: Sequence[Setup], runs: Sequence[RunFolder], *, resume: Sequence[bool], quiet: bool = False,
               lasts: Sequence[dict[str, Any] | None] | None = None) -> list[dict[str, Any] | SsmbenchError]:
    """Train the members together; returns each member's final metrics (as `trainer.train`'s), or the
    `NonFiniteLoss` that stopped it. `resume[i]`: member i continues from its last.pt (`lasts[i]`, loaded already,
    or read here); all members must stand at the same step. SIGINT / SIGTERM raise `TrainingInterrupted` and the
    time limit `TimeLimitReached`, after every member's last.pt is saved."""
    with StopFlag() as stop:
        try:
            return _train_pack(setups, runs, stop, resume, quiet, lasts or [None] * len(setups))
        except KeyboardInterrupt:
            raise TrainingInterrupted("interrupted at once (a second Ctrl-C); each member's last.pt holds its last "
                                      "saved step", "re-run the same command to continue") from None


def _train_pack(setups: Sequence[Setup], runs: Sequence[RunFolder], stop: StopFlag, resume: Sequence[bool],
                quiet: bool, lasts: Sequence[dict[str, Any] | None]) -> list[dict[str, Any] | SsmbenchError]:
    first_cfg, env = setups[0].cfg, setups[0].env
    t = first_cfg.train
    ckpts = [(last if last is not None else load_last(run.last)) if again else None
             for last, run, again in zip(lasts, runs, resume, strict=True)]
    deadline = time_limit.current(first_cfg)
    budget = time_limit.Budget(deadline, first_cfg, sum(time_limit.state_bytes(s.bare) for s in setups)) \
        if deadline else None
    loops = [start(s, run, resume=again, quiet=quiet, logger=None, ckpt=ckpt, packed=True)
             for s, run, again, ckpt in zip(setups, runs, resume, ckpts, strict=True)]
    steps = {loop.state.step for loop in loops}
    if len(steps) != 1:
        raise ValueError(f"pack members stand at different steps {sorted(steps)}")
    step0 = steps.pop()
    outcome: dict[int, dict[str, Any] | SsmbenchError] = {}
    alive = list(range(len(loops)))
    packed = PackedSteps(loops)
    bar = _progress(step0, t.steps, quiet or not env.is_main, first_cfg)
    bar.set_description(f"{len(loops)} packed {first_cfg.model}")
    for loop in loops:
        loop.bar = bar
    if budget is not None and D.any_rank(not budget.fits(step0), env.device):
        _stop_at_time_limit(packed, budget, saved=any(resume))
    feeds = [iter(train_feed(loop.s.cfg, step0, env)) for loop in loops]
    tick = time.perf_counter()
    try:
        for step in range(step0, t.steps):
            waited = time.perf_counter()
            batches = [next(feeds[i])[1] for i in alive]
            wait = time.perf_counter() - waited
            packed.step(batches)
            done = step + 1 == t.steps
            for i in alive:
                state = loops[i].state
                state.step = step + 1
                if step > step0:
                    state.data_wait += wait
                    state.train_time += time.perf_counter() - tick
                    state.timed_steps += 1
                else:
                    state.startup_s = time.perf_counter() - tick
            bar.update(1)
            if (step + 1) % t.log_every == 0 or (step + 1) % t.eval_every == 0 or done:
                stopped = _log_members(packed, loops, alive, outcome)
                if stopped:
                    alive = [i for i in alive if i not in stopped]
                    for i in stopped:
                        feeds[i].close()
                    if not alive:
                        break
                    packed.sync()  # the others' state, then a pack of the members left
                    packed = PackedSteps([loops[i] for i in alive])
            if (step + 1) % t.eval_every == 0 or done:
                with _timed(budget, "eval"):
                    packed.sync()
                    for i in alive:
                        validate(loops[i])
            saved = (step + 1) % (t.checkpoint_every or t.eval_every) == 0 or done
            if saved:
                with _timed(budget, "save"):
                    _checkpoint_all(packed)
            if budget is not None:
                budget.boundary()
            reason = _stop_reason(packed.loops[0], stop, budget)
            if reason == "signal":
                _checkpoint_all(packed)
                bar.close()
                raise _interrupted(packed)
            if reason == "time":
                _stop_at_time_limit(packed, budget, saved)
            tick = time.perf_counter()
    finally:
        for feed in feeds:
            feed.close()  # the members' data workers stop now
    bar.close()
    packed.sync()
    for i in alive:
        outcome[i] = finish(loops[i])
    if D.any_rank(stop.signum is not None, env.device):
        raise _interrupted(packed)
    return [outcome[i] for i in range(len(loops))]


def _log_members(packed: Any, loops: Sequence[Loop], alive: Sequence[int],
                 outcome: dict[int, dict[str, Any] | SsmbenchError]) -> list[int]:
    """Each member's training-loss line; the members whose loss became non-finite (recorded in `outcome`)."""
    stopped = []
    for i in alive:
        try:
            log_train(loops[i])
        except NonFiniteLoss as exc:
            outcome[i] = exc
            stopped.append(i)
    return stopped


def _checkpoint_all(packed: Any) -> None:
    packed.sync()
    for loop in packed.loops:
        checkpoint(loop, loop.run.last)


def _interrupted(packed: Any) -> TrainingInterrupted:
    first = interrupted(packed.loops[0])
    names = ", ".join(loop.run.path.name for loop in packed.loops)
    return TrainingInterrupted(f"{first.message} (and its pack: {names})", first.hint)


def _stop_at_time_limit(packed: Any, budget: time_limit.Budget, saved: bool) -> None:
    if not saved:
        with budget.timed("save"):
            _checkpoint_all(packed)
    loop = packed.loops[0]
    loop.bar.close()
    raise time_limit.reached(budget.deadline, loop.run, loop.state.step, loop.s.cfg.train.steps, budget)
