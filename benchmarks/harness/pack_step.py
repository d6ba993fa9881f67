"""Training steps of N members packed into one stacked model against the same members one by one, in one process.

Each member is a seed of the task's quick preset (`resolve_run(model, task, "quick", seed=i)`), built as its single
run builds it; the batches are drawn before timing (this measures the step: forward, loss, backward, AdamW), and
each way runs `--steps` steps after `--warmup` untimed ones. Printed: the time a step of one member takes alone, the
time of one packed step of all N, their ratio (the issue's goal for 4 seeds: at most 2) and the speed-up over
running the N members one by one.

    PYTHONSAFEPATH=1 python benchmarks/harness/pack_step.py --model attention --task mqar --members 4
    PYTHONSAFEPATH=1 python benchmarks/harness/pack_step.py --model dlr --task cumsum --members 4 8
"""

from __future__ import annotations

import argparse
import time

import torch

DEVICE = torch.device("cpu")
"""Where the members train (`--device`)."""


def _sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def members(model: str, task: str, n: int, setting: str = "quick") -> list:
    from ssmbench.harness.config.resolver import resolve_run

    return [resolve_run(model, task, setting, seed=i) for i in range(n)]


def build(cfg) -> torch.nn.Module:
    from ssmbench.harness.models.build import build_model

    torch.manual_seed(cfg.seed)
    return build_model(cfg.model, cfg.resolved_task.spec, dict(cfg.model_overrides)).to(DEVICE)


def batches(cfg, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from ssmbench.data.read.streaming import TaskStream

    stream = TaskStream(cfg.resolved_task, seed=cfg.data.seed + cfg.seed)  # each member its own stream
    out = []
    for step in range(steps):
        b = stream.train_batch(step, cfg.train.batch_size)
        out.append((torch.from_numpy(b["inputs"]).to(DEVICE), torch.from_numpy(b["targets"]).to(DEVICE)))
    return out


def time_single(cfgs, data, steps: int, warmup: int) -> float:
    """Seconds a step of one member takes alone (the mean over members)."""
    from ssmbench.harness.metrics.objectives import objective_for
    from ssmbench.harness.models.optim_groups import param_groups

    total = 0.0
    for cfg, feed in zip(cfgs, data, strict=True):
        model = build(cfg)
        t = cfg.train
        opt = torch.optim.AdamW(param_groups(model, lr=t.lr, weight_decay=t.weight_decay, lr_ssm=t.lr_ssm),
                                lr=t.lr, weight_decay=t.weight_decay)
        objective = objective_for(cfg.resolved_task.spec, cfg.eval.metric_batch_size)
        for step, (x, y) in enumerate(feed[:warmup + steps]):
            if step == warmup:
                _sync()
                start = time.perf_counter()
            loss = objective.loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        _sync()
        total += time.perf_counter() - start
    return total / steps / len(cfgs)


def time_packed(cfgs, data, steps: int, warmup: int) -> float:
    """Seconds a packed step of all members takes."""
    from ssmbench.harness.metrics.objectives import objective_for
    from ssmbench.harness.training.pack import Pack, PackedAdamW

    pack = Pack([build(cfg) for cfg in cfgs])
    opt = PackedAdamW(pack, [{"lr": c.train.lr, "weight_decay": c.train.weight_decay, "lr_ssm": c.train.lr_ssm}
                             for c in cfgs])
    objective = objective_for(cfgs[0].resolved_task.spec, cfgs[0].eval.metric_batch_size)
    for step in range(warmup + steps):
        if step == warmup:
            _sync()
            start = time.perf_counter()
        x = torch.stack([feed[step][0] for feed in data])  # (N, B, T, ...)
        y = torch.stack([feed[step][1] for feed in data])
        pred = pack(x)
        loss = sum(objective.loss(pred[i], y[i]) for i in range(pack.n))
        opt.zero_grad()
        loss.backward()
        opt.step()
    _sync()
    return (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="attention")
    ap.add_argument("--task", default="mqar")
    ap.add_argument("--members", type=int, nargs="+", default=[4])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--setting", default="quick", choices=["quick", "paper"])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    print(f"{args.model} on {args.task} ({args.setting} preset, {DEVICE}), torch threads {torch.get_num_threads()}, "
          f"{args.steps} timed steps after {args.warmup}")
    for n in args.members:
        cfgs = members(args.model, args.task, n, args.setting)
        data = [batches(cfg, args.warmup + args.steps) for cfg in cfgs]
        one = time_single(cfgs, data, args.steps, args.warmup)
        packed = time_packed(cfgs, data, args.steps, args.warmup)
        print(f"N={n}: one member alone {one * 1e3:7.1f} ms/step, {n} packed {packed * 1e3:7.1f} ms/step: "
              f"{packed / one:4.2f}x one member's time, {n * one / packed:4.2f}x faster than one by one")


if __name__ == "__main__":
    main()
