"""Packed runs end to end: each member of a pack is its single run (folder, checkpoints, metrics), stops alone on a
non-finite loss, resumes with the pack or alone, and a pack that does not stack or fit is split or run one by one."""

from __future__ import annotations

import json

import pytest
import torch

from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.results.checkpoints import load_last
from ssmbench.harness.training import packed_loop
from ssmbench.harness.training.pack_protocol import PACK_RECORD, PackMember, train_and_score_pack
from ssmbench.harness.training.protocol import train_and_score
from ssmbench.harness.training.trainer import NonFiniteLoss
from tests.support import run_main

KEYS = {"L": 16, "train.steps": 12, "train.eval_every": 6, "train.log_every": 3, "model.d_model": 8,
        "eval.val_samples": 16, "eval.test_samples": 16, "eval.metric_batch_size": 8, "data.workers": 0}


def config(seed: int = 0, model: str = "dlr", **extra):
    return resolve_run(model, "cumsum", overrides={**KEYS, **extra}, seed=seed)


def weights(run_dir, name: str = "last") -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "checkpoints" / f"{name}.pt", weights_only=False)["model"]


def close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tol: float = 1e-5) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=tol, rtol=tol) for k in a)


def test_members_with_their_own_seeds_rates_and_decay_equal_their_single_runs(tmp_path):
    cfgs = [config(0), config(1, **{"train.lr": 3e-3, "train.weight_decay": 0.1}),
            config(2, **{"train.schedule": "cosine", "train.warmup_steps": 3, "train.grad_clip": 0.05})]
    packed = train_and_score_pack([PackMember(c, tmp_path / f"p{i}") for i, c in enumerate(cfgs)], quiet=True)
    for i, (c, result) in enumerate(zip(cfgs, packed, strict=True)):
        single = train_and_score(c, tmp_path / f"s{i}", None, quiet=True)
        assert close(weights(result.run_dir), weights(single.run_dir))  # float32: rounding only
        assert result.metrics["test"]["r2"] == pytest.approx(single.metrics["test"]["r2"], abs=1e-4)
        assert result.metrics["best_step"] == single.metrics["best_step"]
        a, b = (load_last(r.run_dir / "checkpoints" / "last.pt") for r in (result, single))
        assert a["scheduler"] == b["scheduler"] and a["state"]["step"] == b["state"]["step"] == 12
        for key in ("exp_avg", "exp_avg_sq"):  # AdamW's moments as the single run's optimiser holds them
            assert all(torch.allclose(a["optimizer"]["state"][j][key], b["optimizer"]["state"][j][key], atol=1e-6)
                       for j in b["optimizer"]["state"])
        assert json.loads((result.run_dir / "config.json").read_text()) == \
            json.loads((single.run_dir / "config.json").read_text())
        extra = {p.name for p in result.run_dir.iterdir()} - {p.name for p in single.run_dir.iterdir()}
        assert extra == {PACK_RECORD}
        record = json.loads((result.run_dir / PACK_RECORD).read_text())
        assert record["packs"] == [{"from_step": 0, "members": ["p0", "p1", "p2"], "position": i}]


def test_a_member_whose_loss_turns_non_finite_stops_alone(tmp_path):
    cfgs = [config(s, "user_mixers:NanAbove", **{"model.d_state": None, "train.lr": lr})
            for s, lr in ((0, 1e-3), (1, 5.0), (2, 1e-3))]  # member 1's weights pass 2 at once: NaN
    out = train_and_score_pack([PackMember(c, tmp_path / f"p{i}") for i, c in enumerate(cfgs)], quiet=True)
    assert isinstance(out[1], NonFiniteLoss)
    assert not (tmp_path / "p1" / "metrics.json").exists()
    for i in (0, 2):  # the others went on, undisturbed: their single runs' weights
        single = train_and_score(cfgs[i], tmp_path / f"s{i}", None, quiet=True)
        assert close(weights(out[i].run_dir), weights(single.run_dir))


def test_an_interrupted_pack_resumes_as_a_pack_or_member_by_member(tmp_path, monkeypatch):
    cfgs = [config(0), config(1)]
    whole = train_and_score_pack([PackMember(c, tmp_path / f"w{i}") for i, c in enumerate(cfgs)], quiet=True)
    real = packed_loop._stop_reason
    monkeypatch.setattr(packed_loop, "_stop_reason",
                        lambda loop, stop, budget: "signal" if loop.state.step == 6 else real(loop, stop, budget))
    for prefix in ("a", "b"):
        with pytest.raises(packed_loop.TrainingInterrupted, match="interrupted at step 6/12"):
            train_and_score_pack([PackMember(c, tmp_path / f"{prefix}{i}") for i, c in enumerate(cfgs)], quiet=True)
    monkeypatch.setattr(packed_loop, "_stop_reason", real)
    for i in range(2):
        assert load_last(tmp_path / f"a{i}" / "checkpoints" / "last.pt")["state"]["step"] == 6
    again = [PackMember(c, tmp_path / f"a{i}", resume=True, last=load_last(tmp_path / f"a{i}/checkpoints/last.pt"))
             for i, c in enumerate(cfgs)]
    resumed = train_and_score_pack(again, quiet=True)
    for i in range(2):  # the pack continued: bit for bit the uninterrupted pack
        assert all(torch.equal(weights(resumed[i].run_dir)[k], weights(whole[i].run_dir)[k])
                   for k in weights(whole[i].run_dir))
        assert [p["from_step"] for p in json.loads((tmp_path / f"a{i}" / PACK_RECORD).read_text())["packs"]] == [0, 6]
    from ssmbench.harness.evaluation import resume

    alone = resume(tmp_path / "b1", quiet=True)  # a member's last.pt is a single run's: it resumes by itself
    assert alone.metrics["steps"] == 12 and close(weights(alone.run_dir), weights(whole[1].run_dir))


def test_models_that_do_not_stack_run_one_by_one_with_a_line_saying_why(tmp_path, capsys):
    keys = {**KEYS, "model.n_heads": 1}
    cfgs = [resolve_run("las", "cumsum", overrides=keys, seed=s) for s in (0, 1)]
    out = train_and_score_pack([PackMember(c, tmp_path / f"p{i}") for i, c in enumerate(cfgs)])
    err = capsys.readouterr().err
    assert "2 runs of las do not pack (LaS declares packable = False); training them one by one" in err
    assert all(r.metrics["steps"] == 12 for r in out)
    assert not any((r.run_dir / PACK_RECORD).exists() for r in out)


def test_a_pack_that_does_not_fit_is_split_into_packs_that_do(tmp_path, monkeypatch, capsys):
    from ssmbench.harness.training import memory

    cfgs = [config(s) for s in range(3)]
    one = train_and_score(cfgs[0], tmp_path / "probe", None, quiet=True).metrics["memory"]["estimated_peak_bytes"]
    monkeypatch.setattr(memory, "free_bytes", lambda device: int(2.5 * one))  # room for two members at a time
    out = train_and_score_pack([PackMember(c, tmp_path / f"p{i}") for i, c in enumerate(cfgs)])
    assert "training it as 2 packs of at most 2" in capsys.readouterr().err
    members = [json.loads((r.run_dir / PACK_RECORD).read_text())["packs"][0]["members"] for r in out]
    assert members == [["p0", "p1"], ["p0", "p1"], ["p2"]]


def test_the_cli_packs_a_seed_suite_and_pack_never_runs_one_by_one(tmp_path):
    keys = [x for k, v in KEYS.items() for x in ("-o", f"{k}={v}")]
    packed = run_main("eval", "--model", "dlr", "--task", "cumsum", "--seeds", "0,1", *keys, "--pack", "always", "--out",
                      str(tmp_path / "packed"), cwd=tmp_path)
    assert packed.returncode == 0, packed.stderr
    assert "training 2 runs as one pack (cumsum-seed0, cumsum-seed1)" in packed.stderr
    alone = run_main("eval", "--model", "dlr", "--task", "cumsum", "--seeds", "0,1", *keys, "--pack", "never", "--out",
                     str(tmp_path / "alone"), cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    for seed in (0, 1):
        p, a = tmp_path / "packed" / f"cumsum-seed{seed}", tmp_path / "alone" / f"cumsum-seed{seed}"
        assert (p / PACK_RECORD).exists() and not (a / PACK_RECORD).exists()
        assert close(weights(p), weights(a))
    again = run_main("eval", "--model", "dlr", "--task", "cumsum", "--seeds", "0,1", *keys, "--out",
                     str(tmp_path / "packed"), cwd=tmp_path)  # the same command: both finished, nothing packs
    assert again.returncode == 0 and "one pack" not in again.stderr and "skipped" in again.stderr


def test_a_time_limit_stops_the_pack_with_every_member_saved_and_the_same_call_continues_it(tmp_path):
    from itertools import count

    from ssmbench.harness import evaluation
    from ssmbench.harness.packing import SuitePacker
    from ssmbench.harness.runtime.time_limit import Deadline
    from ssmbench.harness.suites import SuiteTimeLimit, run_suite

    keys = {**KEYS, "train.steps": 30, "train.eval_every": 10}
    packer = SuitePacker(lambda task, out, seed: resolve_run("dlr", task, overrides=keys, seed=seed), quiet=True,
                          policy="always")
    kw = {"overrides": keys, "quiet": True, "seeds": [0, 1], "packer": packer}
    run_suite("dlr", "cumsum", evaluation.evaluate, evaluation.resume, out=tmp_path / "whole", **kw)
    with pytest.raises(SuiteTimeLimit) as caught:  # a clock one second later at every reading: deterministic
        run_suite("dlr", "cumsum", evaluation.evaluate, evaluation.resume, out=tmp_path / "cut",
                  time_limit=Deadline(60, clock=count().__next__), **kw)
    exc = caught.value
    assert exc.exit_code == 75 and 0 < exc.step < 30 and "cumsum-seed0 and its pack" in exc.message
    for seed in (0, 1):
        member = tmp_path / "cut" / f"cumsum-seed{seed}"
        assert load_last(member / "checkpoints" / "last.pt")["state"]["step"] == exc.step
        assert not (member / "metrics.json").exists()
    _, results = run_suite("dlr", "cumsum", evaluation.evaluate, evaluation.resume, out=tmp_path / "cut", **kw)
    for seed, result in zip((0, 1), results, strict=True):
        whole = tmp_path / "whole" / f"cumsum-seed{seed}"
        assert result.metrics["steps"] == 30
        assert all(torch.equal(a, b) for a, b in zip(weights(whole).values(), weights(result.run_dir).values(),
                                                     strict=True))
        packs = json.loads((result.run_dir / PACK_RECORD).read_text())["packs"]
        assert [p["from_step"] for p in packs] == [0, exc.step]


def test_sigterm_to_a_packed_suite_saves_every_member_and_the_same_command_finishes(tmp_path):
    """A real process and its workers signalled as a scheduler does: exit 130 with every member's last.pt at one
    step (continuing a stopped pack is the time-limit test's)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.support import PROCESS_CEILING

    keys = {**KEYS, "L": 64, "train.steps": 100000, "train.eval_every": 50, "train.log_every": 5,
            "data.workers": 1}
    args = [str(Path(sys.executable).with_name("ssmbench")), "eval", "--model", "dlr", "--task", "cumsum",
            "--seeds", "0,1", "--pack", "always", *[x for k, v in keys.items() for x in ("-o", f"{k}={v}")], "-q", "--out",
            str(tmp_path / "suite")]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONSAFEPATH": "1"},
                            start_new_session=True)
    log = tmp_path / "suite" / "cumsum-seed1" / "metrics.jsonl"
    deadline = time.monotonic() + PROCESS_CEILING
    while not (log.exists() and '"train"' in log.read_text()):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the pack logged no training line in time"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=PROCESS_CEILING)
    assert proc.returncode == 130, err
    assert "interrupted at step" in err and "its pack" in err and "Traceback" not in err, err
    steps = {load_last(tmp_path / "suite" / f"cumsum-seed{s}" / "checkpoints" / "last.pt")["state"]["step"]
             for s in (0, 1)}
    assert len(steps) == 1 and 0 < steps.pop() < 100000


def test_cuda_graph_is_refused_on_the_cpu_before_any_folder_is_made(tmp_path):
    from ssmbench.errors import ConfigError

    with pytest.raises(ConfigError, match="--cuda-graph: captures the training step on a CUDA device"):
        train_and_score(config(0, **{"hardware.cuda_graph": True, "hardware.device": "cpu"}), tmp_path / "run", None,
                        quiet=True)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("alone, together, packs", [(1.0, 0.5, True), (1.0, 1.5, False)])
def test_auto_packs_only_where_a_packed_step_measures_faster_and_leaves_the_members_as_they_were(alone, together,
                                                                                                   packs):
    from itertools import accumulate

    from ssmbench.harness.models.build import build_model
    from ssmbench.harness.training.pack_protocol import pack_pays

    spec = config(0).resolved_task.spec
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(build_model("dlr", spec, {"d_model": 8}))
    before = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]
    # readings of a fake clock: one untimed and one timed run each, one by one first, then packed
    ticks = iter(accumulate([0.0, alone, 0.0, alone, 0.0, together, 0.0, together]))
    reason = pack_pays(models, torch.randn(1, 16, 3), 4, repeats=1, clock=lambda: next(ticks))
    assert (reason is None) == packs
    if not packs:
        assert "1500.0 ms for 2 against 1000.0 ms one by one" in reason
    for model, state in zip(models, before, strict=True):
        assert all(p.grad is None for p in model.parameters())
        assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
