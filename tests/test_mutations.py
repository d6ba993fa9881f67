"""Tests that fail when a known mistake is reintroduced: one focused test per mutation a review tried by hand.

Each test names, in its docstring, the mistake it catches. Expected values are hand-computed or come from an
independent recomputation (NumPy / plain Python), never from the code under test.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from ssmbench.data.hub.verify import verify_dataset
from ssmbench.data.make.generate import generate_dataset
from ssmbench.data.make.shards import file_sha256
from ssmbench.errors import DatasetError
from ssmbench.registry import get_task
from ssmbench.seeding import keys_for, sample_keys, splitmix64, stream_id


def sm(x: int) -> int:
    """SplitMix64, written out again from Vigna's reference (independent of ssmbench.seeding)."""
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def rewrite_manifest_entry(root, manifest, split: str, index: int) -> None:
    """After editing a shard in place, make the manifest agree with its new bytes (a consistent forgery)."""
    entry = manifest["splits"][split]["shards"][index]
    path = root / entry["path"]
    entry["sha256"], entry["num_bytes"] = file_sha256(path), path.stat().st_size
    (root / "manifest.json").write_text(json.dumps(manifest))


# ------------------------------------------------------------------------------------------------ seeding


@pytest.mark.parametrize("split,split_id", [("train", 1), ("val", 2), ("test", 3), ("candidates", 4),
                                            ("fixed", 0xF1)])
def test_split_ids_are_frozen(split, split_id):
    """Mutation: a changed split id in seeding (every stored sample of that split would change)."""
    stream, seed = 0x0123456789ABCDEF, 7
    base = sm(sm(sm(seed) ^ stream) ^ split_id)
    assert sample_keys(stream, split, 5, 8, root_seed=seed).tolist() == [sm(base ^ i) for i in (5, 6, 7)]


def test_first_keys_of_a_known_build_are_frozen():
    """Mutation: any change to the key recipe (stream id, split ids, mixing order) for a real (task, config)."""
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert stream_id("shift", "1", {"L": 64, "num_shifts": 8}) == 0x1E7C656AEE33DE19
    assert keys_for("shift", "1", {"L": 64, "num_shifts": 8}, 0, "train", 0, 2).tolist() == [
        0x7F14FDE402CDC3A8, 0x3CE17CB020293BAF]


# ------------------------------------------------------------------------------------------- atomic tasks


def test_shift_lags_are_rounded_down():
    """Mutation: shift lags rounded up. L = 10, H = 3: lags floor(j * 10 / 3) = 0, 3, 6 (rounding up: 0, 4, 7)."""
    task = get_task("shift")
    config = task.Config(L=10, num_shifts=3)
    out = task.generate(config, keys_for("shift", task.version, config.to_dict(), 0, "train", 0, 2))
    for x, y in zip(out["inputs"], out["targets"], strict=True):
        v = x[:, 0]
        for j, lag in enumerate((0, 3, 6)):
            assert (y[:lag, j] == 0).all() and np.array_equal(y[lag:, j], v[:10 - lag]), (j, lag)


def test_select_positions_are_the_marked_indices():
    """Mutation: `positions` off by one. They must equal the indices where the marker channel is 1."""
    task = get_task("select")
    config = task.Config(L=30, M=5)
    out = task.generate(config, keys_for("select", task.version, config.to_dict(), 0, "train", 0, 6))
    for x, positions in zip(out["inputs"], out["positions"], strict=True):
        marks = np.flatnonzero(x[:, 1] == 1.0)
        assert positions.tolist() == marks.tolist()
        assert positions.min() >= 0 and positions.max() < 35  # within the L + M values
    fixed = get_task("select_fixed")
    fconfig = fixed.Config(L=30, M=5)
    x = fixed.generate(fconfig, keys_for("select_fixed", fixed.version, fconfig.to_dict(), 0, "train", 0, 1))
    assert fixed.fixed_arrays(fconfig)["positions"].tolist() == np.flatnonzero(x["inputs"][0, :, 1]).tolist()


# a float32 near-tie: key A scores higher than key B in float32 (kernel order), key B higher in float64
_Q = [float.fromhex(h) for h in ("-0x1.ad2756p-1", "-0x1.c3e3d6p-2", "-0x1.478658p-2", "-0x1.43025cp-6")]
_KEY_A = [float.fromhex(h) for h in ("-0x1.4ef8d6p-1", "0x1.fd543ep-2", "0x1.7ae496p-2", "0x1.bb97e4p-2")]
_KEY_B = [float.fromhex(h) for h in ("-0x1.4ef8d6p-1", "0x1.fd543ap-2", "0x1.7ae498p-2", "0x1.bb97dep-2")]


def test_mips_near_tie_is_decided_in_float64():
    """Mutation: a zero near-tie margin, so a float32 near-tie keeps the float32 winner (here the wrong key)."""
    from ssmbench.generators import mips

    q, a, b = (np.array(v, dtype=np.float32) for v in (_Q, _KEY_A, _KEY_B))
    f = np.float32
    s32 = [((f(q[0] * k[0]) + f(q[1] * k[1])) + f(q[2] * k[2])) + f(q[3] * k[3]) for k in (a, b)]
    s64 = [float(np.dot(q.astype(np.float64), k.astype(np.float64))) for k in (a, b)]
    assert s32[0] > s32[1] and s64[1] > s64[0]  # the premise: float32 and float64 disagree
    L = 16
    queries = np.tile(q, (L, 1))
    keys = np.tile(-q, (L, 1))  # filler keys score -1, far below A and B
    keys[2], keys[5] = a, b  # A first: the float32 scan sees A win, with B only a rounding error behind
    kt32 = np.ascontiguousarray(keys.T)
    winners = np.empty(8, dtype=np.int64)
    got = []
    for i0 in range(0, L, 8):  # queries 0-7 meet A and B on the diagonal block, 8-15 in the screening scan
        mips._argmax_block(kt32, queries, keys.astype(np.float64), queries.astype(np.float64), i0, True, winners)
        got += winners[:min(8, L - i0)].tolist()
    assert got == [0, 0, 2, 2, 2, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]


# ------------------------------------------------------------------------------------------------ ListOps


def test_listops_builds_drop_duplicate_expressions_and_templates(tmp_path):
    """Mutation: skipping ListOps de-duplication (survivors = all candidates). Short expressions repeat their
    operator templates often (18 of the first 48 candidates here, all within the first candidate stream)."""
    task = get_task("listops_subtrees")
    config = task.Config(min_length=4, max_length=20, max_depth=4, max_args=4, pad_to=32)
    result = generate_dataset("listops_subtrees", config, out=tmp_path, n=30, split={"train": 24, "val": 3,
                                                                                        "test": 3},
                              samples_per_shard=8)
    stored: dict[str, list] = {"inputs": [], "candidate_index": []}
    for split in ("train", "val", "test"):
        for shard in result.manifest["splits"][split]["shards"]:
            with h5py.File(result.path / shard["path"], "r") as h5:
                for name in stored:
                    stored[name] += list(h5[name][...])
    # independent oracle: walk the candidates in order; keep one unless its expression or its operator template
    # (tokens above 10: ids 1..10 are the digits) equals that of a candidate kept before it
    cand = task.generate(config, keys_for("listops_subtrees", task.version, config.to_dict(), 0, "candidates", 0, 94))
    kept: list[int] = []
    seen: set[bytes] = set()
    for c, (row, n) in enumerate(zip(cand["inputs"], cand["lengths"], strict=True)):
        tokens = row[:n]
        expression, template = b"e" + tokens.tobytes(), b"t" + tokens[tokens > 10].tobytes()
        if expression not in seen and template not in seen:
            seen |= {expression, template}
            kept.append(c)
    assert len(kept) >= 30 and kept[29] + 1 - 30 == 18  # duplicates exist among the candidates used
    assert [int(c) for c in stored["candidate_index"]] == kept[:30]
    assert np.array_equal(np.stack(stored["inputs"]), cand["inputs"][kept[:30]])
    report = result.manifest["deduplication"]
    assert report["dropped_template_duplicates"] + report["dropped_expression_duplicates"] == 18


# ---------------------------------------------------------------------------------- build identity and resume


def test_a_different_codec_is_a_different_build(tmp_path):
    """Mutation: the codec dropped from the build identity (a resume would mix gzip and uncompressed shards)."""
    config = get_task("cumsum").Config(L=16)
    generate_dataset("cumsum", config, out=tmp_path, n=10, samples_per_shard=4)
    with pytest.raises(DatasetError, match="differs in: codec"):
        generate_dataset("cumsum", config, out=tmp_path, n=10, samples_per_shard=4, codec="none")


def test_resume_rewrites_a_shard_whose_bytes_changed(tmp_path):
    """Mutation: a resume that trusts a shard's sidecar without checking its sha256 (same-size corruption)."""
    config = get_task("cumsum").Config(L=16)
    reference = generate_dataset("cumsum", config, out=tmp_path / "ref", n=12, samples_per_shard=4)
    entry = reference.manifest["splits"]["train"]["shards"][1]
    # a job array of one job writes every shard but does not finalize; then one shard's bytes change
    job = generate_dataset("cumsum", config, out=tmp_path / "jobs", n=12, samples_per_shard=4, shard_index=0,
                           num_shards=1)
    path = job.path / entry["path"]
    assert not job.finalized and file_sha256(path) == entry["sha256"]
    data = bytearray(path.read_bytes())
    data[-200] ^= 0xFF  # same size, different bytes
    path.write_bytes(bytes(data))
    final = generate_dataset("cumsum", config, out=tmp_path / "jobs", n=12, samples_per_shard=4)
    assert final.finalized and final.shards_written == 1
    assert file_sha256(path) == entry["sha256"]
    assert final.manifest["content_digest"] == reference.manifest["content_digest"]
    assert verify_dataset(final.path).ok


# ------------------------------------------------------------------------------------------------- verify


@pytest.fixture
def built(tmp_path):
    result = generate_dataset("cumsum", get_task("cumsum").Config(L=16), out=tmp_path, n=12, samples_per_shard=4)
    return result.path, json.loads((result.path / "manifest.json").read_text())


def test_verify_checks_shard_attributes(built):
    """Mutation: verify skipping the attribute check (a shard from another seed, re-listed with its checksum)."""
    root, manifest = built
    with h5py.File(root / manifest["splits"]["val"]["shards"][0]["path"], "r+") as h5:
        h5.attrs["root_seed"] = 99
    rewrite_manifest_entry(root, manifest, "val", 0)
    problems = verify_dataset(root).problems
    assert any("attribute root_seed is 99" in p for p in problems), problems


def test_verify_checks_dataset_shapes_and_dtypes(built):
    """Mutation: verify skipping the shape/dtype check (a field stored with the wrong per-sample shape)."""
    root, manifest = built
    with h5py.File(root / manifest["splits"]["train"]["shards"][0]["path"], "r+") as h5:
        del h5["targets"]
        h5.create_dataset("targets", data=np.zeros((4, 8, 1), dtype=np.float32))  # stored L/2 instead of L
    rewrite_manifest_entry(root, manifest, "train", 0)
    problems = verify_dataset(root).problems
    assert any("targets is float32(4, 8, 1), expected float32(4, 16, 1)" in p for p in problems), problems


def test_deep_verify_compares_the_content_digest(built):
    """Mutation: deep verify never comparing the content digest (every shard intact, the digest wrong)."""
    root, manifest = built
    manifest["content_digest"] = "0" * 64
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert verify_dataset(root).ok  # the default level does not read contents
    assert verify_dataset(root, deep=True).problems == ["content_digest differs from the manifest"]


# --------------------------------------------------------------------------------------------- statistics


def test_manifest_statistics_sum_every_shard():
    """Mutation: statistics from the last shard only. Three shards' records must add up field by field."""
    from ssmbench.data.make.finalize import merge_statistics

    records = [{"statistics": {"hist": [1, 0, 2], "n": [4]}}, {"statistics": {"hist": [0, 5, 1], "n": [4]}},
               {"statistics": {"hist": [3, 3, 3], "n": [1]}}]
    assert merge_statistics(records) == {"hist": [4, 8, 6], "n": [9]}


def test_pathfinder_statistics_cover_the_whole_split(tmp_path):
    """The same, end to end: train statistics of a 4-shard build equal those of all train samples at once."""
    from support import tiny_config

    task, config = get_task("pathfinder"), tiny_config("pathfinder")
    result = generate_dataset("pathfinder", config, out=tmp_path, n=20, samples_per_shard=4)
    train = task.generate(config, keys_for("pathfinder", task.version, config.to_dict(), 0, "train", 0, 16,
                                           task.stream_exempt))
    stats = result.manifest["statistics"]["train"]
    assert len(result.manifest["splits"]["train"]["shards"]) == 4
    assert sum(stats["connected"]) == 16 and sum(stats["class_pixels"]) == 16 * 32 * 32
    assert stats["class_pixels"] == np.bincount(train["targets"].reshape(-1), minlength=3).tolist()
    assert stats["connected"] == np.bincount(train["label"].astype(np.int64), minlength=2).tolist()


# ------------------------------------------------------------------------------- configs: values and selectors


def test_null_and_none_both_mean_none_for_an_optional_key():
    """Mutation: 'null' no longer read as None (config.py). JSON and TOML users write null; both spellings, any
    case, give None for an optional key, and stay text for a plain str key."""
    from ssmbench.config import parse_value

    for text in ("null", "NULL", " none ", "None"):
        assert parse_value(text, int | None, "k") is None, text
    assert parse_value("null", str, "k") == "null"


def test_a_fractional_value_of_an_integer_key_is_refused():
    """Mutation: '2.5' read as the int 2 (config.py). A whole number written as a float or in e-notation is an int;
    a fraction is an error naming the key, never truncated."""
    from ssmbench.config import parse_value
    from ssmbench.errors import ConfigError

    assert parse_value("2.0", int, "k") == 2 and parse_value("1e3", int, "k") == 1000
    for text in ("2.5", "0.1", "1e-3"):
        with pytest.raises(ConfigError, match="k: cannot parse"):
            parse_value(text, int, "k")


@pytest.mark.parametrize("task,option,field,given,value", [("shift", "length", "L", 512, 1024),
                                                           ("pathfinder", "size", "size", 128, 256)])
def test_a_selector_option_that_disagrees_with_its_config_value_is_refused(task, option, field, given, value):
    """Mutation: no error when `--size` / `--length` disagree with `-o size=` / `-o L=` (task_config.py): one of
    the two would be dropped silently. Equal values are fine."""
    from ssmbench.errors import ConfigError
    from ssmbench.task_config import resolve

    with pytest.raises(ConfigError, match=f"{given} disagrees with {field} = {value}"):
        resolve(task, {field: str(value)}, **{option: given})
    assert getattr(resolve(task, {field: str(given)}, **{option: given})[0], field) == given


def test_explicit_values_keep_the_selector_field():
    """Mutation: `explicit_values` drops the selector field (task_config.py) when it equals what the selector
    itself resolves to -- always, for a length task -- so a stored config loses its L. Shift's defaults
    (num_shifts 8) are not user choices; L always is."""
    from ssmbench.task_config import explicit_values

    assert explicit_values("shift", {"L": 512, "num_shifts": 8}) == {"L": 512}
    assert explicit_values("shift", {"L": 700, "num_shifts": 8}) == {"L": 700}
    assert explicit_values("shift", {"L": 512, "num_shifts": 4}) == {"L": 512, "num_shifts": 4}


# ---------------------------------------------------------------------------------------------- chunk rows


def test_rows_of_a_dataset_chunked_across_the_row_are_read_whole(tmp_path):
    """Mutation: the one-row-chunk check weakened to `chunk[0] == 1` (chunk_rows.py). A dataset chunked (1, 8)
    over rows of 16 has two chunks a row: the chunk reader would return half a row (or fail); it must fall back to
    h5py and read every row exactly."""
    from ssmbench.data.read.chunk_rows import rows_reader

    data = np.arange(4 * 16, dtype=np.int16).reshape(4, 16) * 3 - 50
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("x", data=data, chunks=(1, 8), shuffle=True, compression="gzip", fletcher32=True)
    with h5py.File(tmp_path / "a.h5", "r") as f:
        reader = rows_reader(f["x"])
        out = np.zeros((3, 16), np.int16)
        reader.read_into(out, np.array([0, 1, 2]), np.array([3, 0, 2]))
    assert type(reader).__name__ == "DatasetRows"
    assert out.tolist() == [list(range(3 * 48 - 50, 3 * 64 - 50, 3)), list(range(-50, -2, 3)),
                            list(range(3 * 32 - 50, 3 * 48 - 50, 3))]


# -------------------------------------------------------------------------------------------------- memory


def test_the_memory_estimate_counts_the_samples_of_one_rank(monkeypatch):
    """Mutation: the batch per rank ignores the world size (memory.py). Linear(8, 8): 72 parameters x 4 bytes =
    288; four copies (weights, gradients, two AdamW moments) = 1,152 bytes; a faked probe saves 100 bytes a
    sample; batch 8 over 4 ranks = 2 samples a rank: 1,152 + 200 = 1,352 (not 1,152 + 800)."""
    import types

    import torch

    from ssmbench.harness.training import memory

    monkeypatch.setattr(memory, "saved_bytes_per_sample", lambda model, x: 100)

    def setup(batch_size: int, world_size: int):
        return types.SimpleNamespace(model=torch.nn.Linear(8, 8), cfg=types.SimpleNamespace(
            train=types.SimpleNamespace(batch_size=batch_size)), env=types.SimpleNamespace(world_size=world_size))

    x1 = torch.zeros(1, 4, 8)
    assert memory.estimate(setup(8, 4), x1) == {"parameter_bytes": 288, "saved_bytes_per_sample": 100,
                                                "estimated_peak_bytes": 1352}
    assert memory.estimate(setup(8, 1), x1)["estimated_peak_bytes"] == 1152 + 800
    assert memory.estimate(setup(3, 4), x1)["estimated_peak_bytes"] == 1152 + 100  # at least one sample a rank


def test_free_cpu_memory_is_memavailable_not_memfree(tmp_path):
    """Mutation: MemFree read instead of MemAvailable (memory.py): page cache the kernel would give back counts as
    used, and runs that fit are refused. A faked /proc/meminfo (MemFree listed first, as the kernel does)."""
    import torch

    from ssmbench.harness.training.memory import free_bytes

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000 kB\nMemFree:          300 kB\nMemAvailable:    9000 kB\n"
                       "Buffers:          100 kB\n")
    assert free_bytes(torch.device("cpu"), meminfo) == 9000 * 1024
    meminfo.write_text("MemTotal:       16000 kB\nMemFree:          300 kB\n")  # a kernel without MemAvailable
    assert free_bytes(torch.device("cpu"), meminfo) is None
    assert free_bytes(torch.device("cpu"), tmp_path / "absent") is None


# ------------------------------------------------------------------------------------------------- threads


def test_cgroup_quota_is_quota_over_period(tmp_path):
    """Mutation: the cgroup quota inverted (threads.py): 150000 us per 100000 us period is 1.5 CPUs (not 0.67);
    v1 files likewise; no quota is None."""
    from ssmbench.harness.runtime.threads import cgroup_cpu_limit

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_limit(v2) == 1.5
    (v2 / "cpu.max").write_text("50000 100000\n")
    assert cgroup_cpu_limit(v2) == 0.5
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(v2) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_limit(v1) == 3.0
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_limit(v1) is None
    assert cgroup_cpu_limit(tmp_path / "none") is None


def test_usable_cpus_is_the_affinity_capped_by_the_quota_rounded_up(monkeypatch):
    """The affinity mask (8 CPUs, faked) capped by a 1.5-CPU quota: ceil(1.5) = 2; no quota: 8."""
    import os

    from ssmbench.harness.runtime import threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda root=None: 1.5)
    assert threads.usable_cpus() == 2
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda root=None: None)
    assert threads.usable_cpus() == 8


@pytest.mark.parametrize("cpus,workers,threads_", [(4, 1, 3), (4, 0, 4), (4, 3, 1), (4, 4, 1), (2, 1, 1)])
def test_threads_are_usable_cpus_minus_data_workers(monkeypatch, cpus, workers, threads_):
    """Mutation: the worker count off by one (threads.py). threads = usable CPUs - data workers, at least 1."""
    from ssmbench.harness.runtime import threads

    monkeypatch.setattr(threads, "usable_cpus", lambda: cpus)
    assert threads.choose_threads(None, workers, environ={}) == (
        threads_, f"usable CPUs ({cpus}) - data workers ({workers})")


def test_apply_threads_sets_torchs_thread_count():
    """Mutation: the chosen thread count never applied (threads.py): torch keeps its own count."""
    import torch

    from ssmbench.harness.runtime.threads import apply_threads

    before = torch.get_num_threads()
    target = 2 if before == 1 else 1
    try:
        assert apply_threads(target, 0) == {"threads": target, "threads_rule": "hardware.threads"}
        assert torch.get_num_threads() == target
    finally:
        torch.set_num_threads(before)


# -------------------------------------------------------------------------------------------------- suites


def test_the_seeds_are_part_of_the_suite_folder(tmp_path):
    """Mutation: the seeds left out of the suite folder's digest (suites.py): `--seeds 0,1` and `--seeds 2,3`
    would share one folder, and the second command would report the first one's runs as "finished earlier"."""
    import types

    from ssmbench.harness.suites import run_suite

    made: list = []

    def evaluate(model, task, preset, out=None, quiet=False, **kwargs):
        made.append((out.parent, out.name, kwargs.get("seed")))
        return types.SimpleNamespace(metrics={"wall_time_s": 0.0})

    def resume(*args, **kwargs):  # pragma: no cover - nothing to resume in fresh folders
        raise AssertionError("nothing to resume")

    folders = [run_suite("dlr", "shift", evaluate, resume, runs_root=tmp_path, seeds=seeds, quiet=True)[0]
               for seeds in ([0, 1], [2, 3], None)]
    assert len(set(folders)) == 3
    assert [(name, seed) for _, name, seed in made] == [("shift-seed0", 0), ("shift-seed1", 1),
                                                        ("shift-seed2", 2), ("shift-seed3", 3), ("shift", None)]
    again = run_suite("dlr", "shift", evaluate, resume, runs_root=tmp_path, seeds=[2, 3], quiet=True)[0]
    assert again == folders[1]  # the same command finds its folder again


# ---------------------------------------------------------------------------------------------- Pathfinder


def test_pathfinder_lra_oracle_requires_both_circles_drawn():
    """Mutation: the LRA Pathfinder oracle no longer requires both circles drawn (generators/pathfinder_lra.py).
    Label 1 iff the two circle centres are the origin and terminal of one main path and the image is non-zero at
    both centres."""
    task = get_task("pathfinder_lra")
    config = task.presets["32"]
    image = np.zeros((32, 32), np.uint8)
    image[4, 5], image[20, 21] = 255, 128
    tips = np.array([[[9, 9], [12, 12]], [[4, 5], [20, 21]]], np.int16)  # path 1 joins the two centres
    centres = np.array([[4, 5], [20, 21]], np.int16)

    def label(img, t=tips):
        return int(task.oracle(config, {"inputs": img, "tips": t, "marker_centres": centres})["targets"])

    assert label(image) == 1
    assert label(image, tips[::-1].copy()) == 1  # either path may be the one
    assert label(image, np.array([[[4, 5], [12, 12]], [[9, 9], [20, 21]]], np.int16)) == 0  # ends on two paths
    for y, x in centres:  # one circle not drawn
        blank = image.copy()
        blank[y, x] = 0
        assert label(blank) == 0
