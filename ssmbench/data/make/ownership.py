"""Who owns a shard's temporary files: a lock per shard, so runs that share a folder never delete each other's work.

Several runs may write one dataset folder at once: the jobs of a job array, a plain run that finishes what they
left, or the same command started twice. Each shard job holds the shard's lock, `.build/locks/<split>/<shard>.lock`
(a `filelock` lock, released by the OS when the process dies), for as long as it writes the shard's temporaries
(`<shard>.h5.tmp.<hex>`, and those of its sidecar and row hashes). So:

* a run only deletes a temporary whose shard lock it holds: stale ones (left by a killed run) go when the shard
  is next written, or in the sweep before finalize; a live run's temporaries are never touched;
* a run that finds a shard's lock taken waits, then skips the shard if the other run finished it;
* a temporary that vanishes while being looked at belongs to someone else and is left alone.

>>> temporary_owner(Path("train/shard-00001-of-00004.h5.tmp.0a1b"))
('train', 'shard-00001-of-00004')
>>> temporary_owner(Path(".build/.build/candidates/shard-00002-of-00000.rows.npy.tmp.ff"))
('candidates', 'shard-00002-of-00000')
>>> temporary_owner(Path("manifest.json.tmp.0a1b")) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .shards import ShardSpec

LOCKS = Path(".build") / "locks"
"""Lock files, relative to the dataset folder (removed with `.build/` at finalize)."""
_OWNED = re.compile(r"(?:^|/)(train|val|test|candidates)/(shard-\d{5}-of-\d{5})\.(?:h5|json|rows\.npy)\.tmp\.[0-9a-f]+$")


def lock_path(folder: Path, shard: ShardSpec) -> Path:
    """The lock file of `shard` (final or candidate) in the dataset folder `folder`."""
    return folder / LOCKS / f"{shard.relpath[:-3]}.lock"


def temporary_owner(rel: Path) -> tuple[str, str] | None:
    """(split, shard stem) owning a shard temporary (path relative to the folder); None for other files."""
    match = _OWNED.search(rel.as_posix())
    return (match.group(1), match.group(2)) if match else None


@contextmanager
def hold(path: Path, blocking: bool = True) -> Iterator[bool]:
    """Hold the lock file `path` (created with its folders); yields False when `blocking` is off and it is taken.

    A folder removed under a waiting lock (another run finalized and deleted `.build/`) is created again.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(path))
    for _ in range(100):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire(timeout=-1 if blocking else 0)
            break
        except Timeout:
            yield False
            return
        except FileNotFoundError:  # .build/ went away between mkdir and open: try again
            continue
    else:
        raise RuntimeError(f"could not create the lock file {path}")
    try:
        yield True
    finally:
        lock.release()


def remove_shard_temporaries(folder: Path, root: Path, shard: ShardSpec) -> int:
    """Delete the temporaries of `shard` under `root` (the folder, or `.build/` for candidates); call it holding
    the shard's lock. Returns how many went."""
    names = (root / shard.relpath, root / shard.sidecar, root / shard.rowhashes)
    count = 0
    for target in names:
        if not target.parent.is_dir():
            continue
        for tmp in target.parent.glob(f"{target.name}.tmp.*"):
            tmp.unlink(missing_ok=True)
            count += 1
    return count


def sweep_temporaries(folder: Path, own: frozenset[str] = frozenset()) -> int:
    """Delete stale temporaries anywhere under `folder`: a shard's only when its lock is free (no live run writes
    it), any other only when its name (relative to `folder`, before `.tmp.`) is in `own` (files whose writer the
    caller excludes by a lock of its own, such as the finalize lock and `manifest.json`). Returns how many went."""
    count = 0
    for tmp in sorted(folder.rglob("*.tmp.*")):
        rel = tmp.relative_to(folder)
        owner = temporary_owner(rel)
        if owner is None:
            if rel.as_posix().split(".tmp.")[0] in own:
                tmp.unlink(missing_ok=True)
                count += 1
            continue
        with hold(folder / LOCKS / owner[0] / f"{owner[1]}.lock", blocking=False) as free:
            if free and tmp.exists():
                tmp.unlink(missing_ok=True)
                count += 1
    return count
