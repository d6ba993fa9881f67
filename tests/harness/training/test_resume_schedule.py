"""A resumed run keeps its learning-rate schedule: a cosine run (with warm-up) stopped at step 3 and extended to its
end ends with the weights of the same run trained without a stop, to the bit. (A resume that rebuilt the schedule
from step 0 would train the second half at the warm-up's rates.)"""

from __future__ import annotations

import torch

import ssmbench
from ssmbench.harness.evaluation import resume

KEYS = {"L": 32, "train.schedule": "cosine", "train.warmup_steps": 2, "train.schedule_steps": 6,
        "train.eval_every": 3, "train.lr": 1e-2, "model.d_model": 4, "model.n_layers": 1, "eval.val_samples": 4,
        "eval.test_samples": 4, "eval.metric_batch_size": 2, "data.workers": 0}


def _weights(run_dir) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)["model"]


def test_a_cosine_run_resumed_midway_ends_where_an_uninterrupted_one_ends(tmp_path):
    whole = ssmbench.evaluate("dlr", "cumsum", overrides={**KEYS, "train.steps": 6}, out=tmp_path / "whole",
                              quiet=True)
    half = ssmbench.evaluate("dlr", "cumsum", overrides={**KEYS, "train.steps": 3}, out=tmp_path / "half",
                             quiet=True)
    resume(half.run_dir, {"train.steps": 6}, quiet=True)
    a, b = _weights(whole.run_dir), _weights(half.run_dir)
    assert list(a) == list(b)
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
