"""Folder-backed tasks end to end on the CPU: ListOps-Subtrees and Pathfinder runs on tiny dataset folders (metrics,
Figures 2 and 3), the step -> (epoch, batch) feed and exact resume, DDP evaluation from a folder, and the one-line
refusals (`--data` missing / of another task, size or version; no folder under the data root; a causal-only mixer on
Pathfinder; CUDA out of memory).

Oracles: the Figure-2 counts are recounted from the stored `node_height` / `node_op` / `targets` arrays with plain
h5py; the training order is checked for exact cover per epoch and against a fresh process's view of the same steps.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import ssmbench
from ssmbench.data.make.generate import generate_dataset
from ssmbench.errors import DatasetError, SsmbenchError
from ssmbench.harness.config.resolver import resolve_run
from ssmbench.harness.evaluation import resume
from ssmbench.harness.feed.folder_feed import FolderSteps
from ssmbench.harness.scoring import score_checkpoint
from ssmbench.task_config import resolve_config
from support import run_main

TINY = {"model.d_model": 8, "model.n_layers": 1, "model.d_state": 16, "train.steps": 20, "train.warmup_steps": 2,
        "train.eval_every": 10, "train.log_every": 1, "train.batch_size": 4, "eval.test_samples": 8,
        "eval.batch_size": 4, "eval.metric_batch_size": 4, "data.workers": 0}


def _build(tmp_path_factory, task: str, **kwargs) -> Path:
    _, config, _ = resolve_config(task, **kwargs)
    out = tmp_path_factory.mktemp(task)
    return generate_dataset(task, config, out=out, n=40, split={"train": 24, "val": 8, "test": 8},
                            samples_per_shard=8, quiet=True).path


@pytest.fixture(scope="module")
def listops(tmp_path_factory) -> Path:
    """ListOps-Subtrees, `short` preset (T = 2048): train 24 (3 shards), val 8, test 8."""
    return _build(tmp_path_factory, "listops_subtrees", preset="short")


@pytest.fixture(scope="module")
def pathfinder(tmp_path_factory) -> Path:
    """Pathfinder 32 x 32 (T = 1024): train 24 (3 shards), val 8, test 8."""
    return _build(tmp_path_factory, "pathfinder", size=32)


@pytest.fixture(scope="module")
def listops_run(listops, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "listops"
    return ssmbench.evaluate("dlr", "listops_subtrees", data=listops, out=out, quiet=True,
                             overrides={**TINY, "eval.val_samples": 8})


@pytest.fixture(scope="module")
def pathfinder_run(pathfinder, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "pathfinder"
    return ssmbench.evaluate("dlr", "pathfinder", data=pathfinder, out=out, quiet=True,
                             overrides={**TINY, "eval.val_samples": 7})  # 7 of 8: a prefix, split 3 / 4 on 2 ranks


def _stored(folder: Path, split: str, *fields: str) -> dict[str, np.ndarray]:
    manifest = json.loads((folder / "manifest.json").read_text())
    parts: dict[str, list[np.ndarray]] = {f: [] for f in fields}
    for shard in manifest["splits"][split]["shards"]:
        with h5py.File(folder / shard["path"], "r") as f:
            for name in fields:
                parts[name].append(f[name][()])
    return {k: np.concatenate(v) for k, v in parts.items()}


def test_listops_run_writes_metrics_and_figure2(listops_run):
    run = listops_run.run_dir
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["monitor"]["key"] == "accuracy" and metrics["monitor"]["mode"] == "max"
    for split in ("val", "test"):
        assert 0 <= metrics[split]["accuracy"] <= 1 and metrics[split]["n_samples"] == 8
        assert metrics[split]["n_batches_batchavg"] == 2  # 8 samples in virtual batches of 4
    assert (run / "plots" / "figure2_breakdown.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "plots" / "learning_curves.png").exists()
    assert listops_run.config.task_config["max_length"] == 2000  # the folder's config, not the default preset
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r["split"] == "val"] == [10, 20]


def test_figure2_counts_equal_a_direct_count_of_the_stored_fields(listops, listops_run):
    metrics = json.loads((listops_run.run_dir / "metrics.json").read_text())
    table = metrics["figure2"]
    raw = _stored(listops, "val", "targets", "node_height", "node_op")
    labelled = raw["targets"] != -100  # (8, 2048)
    heights = np.bincount(raw["node_height"][labelled], minlength=16)
    ops = np.bincount(raw["node_op"][labelled], minlength=4)
    assert {h: v["total"] for h, v in table["by_height"].items()} == \
        {str(h): int(c) for h, c in enumerate(heights) if c}
    assert {op: v["total"] for op, v in table["by_operator"].items()} == \
        {name: int(ops[i]) for i, name in enumerate(("MIN", "MAX", "MED", "SM")) if ops[i]}
    trace = sum(metrics["val"]["confusion"][c][c] for c in range(10))
    assert sum(v["correct"] for v in table["by_height"].values()) == trace
    assert sum(v["correct"] for v in table["by_operator"].values()) == trace
    assert sum(heights) == metrics["val"]["n"] == int(labelled.sum())


def test_lra_listops_scores_one_label_per_expression(tmp_path_factory):
    folder = _build(tmp_path_factory, "listops")
    r = ssmbench.evaluate("dlr", "listops", data=folder, out=tmp_path_factory.mktemp("runs") / "lra", quiet=True,
                          overrides={**TINY, "train.steps": 4, "train.eval_every": 4, "eval.val_samples": 8})
    for split in ("val", "test"):
        scores = r.metrics[split]
        assert scores["n"] == scores["n_samples"] == 8  # token accuracy is sequence accuracy
        assert scores["accuracy"] == pytest.approx(sum(scores["confusion"][c][c] for c in range(10)) / 8)
    assert r.metrics["monitor"]["key"] == "accuracy" and "figure2" not in r.metrics


def test_pathfinder_run_writes_macro_metrics_and_figure3(pathfinder_run):
    run = pathfinder_run.run_dir
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["monitor"]["key"] == "macro_f1"
    val = metrics["val"]
    assert val["n"] == 7 * 1024 and len(val["confusion"]) == 3
    assert {"macro_f1", "macro_accuracy", "macro_f1_batchavg", "macro_accuracy_batchavg"} <= set(val)
    assert val["n_batches_batchavg"] == 1  # 7 samples, virtual batches of 4: the incomplete one dropped
    assert (run / "plots" / "figure3_samples.png").read_bytes()[:4] == b"\x89PNG"
    config = json.loads((run / "config.json").read_text())
    assert config["model_overrides"]["bidirectional"] is True and config["data"]["dataset_id"]


def test_training_order_covers_each_epoch_and_is_a_function_of_the_step(pathfinder):
    one = FolderSteps(pathfinder, data_seed=3, batch_size=4)
    assert one.steps_per_epoch == 6 and one.position(13) == (2, 1)
    for epoch in range(3):
        seen = np.concatenate([one.indices(s) for s in range(6 * epoch, 6 * epoch + 6)])
        assert sorted(seen.tolist()) == list(range(24))
    assert not np.array_equal(one.indices(0), one.indices(6))  # epochs are reshuffled
    fresh = FolderSteps(pathfinder, data_seed=3, batch_size=4)  # a resumed process starting at step 15
    assert np.array_equal(fresh.indices(15), one.indices(15))
    ranks = [FolderSteps(pathfinder, data_seed=3, batch_size=4, rank=r, world_size=2) for r in range(2)]
    assert ranks[0].steps_per_epoch == 6
    both = np.concatenate([r.indices(s) for r in ranks for s in range(6)])
    assert sorted(both.tolist()) == list(range(24))  # disjoint shares, together one epoch
    batch = one[7]
    assert batch["inputs"].dtype == torch.uint8 and torch.equal(batch["sample_index"], torch.from_numpy(one.indices(7)))


def test_resumed_folder_run_sees_the_batches_of_an_uninterrupted_one(pathfinder, tmp_path):
    """Weights bit-identical to an uninterrupted run's, across worker counts. Bits depend on the intra-op thread
    count (torch splits reductions by thread), which the harness derives from the CPUs and data.workers: the part
    run records the count it started with (config.json), its resume keeps it although data.workers changes, and the
    uninterrupted run is given the same count (on a 2-core machine the rule would give it 2 threads, the part run
    1: the cause of issue 26's failure)."""
    keys = {**TINY, "eval.val_samples": 4, "eval.test_samples": 4, "train.steps": 14, "train.eval_every": 7,
            "train.schedule_steps": 14}  # 6 steps per epoch: the resumed run crosses two epoch boundaries
    part = ssmbench.evaluate("dlr", "pathfinder", data=pathfinder, out=tmp_path / "part", quiet=True,
                             overrides={**keys, "train.steps": 4, "data.workers": 1})  # stops mid-epoch 0
    threads = json.loads((part.run_dir / "config.json").read_text())["hardware"]["threads"]
    assert threads == part.metrics["threads"]
    full = ssmbench.evaluate("dlr", "pathfinder", data=pathfinder, out=tmp_path / "full", quiet=True,
                             overrides={**keys, "hardware.threads": threads})
    assert resume(part.run_dir, {"train.steps": 14, "data.workers": 0}, quiet=True).metrics["threads"] == threads
    a = torch.load(full.run_dir / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(part.run_dir / "checkpoints" / "last.pt", weights_only=True)["model"]
    for k in a:
        assert torch.equal(a[k], b[k]), k

    def losses(run: Path) -> list:
        return [(r["step"], r.get("loss")) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                if r["split"] == "train"]

    assert losses(part.run_dir) == losses(full.run_dir) and len(losses(full.run_dir)) == 14


# Slow (7 s): torchrun's two ranks each import torch; with tests/harness/runtime/test_ddp.py in `pytest -m slow`.
@pytest.mark.slow
def test_checkpoint_scoring_on_two_ranks_counts_every_folder_sample_once(pathfinder_run, tmp_path):
    ckpt = pathfinder_run.run_dir / "checkpoints" / "best.pt"
    one = score_checkpoint(ckpt, "val", out=tmp_path / "one", quiet=True).metrics["val"]
    exe = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "PYTHONSAFEPATH": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([str(exe), "--standalone", "--nproc-per-node=2", "--no-python",
                             str(Path(sys.executable).with_name("ssmbench")), "eval",
                             "--checkpoint", str(ckpt), "--split", "val", "--out", str(tmp_path / "two"), "-q"],
                            capture_output=True, text=True, env=env, timeout=900, cwd=tempfile.gettempdir())
    assert result.returncode == 0, result.stderr[-3000:]
    two = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert two["world_size"] == 2
    assert two["val"]["confusion"] == one["confusion"] and two["val"]["n"] == 7 * 1024
    assert two["val"]["macro_f1_batchavg"] == pytest.approx(one["macro_f1_batchavg"], rel=1e-12)


# ------------------------------------------------------------------------------------------------------ refusals
def ssmbench_cli(*args: str, data_root: Path | None = None) -> subprocess.CompletedProcess:
    """`ssmbench ARGS` in this process, with `data_root` as $SSMBENCH_DATA."""
    return run_main(*args, env={"SSMBENCH_DATA": str(data_root)} if data_root is not None else None)


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.startswith(("error:", "invalid option:")), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_data_folder_refusals(listops, pathfinder, tmp_path):
    one_line_error(ssmbench_cli("eval", "--task", "pathfinder", "--data", str(tmp_path / "nowhere")),
                   "no dataset folder there", "ssmbench generate pathfinder --size 128")
    one_line_error(ssmbench_cli("eval", "--task", "pathfinder", "--data", str(listops)),
                   "holds task 'listops_subtrees', not 'pathfinder'")
    one_line_error(ssmbench_cli("eval", "--task", "pathfinder", "--size", "64", "--data", str(pathfinder)),
                   "size = 32, not 64", "ssmbench generate pathfinder --size 64")
    stale = shutil.copytree(pathfinder, tmp_path / "stale")
    manifest = json.loads((stale / "manifest.json").read_text())
    (stale / "manifest.json").write_text(json.dumps({**manifest, "task_version": "0"}))
    one_line_error(ssmbench_cli("eval", "--task", "pathfinder", "--data", str(stale)), "version 0")
    (tmp_path / "empty").mkdir()
    one_line_error(ssmbench_cli("eval", "--task", "listops_subtrees", data_root=tmp_path / "empty"),
                   "no listops_subtrees dataset folder", "ssmbench generate listops_subtrees --preset short --n 5000")
    one_line_error(ssmbench_cli("eval", "--task", "cumsum", "--data", str(pathfinder)), "takes no dataset folder")


def test_the_data_root_folder_is_found_by_task_size_and_version(pathfinder, tmp_path, monkeypatch):
    monkeypatch.setenv("SSMBENCH_DATA", str(pathfinder.parent))
    cfg = resolve_run("dlr", "pathfinder", size=32, overrides=TINY)
    assert cfg.data.path == str(pathfinder.resolve()) and cfg.task_config["size"] == 32
    with pytest.raises(DatasetError, match="no pathfinder dataset folder") as caught:
        resolve_run("dlr", "pathfinder", size=48, overrides=TINY)
    assert f"ssmbench generate pathfinder --size 48 --n 2000 --out {pathfinder.parent}" in caught.value.hint


def test_a_causal_only_mixer_on_pathfinder_is_refused_unless_forced(pathfinder, tmp_path):
    args = ["eval", "--task", "pathfinder", "--data", str(pathfinder), "--model", "user_mixers:CumMeanMixer",
            *sum((["-o", f"{k}={v}"] for k, v in TINY.items() if k not in ("model.d_state",)), []),
            "-o", "eval.val_samples=4", "-o", "train.steps=3", "-o", "train.warmup_steps=1"]
    one_line_error(ssmbench_cli(*args, "--out", str(tmp_path / "a")), "causal-only", "-o model.bidirectional=false")
    assert not (tmp_path / "a").exists()
    forced = ssmbench_cli(*args, "-o", "model.bidirectional=false", "--out", str(tmp_path / "b"), "-q")
    assert forced.returncode == 0, forced.stderr
    assert "not the paper's setting" in forced.stderr


def test_a_non_causal_mixer_without_a_direction_argument_runs_on_pathfinder(pathfinder):
    from types import SimpleNamespace

    from ssmbench.harness.training.facts import check_direction

    tiny = {k: v for k, v in TINY.items() if k != "model.d_state"}
    bidirectional_task = SimpleNamespace(causal=False)
    cfg = resolve_run("user_mixers:GlobalMeanMixer", "pathfinder", data=pathfinder, overrides=tiny)
    check_direction(cfg, bidirectional_task)  # accepted: it already sees the whole image
    cfg = resolve_run("user_mixers:CumMeanMixer", "pathfinder", data=pathfinder, overrides=tiny)
    with pytest.raises(SsmbenchError, match="causal-only"):
        check_direction(cfg, bidirectional_task)


def test_cuda_out_of_memory_is_one_line_naming_the_batch_and_precision(pathfinder, tmp_path, monkeypatch):
    import ssmbench.harness.training.trainer as trainer

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total)")

    monkeypatch.setattr(trainer, "train", oom)
    with pytest.raises(SsmbenchError) as caught:
        ssmbench.evaluate("dlr", "pathfinder", data=pathfinder, out=tmp_path / "oom", quiet=True,
                          overrides={**TINY, "eval.val_samples": 4, "train.batch_size": 8})
    err = caught.value
    assert "CUDA out of memory" in err.message and "global batch 8" in err.message and "\n" not in err.message
    assert "-o train.batch_size=4" in err.hint and "--precision bf16" in err.hint


def test_paper_preset_wants_reference_masks(tmp_path, monkeypatch, caplog):
    """`--preset paper` looks for a reference-labelled folder (Table 3's masks) and names the command that makes
    one; on a coverage-labelled folder it trains but says, in one line, that the scores are not comparable."""
    monkeypatch.setenv("SSMBENCH_DATA", str(tmp_path / "empty"))
    with pytest.raises(DatasetError) as err:
        resolve_run("dlr", "pathfinder", "paper", size=128)
    assert "-o label_rule=reference" in err.value.hint
    _, config, _ = resolve_config("pathfinder", size=128)
    folder = generate_dataset("pathfinder", config, out=tmp_path, n=12, split={"train": 4, "val": 4, "test": 4},
                              quiet=True).path
    few = {"eval.metric_batch_size": 4}  # val and test hold 4 samples: one virtual batch of the per-batch metrics
    with caplog.at_level("WARNING"):
        cfg = resolve_run("dlr", "pathfinder", "paper", data=folder, overrides=few)
    assert cfg.task_config["label_rule"] == "coverage"
    lines = [r.getMessage() for r in caplog.records if "not comparable with the paper's" in r.getMessage()]
    assert len(lines) == 1 and "-o label_rule=reference" in lines[0] and "\n" not in lines[0]
    assert "differs in label_rule" in lines[0]
    caplog.clear()
    with caplog.at_level("WARNING"):
        resolve_run("dlr", "pathfinder", "quick", data=folder, overrides=few)  # not a paper run: nothing to say
    assert not [r for r in caplog.records if "not comparable" in r.getMessage()]


def test_a_checkpoint_follows_its_moved_folder_with_data(pathfinder, pathfinder_run, tmp_path):
    """Scoring needs the run's folder; when it moved, `--data NEW` finds it (same scores), and the message says so."""
    ckpt = pathfinder_run.run_dir / "checkpoints" / "best.pt"
    before = score_checkpoint(ckpt, "val", out=tmp_path / "before", quiet=True).metrics["val"]
    moved = tmp_path / "moved"
    shutil.copytree(pathfinder, moved)
    after = score_checkpoint(ckpt, "val", out=tmp_path / "after", quiet=True, data=moved)
    assert after.metrics["val"]["confusion"] == before["confusion"]
    assert after.config.data.path == str(moved.resolve())
    cfg = json.loads((tmp_path / "after" / "config.json").read_text())
    cfg["data"]["path"] = str(tmp_path / "gone")
    from ssmbench.harness.config.run_config import RunConfig
    from ssmbench.harness.feed.folder_feed import eval_set_for

    with pytest.raises(SsmbenchError, match="is gone") as caught:
        eval_set_for(RunConfig.from_json(cfg), "val")
    assert "-o data.path=NEW" in caught.value.hint and "--data NEW" in caught.value.hint
    from ssmbench.harness.scoring import _on_folder

    with pytest.raises(SsmbenchError, match="takes no dataset folder"):  # an atomic run's checkpoint
        _on_folder(resolve_run("dlr", "cumsum", length=32), moved)


def test_an_explicit_size_is_checked_against_the_folder(pathfinder):
    with pytest.raises(DatasetError, match="size = 32, not 64"):
        resolve_run("dlr", "pathfinder", data=pathfinder, overrides={"size": "64"})


def test_cli_model_values_are_typed_like_python_ones(pathfinder):
    """`-o model.d_model=8` (a string from the command line) and 8 give one config and one digest."""
    a = resolve_run("dlr", "pathfinder", data=pathfinder, overrides={"model.d_model": "8",
                                                                           "model.bidirectional": "true",
                                                                           "eval.metric_batch_size": "4"})
    b = resolve_run("dlr", "pathfinder", data=pathfinder, overrides={"model.d_model": 8,
                                                                           "model.bidirectional": True,
                                                                           "eval.metric_batch_size": 4})
    assert a.model_overrides["d_model"] == 8 and a.digest() == b.digest()


def test_paper_preset_at_a_size_the_paper_did_not_run_names_the_sizes_it_did():
    from ssmbench.errors import ConfigError
    from ssmbench.harness.config.presets import resolve_preset
    from ssmbench.registry import get_task
    from ssmbench.task_config import resolve

    with pytest.raises(ConfigError, match="available: dlr_paper/pathfinder128, dlr_paper/pathfinder256"):
        resolve_preset("paper", get_task("pathfinder"), "dlr", resolve("pathfinder", {"size": 32})[0], size=32)


def test_paper_listops_on_other_data_and_too_few_eval_samples_are_said(listops, caplog):
    """A paper ListOps run on the `short` folder says it is not the paper's data; asking for more val samples than
    the split holds says how many are scored."""
    from ssmbench.harness.feed.folder_feed import eval_set_for

    with caplog.at_level("WARNING"):
        cfg = resolve_run("local_attention", "listops_subtrees", "paper", data=listops,
                                overrides={"eval.metric_batch_size": 4})  # the 8-sample folder holds no batch of 32
        data = eval_set_for(cfg.with_overrides({"eval.val_samples": 50}), "val")
    notes = [r.getMessage() for r in caplog.records]
    assert any("not the paper's listops_subtrees data (it differs in min_length" in n and
               "ssmbench generate listops_subtrees --out" in n for n in notes)
    assert data.num_samples == 8 and any("fewer than the 50 asked for: all 8 are scored" in n for n in notes)


def _flip_a_bit_of_row(folder: Path, split: str, row: int) -> Path:
    """A copy-free edit of `folder`: one bit flipped inside the stored chunk of `row` of the split's first shard."""
    manifest = json.loads((folder / "manifest.json").read_text())
    shard = folder / manifest["splits"][split]["shards"][0]["path"]
    with h5py.File(shard, "r") as f:
        offset = f["inputs"].id.get_chunk_info(row).byte_offset
    data = bytearray(shard.read_bytes())
    data[offset + 40] ^= 0x10
    shard.write_bytes(bytes(data))
    return shard


def test_a_damaged_shard_is_one_line_naming_it_and_verify(pathfinder, tmp_path):
    """A flipped bit inside a stored chunk: the run stops before its first step with one line naming the shard and
    `ssmbench verify`, exit 3 as `verify` (was 2, a usage error), not a worker traceback, and leaves no run folder."""
    folder = tmp_path / "damaged"
    shutil.copytree(pathfinder, folder)
    shard = _flip_a_bit_of_row(folder, "train", 0)  # the first stored image
    result = ssmbench_cli("eval", "--model", "dlr", "--task", "pathfinder", "--data", str(folder),
                          "-o", "model.d_model=4", "-o", "model.d_state=8", "-o", "train.steps=12",
                          "-o", "train.warmup_steps=2", "-o", "eval.metric_batch_size=4",
                          "-o", "data.workers=1", "-q", "--out", str(tmp_path / "run"))
    assert result.returncode == 3, result.stderr
    errors = [line for line in result.stderr.splitlines() if not line.startswith("WARNING: ")]  # (8 val samples)
    assert "Traceback" not in result.stderr and len(errors) == 1, result.stderr
    assert shard.name in errors[0] and "ssmbench verify" in errors[0]
    assert not (tmp_path / "run").exists()


def test_a_damaged_row_the_run_would_not_draw_still_stops_it_before_the_first_step(pathfinder, tmp_path):
    """Row 7 of the one test shard is damaged; the run scores only test samples 0-3, so it never decodes row 7 and
    used to train and report (exit 0). The shard files a run will read (train, val and test) are checked against
    the manifest's size and sha256 before the first step: exit 3, one line naming the shard and `ssmbench verify`,
    and no run folder (the test set itself is only built after training)."""
    folder = tmp_path / "damaged"
    shutil.copytree(pathfinder, folder)
    shard = _flip_a_bit_of_row(folder, "test", 7)
    args = ["eval", "--model", "dlr", "--task", "pathfinder", "--data", str(folder), "-o", "model.d_model=4",
            "-o", "model.d_state=8", "-o", "model.n_layers=1", "-o", "train.steps=2", "-o", "train.warmup_steps=1",
            "-o", "train.batch_size=4", "-o", "eval.val_samples=4", "-o", "eval.test_samples=4",
            "-o", "eval.batch_size=4", "-o", "eval.metric_batch_size=4", "-o", "data.workers=0", "-q"]
    result = ssmbench_cli(*args, "--out", str(tmp_path / "run"))
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"shard test/{shard.name} is damaged" in lines[0] and f"ssmbench verify {folder}" in lines[0]
    assert not (tmp_path / "run").exists()


def test_the_shards_a_feed_and_an_eval_set_read_are_checked_before_reading(pathfinder, tmp_path):
    """`FolderFeed.check_files` checks exactly the train shards its steps draw from (all of them from one epoch
    on), an eval set the shards of its samples: a bit flipped in an undrawn row of such a shard is refused, one
    in a shard that is not read is not."""
    from ssmbench.data.folder.checks import DamagedDataError
    from ssmbench.data.read import loader
    from ssmbench.harness.feed.folder_feed import FolderEvalSet, FolderFeed

    folder = tmp_path / "damaged"
    shutil.copytree(pathfinder, folder)
    steps = FolderSteps(folder, data_seed=0, batch_size=4)  # 24 train samples, 3 shards of 8: 6 steps an epoch
    drawn = steps.ds.shards_of(steps.indices(0))
    assert steps.shards_for(0, 1).tolist() == drawn.tolist()
    assert steps.shards_for(3, 9).tolist() == [0, 1, 2] and steps.shards_for(4, 4).tolist() == []
    unread = sorted({0, 1, 2} - set(drawn.tolist()))
    manifest = json.loads((folder / "manifest.json").read_text())
    if unread:  # damage a shard step 0 does not read: its feed still passes
        path = folder / manifest["splits"]["train"]["shards"][unread[0]]["path"]
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        FolderFeed(steps, 0, 1, workers=0).check_files()
    shard = int(drawn[0])
    first = int(steps.ds.shard_starts[shard])
    row = next(r for r in range(first, first + 8) if r not in set(steps.indices(0).tolist()))  # not drawn
    with h5py.File(folder / manifest["splits"]["train"]["shards"][shard]["path"], "r") as f:
        offset = f["inputs"].id.get_chunk_info(row - first).byte_offset
    path = folder / manifest["splits"]["train"]["shards"][shard]["path"]
    data = bytearray(path.read_bytes())
    data[offset + 40] ^= 0x10
    path.write_bytes(bytes(data))
    loader._HASHED.clear()  # the same size, and possibly the same mtime tick as when it was hashed above
    with pytest.raises(DamagedDataError, match=f"shard train/{path.name} is damaged"):
        FolderFeed(steps, 0, 1, workers=0).check_files()
    _flip_a_bit_of_row(folder, "val", 7)
    with pytest.raises(DamagedDataError, match="shard val/.* is damaged"):
        FolderEvalSet.build(folder, "val", n=4)
