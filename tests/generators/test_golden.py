"""Golden bytes: the same (task, version, config, seed) gives the same bytes, for every registered task.

Each task's tiny dataset is built for real (12 samples, shards of 4) and compared with `tests/golden/<task>.json`:
the manifest's content digest and, for the first rows of each split, the row hash and each field's hash. A change
without a version bump fails and names the task, the split, the row and the field; after a version bump the test
asks for the golden file to be regenerated (`python tests/golden/regenerate.py TASK`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ssmbench.registry import get_task, tasks
from ssmbench.task_config import from_plain
from support import TESTS, load_file

GOLDEN = TESTS / "golden"
regen = load_file(GOLDEN / "regenerate.py", "golden_regenerate")


def differences(golden: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """Human-readable differences between a golden record and a fresh one (empty when the bytes agree)."""
    out = []
    for split in ("train", "val", "test"):
        for i, row in enumerate(golden["first_rows"][split]):
            now = fresh["first_rows"][split][i]
            if row["row_sha256"] == now["row_sha256"]:
                continue
            names = sorted(set(row["fields"]) | set(now["fields"]))
            changed = [n for n in names if row["fields"].get(n) != now["fields"].get(n)]
            out.append(f"{split} row {i}: field(s) {', '.join(changed) or '(none: row hashing changed)'} differ")
    if golden["content_digest"] != fresh["content_digest"]:
        out.append(f"content_digest {golden['content_digest'][:16]}... is now {fresh['content_digest'][:16]}...")
    return out


def check_against_golden(task_name: str, variant: dict[str, Any] | None = None) -> None:
    path = regen.variant_path(task_name, variant) if variant else regen.golden_path(task_name)
    command = regen.regenerate_command(task_name, variant)
    if not path.exists():
        pytest.fail(f"task {task_name!r} has no golden bytes ({path.name}); create them with: {command}")
    golden = json.loads(path.read_text())
    task = get_task(task_name)
    if task.version != golden["version"]:
        pytest.fail(f"task {task_name!r} is now version {task.version}, its golden bytes are for version "
                    f"{golden['version']}: regenerate them with: {command}")
    config = from_plain(task, golden["config"])
    if json.loads(json.dumps(config.to_dict())) != golden["config"]:
        pytest.fail(f"task {task_name!r}: the recorded config now serialises as {config.to_dict()} (fields added "
                    f"or removed), which changes its sample keys and bytes; bump {type(task).__name__}.version "
                    f"and regenerate: {command}")
    fresh = regen.build_record(task_name, golden["config"], golden["root_seed"], golden["sizes"],
                               golden["samples_per_shard"])
    diffs = differences(golden, fresh)
    if diffs:
        pytest.fail(f"the bytes of task {task_name!r} (version {task.version}, seed {golden['root_seed']}, config "
                    f"{golden['config']}) changed without a version bump:\n  " + "\n  ".join(diffs)
                    + f"\nIf the change is intended, bump {type(task).__name__}.version (and its data card), then "
                      f"run: {command}")


def test_golden_bytes(task_name):
    check_against_golden(task_name)


@pytest.mark.parametrize("task_name,variant", [(t, v) for t, vs in regen.VARIANTS.items() for v in vs],
                         ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x.items()))
def test_golden_bytes_of_task_variants(task_name, variant):
    check_against_golden(task_name, variant)


@pytest.mark.parametrize("task_name,variant", [(t, v) for t, vs in regen.VARIANTS.items() for v in vs],
                         ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x.items()))
def test_a_variant_is_a_dataset_of_its_own_and_the_default_keeps_its_identity(task_name, variant):
    """The variant key enters the identity (config, sample keys, content) only at its non-default value."""
    default = json.loads(regen.golden_path(task_name).read_text())
    variant_record = json.loads(regen.variant_path(task_name, variant).read_text())
    assert not set(variant) & set(default["config"]), "a variant key at its default must stay out of the identity"
    assert {**default["config"], **variant} == variant_record["config"]
    assert variant_record["content_digest"] != default["content_digest"]
    task = get_task(task_name)
    for key in variant:
        assert key in type(from_plain(task, default["config"])).added_defaults


def test_every_golden_file_belongs_to_a_registered_task():
    stale = [p.name for p in GOLDEN.glob("*.json") if p.stem not in tasks]
    assert not stale, f"golden files without a registered task: {stale}"
    for path in GOLDEN.glob("*.json"):
        record = json.loads(path.read_text())
        assert record["task"] == path.stem and record["regenerate"] == regen.regenerate_command(path.stem)
        assert set(record["first_rows"]) == {"train", "val", "test"}


def test_a_changed_field_is_named():
    golden = json.loads(regen.golden_path("shift").read_text())
    fresh = json.loads(json.dumps(golden))
    fresh["first_rows"]["val"][0]["fields"]["targets"] = "0" * 64
    fresh["first_rows"]["val"][0]["row_sha256"] = "1" * 64
    fresh["content_digest"] = "2" * 64
    fresh["first_rows"]["train"][1]["fields"]["sample_id"] = "3" * 64
    fresh["first_rows"]["train"][1]["row_sha256"] = "4" * 64
    assert differences(golden, fresh) == [
        "train row 1: field(s) sample_id differ",
        "val row 0: field(s) targets differ",
        f"content_digest {golden['content_digest'][:16]}... is now {'2' * 16}..."]
    assert differences(golden, golden) == []
