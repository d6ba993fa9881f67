"""One process against two (torchrun, gloo on the CPU): identical scores of one checkpoint, equal training losses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ARGS = ["eval", "--model", "dlr", "--task", "cumsum", "-o", "L=32", "-o", "model.d_model=8",
        "-o", "model.d_state=32", "-o", "train.steps=6", "-o", "train.eval_every=3", "-o", "train.log_every=1",
        "-o", "train.batch_size=8", "-o", "eval.val_samples=21", "-o", "eval.test_samples=19",
        "-o", "eval.metric_batch_size=4", "-o", "data.workers=0", "--device", "cpu", "-q"]


def launch(nproc: int, *args: str) -> subprocess.CompletedProcess:
    bindir = Path(sys.executable).parent
    cmd = [str(bindir / "ssmbench")] if nproc == 1 else \
        [str(bindir / "torchrun"), "--standalone", f"--nproc-per-node={nproc}", "--no-python", str(bindir / "ssmbench")]
    env = {**os.environ, "PYTHONSAFEPATH": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def losses(run: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
            if r["split"] == "train"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    launch(1, *ARGS, "--out", str(root / "one"))
    two = launch(2, *ARGS, "--out", str(root / "two"))
    (root / "two.stdout").write_text(two.stdout)
    return root


# The three tests on `runs` are slow (30 s on 2 cores): torchrun starts two ranks that each import torch and train,
# twice. They guard DDP (one rank's report, equal losses, identical scores of a sharded evaluation); CI runs them
# (`pytest -m slow`). The process group's clean exit stays in the default run.
@pytest.mark.slow
def test_only_rank_0_reports(runs):
    lines = (runs / "two.stdout").read_text().splitlines()
    assert len([line for line in lines if line.startswith(str(runs / "two"))]) == 1


@pytest.mark.slow
def test_two_ranks_train_like_one(runs):
    one, two = losses(runs / "one"), losses(runs / "two")
    assert len(one) == len(two) == 6
    assert one == pytest.approx(two, rel=1e-5)


@pytest.mark.slow
def test_scoring_a_checkpoint_on_two_ranks_gives_identical_metrics(runs):
    ckpt = str(runs / "one" / "checkpoints" / "best.pt")
    a = json.loads(launch(1, "eval", "--checkpoint", ckpt, "--split", "test", "--out", str(runs / "s1"),
                          "--json").stdout)
    launch(2, "eval", "--checkpoint", ckpt, "--split", "test", "--out", str(runs / "s2"), "-q")
    b = json.loads((runs / "s2" / "metrics.json").read_text())
    assert b["world_size"] == 2
    assert b["test"]["n"] == a["test"]["n"] == 19 * 32          # 19 samples over 2 ranks: none padded or dropped
    assert b["test"]["r2"] == pytest.approx(a["test"]["r2"], rel=1e-12)
    assert b["test"]["r2_batchavg"] == pytest.approx(a["test"]["r2_batchavg"], rel=1e-12)
    assert b["test"]["n_batches_batchavg"] == 4                 # 19 // 4 virtual batches, the remainder dropped


def test_a_successful_command_leaves_the_process_group(tmp_path):
    """`ssmbench` destroys the process group it ran in once the command succeeds (left to interpreter exit, gloo can
    abort a rank); after a failed command it leaves it to torchrun. A one-rank gloo group stands in for torchrun's."""
    import torch.distributed as dist

    from ssmbench.cli import app

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        with pytest.raises(SystemExit) as failed:
            app.main(["describe", "no_such_task"])
        assert failed.value.code == 2 and dist.is_initialized()
        with pytest.raises(SystemExit) as succeeded:
            app.main(["ls"])
        assert succeeded.value.code == 0 and not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.slow
def test_a_pack_on_two_ranks_trains_like_the_pack_in_one_process(tmp_path):
    """`--seeds 0,1` packs; under torchrun each rank steps its slice of every member's batch and the pack averages
    the members' gradients across ranks, as DDP does for a single run: the same losses and weights."""
    import torch

    args = [*ARGS, "--seeds", "0,1", "--pack", "always"]
    launch(1, *args, "--out", str(tmp_path / "one"))
    launch(2, *args, "--out", str(tmp_path / "two"))
    for seed in (0, 1):
        one, two = tmp_path / "one" / f"cumsum-seed{seed}", tmp_path / "two" / f"cumsum-seed{seed}"
        assert (one / "pack.json").exists() and (two / "pack.json").exists()
        assert losses(one) == pytest.approx(losses(two), rel=1e-5) and len(losses(one)) == 6
        a, b = (torch.load(run / "checkpoints" / "last.pt", weights_only=True)["model"] for run in (one, two))
        assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
