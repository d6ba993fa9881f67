"""Tests that fail when a known mistake in the training loop comes back: one per mutation that survived the suite in
a review (each docstring names it). Expected values come from a plain recomputation, never from the loop itself."""

from __future__ import annotations

import copy
import json

import numpy as np
import torch

import ssmbench
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.evaluation import resume

TINY = {"L": 32, "model.d_model": 8, "model.d_state": 32, "train.log_every": 1, "eval.val_samples": 8,
        "eval.test_samples": 8, "eval.metric_batch_size": 4, "data.workers": 0}


def evaluate(tmp_path, name, **keys):
    return ssmbench.evaluate("dlr", "cumsum", overrides={**TINY, **keys}, out=tmp_path / name, quiet=True)


def val_steps(run_dir) -> list[int]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if r["split"] == "val"]


def test_the_last_step_is_validated_when_steps_are_not_a_multiple_of_eval_every(tmp_path):
    """Mutation: dropping `or done` from the validation condition (no final validation after step 5)."""
    r = evaluate(tmp_path, "run", **{"train.steps": 5, "train.eval_every": 3})
    assert val_steps(r.run_dir) == [3, 5]


def test_best_pt_is_written_only_when_the_monitor_improves(tmp_path):
    """Mutation: best.pt written at every evaluation. With the monitor `n` (the sample count, the same every time,
    selected as higher-is-better) only the first evaluation improves, so best.pt must stay at step 2."""
    r = evaluate(tmp_path, "run", **{"train.steps": 6, "train.eval_every": 2, "eval.monitor": "n"})
    assert val_steps(r.run_dir) == [2, 4, 6] and r.metrics["best_step"] == 2
    best = torch.load(r.run_dir / "checkpoints" / "best.pt", weights_only=True)
    assert best["state"]["step"] == 2


def test_resume_restores_the_random_state_of_a_model_with_dropout(tmp_path):
    """Mutation: resume skipping `torch.set_rng_state` (dropout masks after the resume would differ)."""
    keys = {"model.dropout": 0.3, "train.eval_every": 4}
    evaluate(tmp_path, "cut", **keys, **{"train.steps": 4})
    resume(tmp_path / "cut", {"train.steps": 8}, quiet=True)  # extends the finished 4-step run to 8 steps
    evaluate(tmp_path, "full", **keys, **{"train.steps": 8})
    a = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "full" / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_grad_clip_clips_the_global_norm(tmp_path):
    """Mutation: `clip_grad_value_` in place of `clip_grad_norm_`. One step of the loop equals one step of a plain
    recomputation that rescales all gradients together to norm `grad_clip`."""
    from ssmbench.harness.feed.batches import EvalSet
    from ssmbench.harness.results.run_folder import RunFolder
    from ssmbench.harness.training.trainer import setup, start, train_step

    cfg = resolve_run("dlr", "cumsum", overrides={**TINY, "train.grad_clip": 0.05, "train.steps": 1})
    s = setup(cfg)
    reference = copy.deepcopy(s.model)
    loop = start(s, RunFolder(tmp_path / "run"), resume=False, quiet=True, logger=None)
    batch = EvalSet.build("cumsum", cfg.task_config, 0, "train", cfg.train.batch_size)
    train_step(loop, {"inputs": batch.inputs, "targets": batch.targets})

    loss = torch.nn.functional.mse_loss(reference(batch.inputs), batch.targets)
    loss.backward()
    params = [p for p in reference.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params))
    assert norm > 0.05  # the clip is active
    for p in params:
        p.grad.mul_(0.05 / (norm + 1e-6))
    from ssmbench.harness.models.optim_groups import param_groups

    t = cfg.train
    opt = torch.optim.AdamW(param_groups(reference, lr=t.lr, weight_decay=t.weight_decay, lr_ssm=t.lr_ssm), lr=t.lr,
                            betas=(t.beta1, t.beta2), eps=t.eps, weight_decay=t.weight_decay)
    opt.step()
    for (name, p), q in zip(s.model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7, msg=name)


def test_ddp_ranks_take_every_wth_index_of_the_epoch_order():
    """Mutation: rank shares as contiguous blocks of the epoch order instead of every W-th index (each rank would
    see other samples than the single-process run's batches interleaved)."""
    from ssmbench.data.read.samplers import ShardAwareSampler

    class Toy:
        shard_starts = np.array([0, 5, 9, 17, 23])

        def __len__(self) -> int:
            return 23

    order = ShardAwareSampler(Toy(), seed=3, epoch=2, rank=0, world_size=1).indices()
    for w in (2, 3):
        total = (23 // w) * w
        for r in range(w):
            share = ShardAwareSampler(Toy(), seed=3, epoch=2, rank=r, world_size=w).indices()
            assert share.tolist() == order[:total].tolist()[r::w]
