"""What in a dataset folder ssmbench wrote, and what state the folder is in (before `generate` touches it).

`generate --overwrite` deletes only the files ssmbench writes (the manifest, card, croissant, preview, fixed
arrays, shards, `.build/` and temporaries); a folder holding anything else is refused, naming a file, so a
mistyped `--out` never loses a user's files. A folder holding nothing but the plan of a run that failed before
its first shard (`.build/plan.json`) is not a build: the next command replaces it.

>>> from pathlib import Path
>>> [is_own(Path(p)) for p in ("manifest.json", "train/shard-00000-of-00004.h5", ".build/x/y.json", "notes.txt")]
[True, True, True, False]
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from ...errors import DatasetError

OWN_TOP = frozenset({"manifest.json", "README.md", "croissant.json", "preview.png", "fixed.npy", ".build"})
"""Top-level names a build or a download writes."""
_SHARD = re.compile(r"^(train|val|test)/shard-\d{5}-of-\d{5}\.h5(\.part|\.tmp\.[0-9a-f]+)?$")
_TEMP = re.compile(r"^[^/]+\.(tmp\.[0-9a-f]+|part)$")


def is_own(rel: Path) -> bool:
    """Whether a path relative to the folder is one ssmbench writes (or its temporary)."""
    text = rel.as_posix()
    return rel.parts[0] in OWN_TOP or bool(_SHARD.match(text) or _TEMP.match(text))


def files_of(path: Path) -> list[Path]:
    """Every file (and symlink) under `path`, relative to it, sorted."""
    return sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file() or p.is_symlink())


def foreign_files(path: Path) -> list[Path]:
    """Files under `path` that ssmbench did not write."""
    return [rel for rel in files_of(path) if not is_own(rel)]


def failed_before_first_shard(path: Path) -> bool:
    """The folder holds only a plan (a run stopped before writing anything): nothing worth keeping."""
    return [rel.as_posix() for rel in files_of(path)] == [".build/plan.json"]


def remove_own_files(path: Path) -> None:
    """Delete what ssmbench wrote in `path` (the folder itself stays if anything else is left); refuse, naming a
    file, when the folder holds files ssmbench did not write."""
    foreign = foreign_files(path)
    if foreign:
        raise DatasetError(f"{path} holds {len(foreign)} file(s) ssmbench did not write (e.g. {foreign[0]}); "
                           "--overwrite deletes only ssmbench's files",
                           "move them away yourself, or choose another --out")
    for rel in files_of(path):
        (path / rel).unlink()
    shutil.rmtree(path / ".build", ignore_errors=True)
    for sub in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(sub.iterdir()):
            sub.rmdir()


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`; None when the file is missing, unreadable or not a JSON object."""
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def finished_build(path: Path, identity: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """(manifest, shards whose size or sha256 disagree with it) when `path` holds a finished build with this
    identity; (None, []) otherwise. A finished folder keeps no `.build/`, so the manifest is what a re-run checks."""
    from ...plain import file_sha256

    manifest = read_json(path / "manifest.json")
    if manifest is None or manifest.get("build_identity") != identity:
        return None, []
    damaged = []
    for split in manifest.get("splits", {}).values():
        for entry in split.get("shards", []):
            file = path / entry["path"]
            if (not file.is_file() or file.stat().st_size != entry["num_bytes"]
                    or file_sha256(file) != entry["sha256"]):
                damaged.append(entry["path"])
    return manifest, damaged


def check_writable(path: Path) -> None:
    """Refuse, in one line, a folder that cannot be created or written: a file on the way, or no permission."""
    import os

    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise DatasetError(f"cannot create {path}: {existing} is a file, not a folder", "choose another --out")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DatasetError(f"cannot write to {existing}: permission denied (or a read-only file system)",
                           "choose a writable --out, or fix the folder's permissions")
