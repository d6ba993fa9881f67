"""Train short, test long (issue 40, item 2): per-step training lengths, scoring at test lengths, the summaries."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
import torch

import ssmbench
from ssmbench.data.read.streaming import TaskStream
from ssmbench.errors import ConfigError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.feed.batches import TrainFeed
from ssmbench.harness.feed.device_feed import DeviceFeed
from ssmbench.harness.packing import pack_key
from ssmbench.harness.results.compare import build_table, load_runs, render_text
from ssmbench.harness.runtime.lengths import TrainLengths, at_length, model_length, output_rows, over_seeds
from ssmbench.harness.scoring import score_checkpoint
from support import run_main

TINY = {"L": 16, "model.d_model": 8, "model.d_state": 16, "train.steps": 8, "train.eval_every": 4,
        "eval.val_samples": 16, "eval.test_samples": 16, "eval.metric_batch_size": 4, "data.workers": 0}
PROTOCOL = {"train.length_min": 4, "train.length_max": 16, "eval.test_lengths": "8,16,32,64"}
MASK = (1 << 64) - 1


def _splitmix(x: int) -> int:
    """SplitMix64 written out on Python integers: the oracle of the length draw."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def test_the_length_of_a_step_is_a_pure_function_of_the_data_seed_and_the_step():
    lengths = TrainLengths(1, 40, data_seed=7)
    for step in (0, 1, 2, 999, 2 ** 40):
        assert lengths.at(step) == 1 + _splitmix(_splitmix(7 ^ 0x4C454E47) ^ step) % 40
    drawn = lengths.many(range(8000))
    assert drawn.tolist() == [TrainLengths(1, 40, 7).at(s) for s in range(8000)]  # a new object, the same draw
    counts = np.bincount(drawn, minlength=41)[1:]
    assert counts.min() > 0.7 * 200 and counts.max() < 1.3 * 200  # uniform on 1..40: 200 a length expected
    assert drawn.tolist() != TrainLengths(1, 40, data_seed=8).many(range(8000)).tolist()


def test_a_feed_gives_each_step_the_batch_of_its_length_also_when_resumed_and_through_a_worker():
    lengths = TrainLengths(3, 12, data_seed=0)
    feed = TrainFeed("cumsum", {"L": 12}, 0, 4, start_step=0, stop_step=6, workers=0, lengths=lengths)
    seen = dict(feed)
    for step, batch in seen.items():  # the stream of that length, resolved by name as `generate --length` would
        expect = TaskStream("cumsum", {"L": lengths.at(step)}, seed=0).train_batch(step, 4)
        assert batch["inputs"].shape[1] == lengths.at(step)
        assert torch.equal(batch["inputs"], torch.from_numpy(expect["inputs"]))
        assert torch.equal(batch["targets"], torch.from_numpy(expect["targets"]))
    assert len({b["inputs"].shape[1] for b in seen.values()}) > 1
    resumed = TrainFeed("cumsum", {"L": 12}, 0, 4, start_step=3, stop_step=6, workers=1, lengths=lengths)
    assert resumed.steps_per_message > 1  # a message pads its steps to the longest; each is cut back
    for step, batch in resumed:
        assert torch.equal(batch["inputs"], seen[step]["inputs"])
        assert torch.equal(batch["targets"], seen[step]["targets"])


class _StagedOnCpu(DeviceFeed):
    """The staged path (pinned buffers, whole messages) with the device operations done on the CPU."""

    def _pinned(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8)

    def _to_device(self, host: torch.Tensor) -> torch.Tensor:
        return host.clone()

    def _record(self, event):
        return type("Done", (), {"synchronize": lambda self: None})()


def test_the_staged_device_feed_cuts_each_step_of_a_padded_message_to_its_length():
    lengths = TrainLengths(3, 12, data_seed=1)
    plain = dict(TrainFeed("cumsum", {"L": 12}, 1, 4, start_step=0, stop_step=20, workers=0, lengths=lengths))
    feed = TrainFeed("cumsum", {"L": 12}, 1, 4, start_step=0, stop_step=20, workers=0, lengths=lengths,
                     steps_per_message=8)
    staged = dict(_StagedOnCpu(feed, "cpu", stage=True))
    assert staged.keys() == plain.keys()
    for step, batch in staged.items():
        assert batch["inputs"].shape[1] == lengths.at(step)
        assert torch.equal(batch["inputs"], plain[step]["inputs"])
        assert torch.equal(batch["targets"], plain[step]["targets"])


def test_a_resumed_run_trains_on_the_same_lengths_as_an_uninterrupted_one(tmp_path):
    keys = {**TINY, "train.length_min": 4, "train.length_max": 16}
    whole = ssmbench.evaluate("dlr", "cumsum", out=tmp_path / "whole", overrides=keys, quiet=True, device="cpu")
    ssmbench.evaluate("dlr", "cumsum", out=tmp_path / "half", overrides={**keys, "train.steps": 4}, quiet=True,
                      device="cpu")
    from ssmbench.harness.evaluation import resume

    resume(tmp_path / "half", overrides={"train.steps": 8}, quiet=True)
    a = torch.load(whole.run_dir / "checkpoints" / "last.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "half" / "checkpoints" / "last.pt", weights_only=False)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    fixed = ssmbench.evaluate("dlr", "cumsum", out=tmp_path / "fixed", overrides=TINY, quiet=True, device="cpu")
    c = torch.load(fixed.run_dir / "checkpoints" / "last.pt", weights_only=False)["model"]
    assert not all(torch.equal(a[k], c[k]) for k in a)  # the lengths changed what it trained on


@pytest.fixture(scope="module")
def protocol_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("protocol") / "run"
    return ssmbench.evaluate("dlr", "cumsum", out=out, overrides={**TINY, **PROTOCOL}, quiet=True, device="cpu")


def test_each_test_length_scores_as_the_checkpoint_scored_alone_at_that_length(protocol_run, tmp_path):
    lengths = protocol_run.metrics["lengths"]
    assert lengths["test_lengths"] == [8, 16, 32, 64] and lengths["train_lengths"] == [4, 16]
    assert lengths["metric"] == "r2" and lengths["skipped"] == []
    best = protocol_run.run_dir / "checkpoints" / "best.pt"
    for row in lengths["rows"]:
        alone = score_checkpoint(best, "test", length=row["L"], out=tmp_path / f"L{row['L']}", quiet=True)
        assert alone.metrics["test"]["r2"] == row["r2"] and alone.metrics["test"]["mse"] == row["mse"]
        assert (protocol_run.run_dir / row["run_dir"] / "metrics.json").is_file()
    assert lengths["mean"] == pytest.approx(statistics.fmean(row["r2"] for row in lengths["rows"]), abs=1e-15)
    saved = json.loads((protocol_run.run_dir / "metrics.json").read_text())
    assert saved["lengths"] == lengths
    assert (protocol_run.run_dir / "plots" / "lengths.png").read_bytes()[:4] == b"\x89PNG"


def test_the_cli_scores_a_length_as_the_run_did(protocol_run, tmp_path):
    best = str(protocol_run.run_dir / "checkpoints" / "best.pt")
    result = run_main("eval", "--checkpoint", best, "--length", "32", "--out", str(tmp_path / "s"), "-q", "--json")
    assert result.returncode == 0, result.stderr
    row = next(r for r in protocol_run.metrics["lengths"]["rows"] if r["L"] == 32)
    assert json.loads((tmp_path / "s" / "metrics.json").read_text())["test"]["r2"] == row["r2"]


def test_the_summary_over_seeds_is_the_max_and_the_mean_with_the_sample_std():
    assert over_seeds([0.2, 0.6, 0.7]) == {"n": 3, "max": 0.7, "mean": pytest.approx(0.5),
                                           "std": pytest.approx(0.2645751311, abs=1e-9)}  # sqrt(0.07)
    assert over_seeds([0.4]) == {"n": 1, "max": 0.4, "mean": 0.4, "std": None}
    runs = [{"task": "parity_check", "model": "lstm", "layers": 1, "L": 40, "params": 100, "device": "cpu",
             "steps": 100, "preset": "quick", "group": "g", "seed": s, "time": s, "time_per_step_s": None,
             "cells": {"label": "lengths", "mean": v}} for s, v in ((0, 0.2), (1, 0.6), (2, 0.7))]
    text = render_text(build_table(runs))
    assert "max 0.700 / 0.500±0.265 (n=3)" in text and "best of 10" in text


def test_cli_end_to_end_and_compare_shows_the_protocol_row(tmp_path):
    keys = [f"{k}={v}" for k, v in {**TINY, "train.length_min": 4, "train.length_max": 16,
                                    "eval.test_lengths": "16-32:16"}.items()]
    for seed in (0, 1):
        args = ["eval", "--model", "dlr", "--task", "cumsum", "--device", "cpu", "--seed", str(seed), "--out",
                str(tmp_path / f"s{seed}"), "-q"]
        for key in keys:
            args += ["-o", key]
        done = run_main(*args)
        assert done.returncode == 0, done.stderr
    means = [json.loads((tmp_path / f"s{s}" / "metrics.json").read_text())["lengths"]["mean"] for s in (0, 1)]
    shown = run_main("compare", str(tmp_path / "s0"), str(tmp_path / "s1"))
    assert shown.returncode == 0, shown.stderr
    summary = over_seeds(means)
    assert f"cumsum [mean r2, test L 16-32]  max {summary['max']:.3f} / {summary['mean']:.3f}±" in shown.stdout
    assert len(load_runs([tmp_path / "s0"])) == 2  # the run and its protocol row; the length scorings are inside


def test_protocol_runs_train_alone_and_others_still_pack():
    plain = [resolve_run("dlr", "cumsum", seed=s) for s in (0, 1)]
    assert pack_key(plain[0], 0) is not None and pack_key(plain[0], 0) == pack_key(plain[1], 0)
    for keys in ({"train.length_min": 4, "train.length_max": 8}, {"eval.test_lengths": "64"}):
        assert pack_key(resolve_run("dlr", "cumsum", overrides=keys), 0) is None


def test_models_with_an_l_max_are_built_for_the_longest_length_and_which_need_it():
    cfg = resolve_run("s4", "cumsum", overrides={"L": 16, "train.length_min": 4, "train.length_max": 24,
                                                 "eval.test_lengths": "32,64"})
    assert model_length(cfg) == 64
    from ssmbench.harness.training.trainer import setup

    s = setup(cfg)
    assert s.bare.mixers[0].l_kernel == 64 and s.spec.seq_len == 16  # built for 64; validated at its L = 16
    from ssmbench.harness.models.build import build_model

    spec = at_length(cfg.resolved_task, 32).spec
    refused = set()
    for name in ("dlr", "s4", "s4d", "dss_exp", "lru", "mamba", "attention", "local_attention", "las", "las_chunk",
                 "sgconv", "lstm", "deltanet"):
        model = build_model(name, spec, {"d_model": 8}, check=False)  # l_max = 32
        with torch.no_grad(), output_rows(model, 256):
            try:
                assert model(torch.randn(1, 256, 3)).shape == (1, 256, 1)
            except ValueError:
                refused.add(name)
    assert refused == {"s4", "sgconv"}


def test_output_rows_sets_and_restores_the_decoded_rows():
    model = torch.nn.Linear(2, 2)
    model.l_output = 16
    with output_rows(model, 4):
        assert model.l_output == 4
    assert model.l_output == 16
    plain = torch.nn.Linear(2, 2)
    with output_rows(plain, 4):
        assert not hasattr(plain, "l_output")


@pytest.mark.parametrize("keys, field", [
    ({"train.length_min": 4}, "train.length_max"),
    ({"train.length_min": 9, "train.length_max": 8}, "train.length_min"),
    ({"eval.test_lengths": "64,x"}, "eval.test_lengths"),
    ({"eval.test_lengths": "64-32"}, "eval.test_lengths"),
    ({"train.length_min": 0, "train.length_max": 8}, "train.length_min"),
])
def test_bad_protocol_keys_are_refused_naming_the_key(keys, field):
    with pytest.raises(ConfigError) as err:
        resolve_run("dlr", "cumsum", overrides=keys)
    assert err.value.field == field


def test_a_folder_task_is_refused():
    import dataclasses

    from ssmbench.registry import get_task
    from ssmbench.task_config import to_plain

    cfg = resolve_run("dlr", "cumsum", overrides={"eval.test_lengths": "64"})
    listops = to_plain(get_task("listops_subtrees").presets["dlr"])
    with pytest.raises(ConfigError, match="no sequence length"):
        dataclasses.replace(cfg, task="listops_subtrees", task_config=listops).validate()


def test_a_run_made_before_the_protocol_keys_existed_shares_its_column():
    from ssmbench.harness.results.compare import config_group

    new = resolve_run("dlr", "cumsum").to_json()
    old = {**new, "train": {k: v for k, v in new["train"].items() if k not in ("length_min", "length_max")},
           "eval": {k: v for k, v in new["eval"].items() if k != "test_lengths"}}
    assert config_group(old) == config_group(new)
    protocol = resolve_run("dlr", "cumsum", overrides={"train.length_min": 4, "train.length_max": 8}).to_json()
    assert config_group(protocol) != config_group(new)
