"""`ssmbench get NAME`: a catalogue dataset, downloaded from its mirror or rebuilt here, checked shard by shard.

The folder lands in `<data root>/NAME` (where `ssmbench.open_dataset(NAME)` looks for it).

A catalogue entry (`ssmbench.data.catalog`) pins what the dataset *is*: the generate command, the content digest
and every shard's size, sha256 and per-field content hashes. `get_dataset` fetches the folder from the entry's
`sources` when it has any (`ssmbench.data.download`), else rebuilds it with the entry's `build.argv` and workers
into a staging folder beside the destination, then compares every shard with the entry:

* equal sha256 everywhere (and the content digest): the folder is moved into place;
* a shard whose decoded content differs is a `VerificationError` (exit 3) naming the first such shard and field
  and the facts that could explain it (NumPy, Numba, h5py versions and the CPU, here and in the entry); nothing is
  moved into place, and the rebuilt copy stays in the staging folder for inspection;
* equal content with other file bytes happens only when the library versions recorded in each shard's attributes
  differ from the entry's; that is reported in `notes` and accepted, since every array is byte-identical.

`check_against_entry` is the comparison, shared with `ssmbench verify DIR --catalog`. Example (the reduced twin
of shift-4096 that the tests rebuild, a few seconds)::

    >>> from ssmbench.data.get import get_dataset
    >>> result = get_dataset("shift-4096-ci", to="data")                        # doctest: +SKIP
    >>> result.path, result.how, len(result.checked)                            # doctest: +SKIP
    (PosixPath('data/shift-4096-ci'), 'built', 3)
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DatasetError, VerificationError
from .catalog import CatalogEntry, find_entry


@dataclass
class GetResult:
    path: Path
    name: str
    how: str  # "present", "downloaded" or "built"
    checked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "how": self.how, "checked_shards": len(self.checked),
                "notes": self.notes}


def machine_facts() -> dict[str, str]:
    """What could make this machine's bytes differ: library versions and the CPU."""
    import h5py
    import numba
    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"numpy": np.__version__, "numba": numba.__version__, "h5py": h5py.__version__,
            "hdf5": h5py.version.hdf5_version, "platform": platform.machine(), "cpu": cpu}


def _facts_line(entry: CatalogEntry) -> str:
    here = machine_facts()
    theirs = entry.environment
    parts = [f"{k} {here[k]}" + (f" (catalogue: {theirs[k]})" if theirs.get(k) and theirs[k] != here[k] else "")
             for k in ("numpy", "numba", "h5py", "hdf5", "platform")]
    return f"this machine: {', '.join(parts)}, CPU {here['cpu']}"


def check_against_entry(folder: Path, entry: CatalogEntry) -> tuple[list[str], list[str]]:
    """(checked shard paths, notes); a VerificationError at the first shard whose content differs from `entry`."""
    if not entry.shards:
        raise DatasetError(f"catalogue entry {entry.name!r} lists no shards to check against",
                           "use a catalogue entry written by benchmarks/paper_suite.py")
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    built = {sh["path"]: sh for s in ("train", "val", "test") for sh in manifest["splits"][s]["shards"]}
    unlisted = sorted(set(built) - {sh["path"] for sh in entry.shards})
    checked: list[str] = []
    containers: list[str] = []
    for want in [*entry.shards, *({"path": p, "sha256": None, "content": {}} for p in unlisted)]:
        got = built.get(want["path"])
        if got is None or want["sha256"] is None:
            where = "is missing here" if got is None else "is not in the catalogue entry"
            raise VerificationError(f"{folder}: shard {want['path']} {where} (the split or shard plan differs); "
                                    f"{_facts_line(entry)}")
        if got["sha256"] != want["sha256"]:
            fields = [k for k, h in want.get("content", {}).items()
                      if not got.get("content_sha256", {}).get(k, "").startswith(h)]
            if fields or not want.get("content"):
                what = f"field {fields[0]!r}" if fields else "its file bytes (no content hashes to compare)"
                raise VerificationError(f"{folder}: {want['path']} differs from catalogue entry {entry.name!r} "
                                        f"in {what}; {_facts_line(entry)}")
            containers.append(want["path"])
        checked.append(want["path"])
    notes = []
    if entry.content_digest and manifest["content_digest"] != entry.content_digest:
        raise VerificationError(f"{folder}: content digest {manifest['content_digest'][:16]}... differs from the "
                                f"catalogue's {entry.content_digest[:16]}...; {_facts_line(entry)}")
    if containers:
        notes.append(f"{len(containers)} shard(s) (first {containers[0]}) have equal content but other file bytes: "
                     f"their attributes record this machine's library versions ({_facts_line(entry)})")
    return checked, notes


def _rebuild(entry: CatalogEntry, staging: Path, workers: int | None, quiet: bool) -> Path:
    exe = Path(sys.executable).with_name("ssmbench")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "ssmbench"]
    w = workers or int(entry.build.get("workers") or 1)
    args = [*cmd, *entry.build["argv"], "--workers", str(w), "--out", str(staging), "--json"]
    if quiet:
        args.append("-q")
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    if proc.returncode:
        raise DatasetError(f"rebuilding {entry.name} failed (ssmbench {' '.join(entry.build['argv'])} exited "
                           f"{proc.returncode})", "see the message above; re-run the same command to continue")
    return Path(json.loads(proc.stdout)["path"])


def get_dataset(name: str, to: str | Path | None = None, *, catalog: str | Path | Sequence[str | Path] | None = None,
                workers: int | None = None, quiet: bool = False, rebuild: bool = False) -> GetResult:
    """Fetch or rebuild the catalogue dataset `name` into `<to>/<folder>` and check every shard against its entry."""
    from .build import data_root

    entry = find_entry(name, catalog)
    root = data_root(to)
    dest = root / entry.name  # where open_dataset(name) and `download NAME` look
    if (dest / "manifest.json").exists():
        checked, notes = check_against_entry(dest, entry) if entry.shards else ([], [])
        return GetResult(dest, name, "present", checked, notes)
    if entry.sources and not rebuild:
        from .download import download_dataset

        result = download_dataset(entry, to=root, progress=not quiet)
        checked, notes = check_against_entry(result.path, entry) if entry.shards else ([], [])
        return GetResult(result.path, name, "downloaded", checked, notes)
    if not entry.build:
        raise DatasetError(f"catalogue entry {name!r} has neither sources nor a build command", "fix the catalogue")
    staging = root / f".get-{entry.name}"
    built = _rebuild(entry, staging, workers, quiet)
    checked, notes = check_against_entry(built, entry)
    root.mkdir(parents=True, exist_ok=True)
    os.replace(built, dest)
    shutil.rmtree(staging, ignore_errors=True)
    return GetResult(dest, name, "built", checked, notes)


def entry_for_folder(folder: Path, catalog: str | Path | Sequence[str | Path] | None = None) -> CatalogEntry:
    """The catalogue entry describing `folder`: by folder name, else by dataset id (the content digest decides)."""
    from .catalog import load_catalog

    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    cat = load_catalog(catalog)
    if Path(folder).name in cat and cat[Path(folder).name].dataset_id in (None, manifest["dataset_id"]):
        return cat[Path(folder).name]
    same = [cat[n] for n in cat if cat[n].dataset_id == manifest["dataset_id"]]
    exact = [e for e in same if e.content_digest == manifest["content_digest"]]
    if exact or same:
        return (exact or same)[0]
    raise DatasetError(f"no catalogue entry describes {folder} (dataset id {manifest['dataset_id']})",
                       "list the entries with `ssmbench ls datasets`; add a catalogue with --catalog FILE")


def verify_catalog(folder: str | Path, catalog: str | Path | Sequence[str | Path] | None = None) -> dict[str, Any]:
    """`verify DIR --catalog`: every shard of `folder` against its catalogue entry (VerificationError if not)."""
    entry = entry_for_folder(Path(folder), catalog)
    checked, notes = check_against_entry(Path(folder), entry)
    return {"entry": entry.name, "catalog": entry.catalog, "checked_shards": len(checked), "notes": notes}


def entry_from_folder(folder: Path, argv: list[str], workers: int, build: dict[str, float] | None = None,
                      description: str = "") -> dict[str, Any]:
    """A catalogue entry (JSON) for a verified folder built by `ssmbench <argv> --workers <workers>`."""
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    shards = [{"path": sh["path"], "num_bytes": sh["num_bytes"], "sha256": sh["sha256"],
               "content": {k: v[:16] for k, v in sorted(sh["content_sha256"].items())}}
              for split in ("train", "val", "test") for sh in manifest["splits"][split]["shards"]]
    files = [f for f in manifest.get("files", []) if f["path"] != "preview.png"]
    return {
        "description": description or manifest["name"], "task": manifest["task"],
        "task_version": str(manifest["task_version"]), "dataset_id": manifest["dataset_id"], "folder": manifest["name"],
        "content_digest": manifest["content_digest"],
        "build": {"argv": list(argv), "workers": workers,
                  **{k: round(float(v), 1) for k, v in (build or {}).items() if k in ("wall_s", "cpu_s")}},
        "codec": {k: f"{v['codec']}{'+shuffle' if v['shuffle'] else ''}"
                  for k, v in sorted(manifest["storage"]["fields"].items())},
        "environment": {k: manifest["environment"][k] for k in ("numpy", "numba", "h5py", "hdf5", "platform")},
        "num_samples": {s: manifest["splits"][s]["num_samples"] for s in ("train", "val", "test")},
        "num_bytes": sum(sh["num_bytes"] for sh in shards) + sum(f["num_bytes"] for f in files),
        "files": [{"path": f["path"], "num_bytes": f["num_bytes"], "sha256": f["sha256"]} for f in files],
        "shards": shards,
    }


def resolve_dataset(name_or_path: str | Path, *, catalog: str | Path | Sequence[str | Path] | None = None,
                    data_root: str | Path | None = None, download: bool = True, split: str | None = None) -> Path:
    """A dataset folder from a path, or from a name: `<data root>/<name>`, downloaded when missing.

    A path (an existing folder, or anything containing a path separator) must hold a `manifest.json`. A name is
    looked up in the data root first (`data_root`, else `$SSMBENCH_DATA`, else `./data`), then in the catalogues;
    when `download` is false a missing folder is a DatasetError naming the `ssmbench download` command. With
    `split`, a download fetches only that split (plus the manifest and card), and a folder downloaded earlier
    without it gets it added; an entry without a mirror is rebuilt whole (`ssmbench get`).
    """
    from .build import data_root as default_root
    from .download import download_dataset, looks_like_url

    text = str(name_or_path)
    path = Path(name_or_path)
    if isinstance(name_or_path, Path) or path.is_dir() or os.sep in text or "/" in text or text.startswith("."):
        if looks_like_url(text):
            raise DatasetError(f"{text} is a URL", f"download it first: ssmbench download {text} --to DIR")
        if not (path / "manifest.json").exists():
            raise DatasetError(f"no dataset at {path}: manifest.json not found",
                               "pass a dataset folder made by `ssmbench generate` or `ssmbench download`")
        return path
    root = default_root(data_root)
    local = root / text
    splits = [split] if split else None
    if (local / "manifest.json").exists():
        if not (download and split and _split_left_out(local, split)):
            return local
        return download_dataset(find_entry(text, catalog, searched=root), to=root, splits=splits).path
    entry = find_entry(text, catalog, searched=root)
    if not download:
        raise DatasetError(f"dataset {text!r} is not in {root}",
                           f"fetch it with: ssmbench download {text} --to {root}")
    if not entry.sources:
        return get_dataset(text, root, catalog=catalog).path
    return download_dataset(entry, to=root, splits=splits).path


def _split_left_out(folder: Path, split: str) -> bool:
    """Whether a partial download of `folder` left out shards of `split` (val or validation, train, test)."""
    from .shards import SPLIT_ALIASES
    from .verify import absent_by_selection

    prefix = SPLIT_ALIASES.get(split, split) + "/"
    return any(p.startswith(prefix) for p in absent_by_selection(folder))
