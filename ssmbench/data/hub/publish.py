"""Prepare a release folder for the Hugging Face Hub (or any host) and print the exact upload commands.

`publish(dataset, to)` verifies the dataset folder (every file against its manifest), refuses what must not be
published (a partial download, a Zstd copy: published shards stay gzip so every HDF5 reader opens them), and
writes `<to>/<name>/` with the shards (hard links where possible), `manifest.json`, the manifest's other files, a
freshly rendered `README.md` and `croissant.json`, and `SHA256SUMS` (`sha256sum -c SHA256SUMS` checks a copy
without ssmbench). `<to>/README.md` becomes the collection card: one Hugging Face config per dataset folder in
`<to>`, so `datasets.load_dataset("<org>/<repo>", "<name>")` works once uploaded. Published folders are never
changed in place: a folder of the same name holding another build is refused.

Uploading is left to the Hub's own client: the result lists the `hf upload` command (huggingface_hub's CLI; the
same arguments work with the older `huggingface-cli upload`) and the equivalent Python call. `upload_release`
runs the latter when huggingface_hub is installed and logged in; nothing else here needs it. Example:

    >>> from ssmbench.data.hub.publish import publish
    >>> result = publish("data/pathfinder-512", "release", repo_id="ORG/ssmbench")   # doctest: +SKIP
    >>> print(result.commands[0])                                                    # doctest: +SKIP
    hf upload ORG/ssmbench release . --repo-type dataset --commit-message "ssmbench pathfinder-512"
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import DatasetError
from ...plain import file_sha256
from ..folder.atomic import atomic_write_bytes
from ..folder.manifest import Manifest, load_manifest
from ..folder.safe_paths import check_name
from ..folder.splits import SPLIT_ORDER

SUMS = "SHA256SUMS"


@dataclass
class PublishResult:
    path: Path
    release_root: Path
    files: int
    num_bytes: int
    commands: list[str] = field(default_factory=list)
    uploaded: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "release_root": str(self.release_root), "files": self.files,
                "num_bytes": self.num_bytes, "commands": self.commands, "uploaded": self.uploaded}


def _link_or_copy(src: Path, dst: Path) -> None:
    """Hard link (shards are immutable: a later repack replaces files, never edits them), else copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        if dst.stat().st_size == src.stat().st_size and file_sha256(dst) == file_sha256(src):
            return
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _check_publishable(root: Path, manifest: Manifest) -> None:
    from ..folder.checks import absent_by_selection
    from .verify import raise_for, verify_dataset

    if absent_by_selection(root):
        raise DatasetError(f"{root} holds only part of {manifest.name} (downloaded with --split/--include)",
                           "publish a complete folder")
    codecs = {f["codec"] for f in (manifest.storage or {}).get("fields", {}).values()}
    if any(c.startswith("zstd") for c in codecs):
        raise DatasetError(f"{root} is a Zstd copy; published shards are gzip so that every HDF5 reader opens them",
                           f"publish the gzip original, or make one: ssmbench repack {root} --codec gzip:4 --out DIR")
    _refuse_local_paths(root)
    raise_for(verify_dataset(root))


def _refuse_local_paths(root: Path) -> None:
    """A card or manifest naming a local absolute path (a user's name, a scratch folder) is not published."""
    from ..make.command import local_paths

    for name in ("manifest.json", "README.md"):
        path = root / name
        found = local_paths(path.read_text(errors="replace")) if path.exists() else []
        if found:
            raise DatasetError(f"{path} names the local path {found[0]!r} (built by an ssmbench that recorded "
                               "the output folder)", f"rebuild it with this version, which records a path-free "
                               f"command: ssmbench generate ... --overwrite, or remove the path from {name}")


def sums_text(folder: Path, known: dict[str, str]) -> str:
    """SHA256SUMS lines (`<sha256>  <path>`, sorted by path) for every file under `folder` but SHA256SUMS itself."""
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != SUMS):
        rel = path.relative_to(folder).as_posix()
        lines.append(f"{known.get(rel) or file_sha256(path)}  {rel}")
    return "\n".join(lines) + "\n"


def collection_card(release_root: Path) -> str:
    """The release root's README.md: a Hugging Face card with one config per dataset folder found in it."""
    from ...registry import get_task
    from ..make.cards import config_entry, info_entry

    manifests = [load_manifest(p.parent) for p in sorted(release_root.glob("*/manifest.json"))]
    categories = sorted({get_task(m.task).hf_task_category for m in manifests}) or ["other"]
    front = ["---", "pretty_name: ssmbench", "license: cc-by-4.0",
             "tags: [synthetic, long-range, benchmark, state-space-models, hdf5, ssmbench]",
             "annotations_creators: [machine-generated]", "source_datasets: [original]",
             f"task_categories: [{', '.join(categories)}]", "configs:"]
    for m in manifests:
        front += config_entry(m.to_json(), prefix=f"{m.name}/")
    front.append("dataset_info:")
    for m in manifests:
        front += info_entry(m.to_json())
    rows = [f"| [`{m.name}`]({m.name}/README.md) | {m.task} v{m.task_version} | "
            f"{sum(m.splits[s].num_samples or 0 for s in SPLIT_ORDER)} | "
            f"{sum(sh.num_bytes or 0 for s in SPLIT_ORDER for sh in m.shards(s))} | "
            f"`{m.dataset_id}` |" for m in manifests]
    body = f"""---
# ssmbench datasets

Synthetic long-range sequence benchmark datasets generated by ssmbench. Each folder is one dataset with its own data
card (`README.md`), `manifest.json` (every shard's sample range, size and sha256), `croissant.json` and
`SHA256SUMS`; load one with `datasets.load_dataset("<this repository>", "<name>")`, or download it with
`ssmbench download <base URL>/<name>/` and read it with h5py or `ssmbench.open_dataset`.

| dataset | task | samples | bytes | dataset id |
|---|---|---|---|---|
{chr(10).join(rows)}

Licence: data CC-BY-4.0. Every dataset can be regenerated bit for bit from the command in its card.
"""
    return "\n".join(front) + "\n" + body


def upload_commands(release_root: Path, repo_id: str, name: str) -> list[str]:
    folder = shlex.quote(str(release_root))
    message = shlex.quote(f"ssmbench {name}")
    return [
        f"hf upload {repo_id} {folder} . --repo-type dataset --commit-message {message}",
        f"python -c \"from huggingface_hub import HfApi; HfApi().upload_folder(repo_id='{repo_id}', "
        f"repo_type='dataset', folder_path='{release_root}', commit_message='ssmbench {name}')\"",
        f"hf repos tag create {repo_id} <version> --repo-type dataset   # then pin catalogues to that revision",
    ]


def publish(path: str | Path, to: str | Path, *, repo_id: str | None = None) -> PublishResult:
    """Write the release folder `<to>/<name>` and the collection card `<to>/README.md`; see the module docstring.

    `repo_id` (the Hub dataset repository, e.g. "ORG/ssmbench") goes into the printed commands and, when given,
    into croissant.json's `url`.
    """
    from ..make.cards import write_card

    root = Path(path)
    manifest = load_manifest(root)
    _check_publishable(root, manifest)
    release_root = Path(to)
    dest = release_root / check_name(manifest.name, "the dataset name")  # one folder of the release
    if dest.resolve() == root.resolve():
        raise DatasetError(f"{dest} is the dataset folder itself", "pass another --to folder")
    if (dest / "manifest.json").exists() and (dest / "manifest.json").read_bytes() != (root / "manifest.json").read_bytes():
        raise DatasetError(f"{dest} already holds another build of {manifest.name}",
                           "published folders are never replaced: a new build gets a new name (task version)")
    known: dict[str, str] = {}
    for split in SPLIT_ORDER:
        for shard in manifest.shards(split):
            _link_or_copy(root / shard.path, dest / shard.path)
            known[shard.path] = str(shard.sha256)
    for f in manifest.files or []:
        _link_or_copy(root / f["path"], dest / f["path"])
        known[f["path"]] = f["sha256"]
    shutil.copy2(root / "manifest.json", dest / "manifest.json")
    url = f"https://huggingface.co/datasets/{repo_id}/tree/main/{manifest.name}" if repo_id else None
    write_card(dest, manifest.to_json(), url=url)
    atomic_write_bytes(dest / SUMS, sums_text(dest, known).encode())
    atomic_write_bytes(release_root / "README.md", collection_card(release_root).encode())
    files = [p for p in dest.rglob("*") if p.is_file()]
    return PublishResult(dest, release_root, len(files), sum(p.stat().st_size for p in files),
                         upload_commands(release_root, repo_id or "ORG/ssmbench", str(manifest.name)))


def upload_release(release_root: str | Path, repo_id: str) -> str:
    """Upload the release folder with huggingface_hub (optional: `pip install 'ssmbench[hub]'`, `hf auth login`)."""
    try:
        import huggingface_hub
    except ImportError:
        raise DatasetError("--upload needs huggingface_hub, which is not installed",
                           "pip install 'ssmbench[hub]', or run the printed command elsewhere") from None
    if not huggingface_hub.get_token():
        raise DatasetError("not logged in to the Hugging Face Hub", "run `hf auth login` (or set HF_TOKEN) first")
    info = huggingface_hub.HfApi().upload_folder(repo_id=repo_id, repo_type="dataset", folder_path=str(release_root),
                                                 commit_message=f"ssmbench release ({Path(release_root).name})")
    return str(getattr(info, "commit_url", info))
