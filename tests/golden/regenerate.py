"""Golden bytes: the content digest and first rows' hashes of a tiny real build of every task, frozen in JSON.

The product promise is that the same (task, version, config, seed) gives the same bytes. `tests/test_golden.py`
rebuilds each tiny dataset and compares it with `tests/golden/<task>.json`; a task whose bytes change must bump its
`version`, and then its golden file is rewritten with this script:

    python tests/golden/regenerate.py TASK [TASK ...]      # or --all
    python tests/golden/regenerate.py --variants           # golden/variants/: the non-default task variants

Each file records what was built (task, version, config, root seed, split sizes), the manifest's
`content_digest` (sha256 over every row's hash, in split and sample order), and for the first rows of each split
the row hash (as the shard writer computes it) and one sha256 per stored field, so a failure names the field.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIZES = {"train": 8, "val": 2, "test": 2}
"""Split sizes of every golden build (12 samples)."""
SAMPLES_PER_SHARD = 4
"""Several shards per split, so shard boundaries are exercised (the digest does not depend on them)."""
FIRST_ROWS = {"train": 2, "val": 1, "test": 1}
"""How many leading rows of each split are recorded row by row."""
SEED = 0
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "select": [{"values": "zeros"}],
    "select_fixed": [{"values": "zeros"}],
    "sort": [{"order": "value"}],
    "induction_heads": [{"layout": "h3"}],
}
"""Task variants kept beside the default (`TaskConfig.added_defaults` keys at another value): each gets its own
golden file, golden/variants/<task>.<key>-<value>.json, built from the tiny config with the variant applied."""


def golden_path(task: str) -> Path:
    return HERE / f"{task}.json"


def regenerate_command(task: str, variant: dict[str, Any] | None = None) -> str:
    return "python tests/golden/regenerate.py --variants" if variant else f"python tests/golden/regenerate.py {task}"


def variant_path(task: str, variant: dict[str, Any]) -> Path:
    return HERE / "variants" / (task + "." + ".".join(f"{k}-{v}" for k, v in sorted(variant.items())) + ".json")


def variant_config(task_name: str, variant: dict[str, Any]) -> dict[str, Any]:
    """The tiny config of `task_name` with `variant` applied, in its JSON form."""
    from support import tiny_config

    return json.loads(json.dumps({**tiny_config(task_name).to_dict(), **variant}))


def field_hash(array: Any) -> str:
    """sha256 of one stored row of one field, prefixed with its dtype and shape (as the content hashes are)."""
    import numpy as np

    from ssmbench.data.make.shards import content_prefix

    a = np.ascontiguousarray(array)
    return hashlib.sha256(content_prefix(a.dtype, a.shape) + a.tobytes()).hexdigest()


def build_record(task_name: str, config_dict: dict[str, Any] | None = None, seed: int = SEED,
                 sizes: dict[str, int] | None = None, samples_per_shard: int = SAMPLES_PER_SHARD) -> dict[str, Any]:
    """Build the tiny dataset for `task_name` in a temporary folder and describe its bytes.

    `config_dict` defaults to the test suite's tiny config of the task (tests/support.py `TINY`); `sizes` to
    `SIZES`. A golden file's own values are passed back in when it is checked.
    """
    sizes = dict(sizes or SIZES)
    import h5py

    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.data.make.shards import row_hashes
    from ssmbench.registry import get_task
    from ssmbench.task_config import from_plain

    task = get_task(task_name)
    if config_dict is None:
        from support import tiny_config

        config = tiny_config(task_name)
    else:
        config = from_plain(task, config_dict)
    with tempfile.TemporaryDirectory(prefix=f"golden-{task_name}-") as tmp:
        result = generate_dataset(task.name, config, out=tmp, n=sum(sizes.values()), split=sizes, seed=seed,
                                  samples_per_shard=samples_per_shard)
        manifest = result.manifest
        assert manifest is not None
        rows: dict[str, list[dict[str, Any]]] = {}
        for split, k in FIRST_ROWS.items():
            shard = manifest["splits"][split]["shards"][0]
            with h5py.File(result.path / shard["path"], "r", locking=False) as h5:
                block = {name: h5[name][:k] for name in h5 if isinstance(h5[name], h5py.Dataset)}
            hashes = row_hashes(block)
            rows[split] = [{"row_sha256": bytes(hashes[i]).hex(),
                            "fields": {name: field_hash(block[name][i]) for name in sorted(block)}}
                           for i in range(k)]
    return {
        "task": task.name, "version": task.version, "config": json.loads(json.dumps(config.to_dict())),
        "root_seed": seed, "sizes": sizes, "samples_per_shard": samples_per_shard,
        "content_digest": manifest["content_digest"], "first_rows": rows,
        "regenerate": regenerate_command(task.name),
    }


def write_record(record: dict[str, Any], path: Path | None = None) -> Path:
    path = path or golden_path(record["task"])
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE.parent))  # tests/, for support.tiny_config
    from ssmbench.registry import tasks

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", nargs="*", help="task names (registered)")
    parser.add_argument("--all", action="store_true", help="every registered task")
    parser.add_argument("--variants", action="store_true", help="the task variants in VARIANTS")
    args = parser.parse_args(argv)
    if args.variants:
        for name, variants in VARIANTS.items():
            for variant in variants:
                record = build_record(name, variant_config(name, variant))
                record["regenerate"] = regenerate_command(name, variant)
                path = write_record(record, variant_path(name, variant))
                print(f"wrote {path.relative_to(HERE.parent.parent)}")
        return 0
    names = tasks.names() if args.all else args.task
    if not names:
        parser.error("name at least one task, or pass --all")
    for name in names:
        path = write_record(build_record(tasks.canonical(name)))
        print(f"wrote {path.relative_to(HERE.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
