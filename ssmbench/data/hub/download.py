"""Download a dataset folder over HTTP(S): manifest first, then every file in parallel, resumed and verified.

The flow behind `ssmbench download NAME|URL`:

1. Fetch `manifest.json` (from a catalogue entry's sources in order, or from the URL given) and check its sha256
   against the catalogue's pin when there is one (a mismatch is a VerificationError, exit 3). URLs are
   `https://host/path/<name>/` (or that folder's `manifest.json`) and `hf://datasets/<org>/<repo>@<rev>/<name>`,
   which is read over plain HTTPS from the Hub's file URLs (`$HF_ENDPOINT` overrides the host), so no Hub client
   is needed.
2. Select the shards (`splits`, `include` globs); `manifest.json`'s other files (`fixed.npy`, `preview.png`) and
   the descriptive `README.md` and `croissant.json` always come along.
3. Skip files already present with the right size and sha256; fetch the rest in parallel to `<file>.part`,
   resuming a `.part` left by an interrupted run with an HTTP `Range: bytes=<size>-` request (a 206 answer is
   appended, a 200 answer restarts the file). Transient failures are retried with exponential backoff and jitter,
   then the next source is tried.
   Every path the manifest names (and its `name`, the folder) must be a plain relative path that stays inside the
   folder, symlinks included (`ssmbench.data.folder.safe_paths`); a manifest naming `../x`, `/abs` or `a\\b` is
   refused (exit 3) before anything is written.
4. Check each file's size and sha256 against the manifest before renaming it into place; a mismatching file is
   deleted, never kept. `manifest.json` itself is written last, so a folder whose download failed never looks
   like a dataset; `.download.json` records the source and which shards were left out on purpose (`--split`,
   `--include`), so `verify` reports those as absent rather than missing.
5. Run `verify`'s default level on the folder.

`ssmbench.data.hub.transfer` holds the HTTP side (URL forms, `requests`, retries, Range resumption). Example, against
any server that holds a dataset folder:

    >>> from ssmbench.data.hub.download import download_dataset
    >>> result = download_dataset("https://host/ssmbench/shift-64/", to="data", splits=["test"])  # doctest: +SKIP
    >>> result.path, result.fetched_files                                                       # doctest: +SKIP
    (PosixPath('data/shift-64'), 3)
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError, DatasetError, DownloadError, VerificationError
from ...plain import file_sha256
from ..folder.atomic import atomic_write_bytes, atomic_write_json
from ..folder.manifest import Manifest
from ..folder.safe_paths import UnsafePathError, check_name, inside
from ..folder.splits import SPLIT_ALIASES, SPLIT_ORDER
from .transfer import (
    STOP,
    FileItem,
    Http,
    NotFound,
    Transient,
    base_url,
    fetch_bytes,
    fetch_file,
    hf_to_https,
    looks_like_url,
)

__all__ = ["DownloadResult", "FileItem", "base_url", "download_dataset", "hf_to_https", "looks_like_url",
           "select_files"]

if TYPE_CHECKING:
    from .catalog import CatalogEntry

log = logging.getLogger(__name__)
RECORD = ".download.json"
DESCRIPTIVE = ("README.md", "croissant.json")  # rendered from the manifest; no checksum covers them


class DownloadInterrupted(DownloadError):
    """Ctrl-C stopped a download; the message says what was kept and that the same command continues it."""

    exit_code = 130


@dataclass
class DownloadResult:
    path: Path
    name: str
    source: str
    dry_run: bool = False
    present_files: int = 0
    fetched_files: int = 0
    fetched_bytes: int = 0
    to_fetch: list[FileItem] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)

    @property
    def bytes_to_fetch(self) -> int:
        return sum(f.num_bytes or 0 for f in self.to_fetch)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "name": self.name, "source": self.source, "dry_run": self.dry_run,
                "present_files": self.present_files, "fetched_files": self.fetched_files,
                "fetched_bytes": self.fetched_bytes, "files_to_fetch": len(self.to_fetch),
                "bytes_to_fetch": self.bytes_to_fetch, "to_fetch": [f.path for f in self.to_fetch],
                "absent": self.absent}


def _sources(source: str | CatalogEntry) -> tuple[CatalogEntry | None, list[str]]:
    if isinstance(source, str):
        if not looks_like_url(source):
            raise DatasetError(f"{source!r} is not a URL", "pass https://host/path/<name>/ or hf://datasets/..., or "
                               "a catalogue name through `ssmbench download` / `resolve_dataset`")
        return None, [base_url(source)]
    return source, [base_url(s) for s in source.sources]


def _get_manifest(http: Http, bases: list[str], pinned: str | None) -> tuple[bytes, list[str]]:
    failures, mismatches = [], []
    for i, base in enumerate(bases):
        try:
            data = fetch_bytes(http, base + "manifest.json")
        except NotFound as exc:
            failures.append(f"{base}manifest.json: {exc}")
            continue
        except Transient as exc:
            failures.append(f"{base}manifest.json: {exc} (after {http.retries + 1} attempts)")
            continue
        got = hashlib.sha256(data).hexdigest()
        if pinned is not None and got != pinned:
            mismatches.append(f"{base}manifest.json has sha256 {got[:16]}..., the catalogue pins {pinned[:16]}...")
            continue
        return data, bases[i:]
    if mismatches:
        raise VerificationError("manifest.json does not match the catalogue: " + "; ".join(mismatches),
                                mismatches, "the host serves another build, or the catalogue is out of date: "
                                "nothing was downloaded")
    raise DownloadError("cannot download manifest.json: " + "; ".join(failures),
                        "check the network and the URL, then re-run the same command")


def select_files(manifest: dict[str, Any], splits: Sequence[str] | None = None,
                 include: Sequence[str] | None = None) -> tuple[list[FileItem], list[str]]:
    """(files wanted, shard paths left out) for a split and glob selection.

    >>> m = {"splits": {s: {"shards": [{"path": f"{s}/shard-00000-of-00001.h5", "num_bytes": 1, "sha256": "x"}]}
    ...      for s in ("train", "val", "test")}, "files": []}
    >>> wanted, left = select_files(m, splits=["validation"])
    >>> [f.path for f in wanted if f.path.endswith(".h5")], left
    (['val/shard-00000-of-00001.h5'], ['train/shard-00000-of-00001.h5', 'test/shard-00000-of-00001.h5'])
    """
    chosen = set(SPLIT_ORDER)
    if splits:
        unknown = [s for s in splits if s not in SPLIT_ALIASES]
        if unknown:
            raise ConfigError("--split", f"unknown split {unknown[0]!r}; use train, val (or validation) or test")
        chosen = {SPLIT_ALIASES[s] for s in splits}
    wanted: list[FileItem] = []
    left: list[str] = []
    for split in SPLIT_ORDER:
        for shard in manifest["splits"][split]["shards"]:
            ok = split in chosen and (not include or any(fnmatch.fnmatch(shard["path"], g) for g in include))
            if ok:
                wanted.append(FileItem(shard["path"], shard["num_bytes"], shard["sha256"]))
            else:
                left.append(shard["path"])
    if (splits or include) and not wanted:
        raise ConfigError("--include" if include else "--split", "selects no shard of this dataset",
                          "shard paths look like train/shard-00000-of-00079.h5")
    wanted += [FileItem(f["path"], f["num_bytes"], f["sha256"]) for f in manifest.get("files", [])]
    wanted += [FileItem(p, None, None) for p in DESCRIPTIVE]
    return wanted, left


def _is_present(root: Path, item: FileItem) -> bool:
    path = inside(root, item.path, "file")
    if not path.is_file():
        return False
    if item.sha256 is None:
        return True
    return path.stat().st_size == item.num_bytes and file_sha256(path) == item.sha256


def _check_manifest(data: bytes, origin: str) -> dict[str, Any]:
    try:
        manifest = json.loads(data)
        name = manifest["name"]
        _ = [manifest["splits"][s]["shards"] for s in SPLIT_ORDER]
        Manifest.from_json(manifest, f"{origin}manifest.json")  # every shard and file path: plain and relative
    except UnsafePathError as exc:
        raise UnsafePathError(f"{origin}manifest.json: {exc.message}; nothing was downloaded", hint=exc.hint) from None
    except (ValueError, KeyError, TypeError, AttributeError, DatasetError):
        raise DatasetError(f"{origin}manifest.json is not an ssmbench manifest",
                           "point at a dataset folder made by `ssmbench generate`") from None
    try:  # the name becomes the folder under the data root
        check_name(name, "the dataset name")
    except UnsafePathError as exc:
        raise UnsafePathError(f"{origin}manifest.json: {exc.message}; nothing was downloaded", hint=exc.hint) from None
    return manifest


def download_dataset(source: str | CatalogEntry, to: str | Path | None = None, *,
                     splits: Sequence[str] | None = None, include: Sequence[str] | None = None,
                     dry_run: bool = False, workers: int = 4, retries: int = 4, backoff: float = 0.5,
                     timeout: float = 30.0, progress: bool = False, verify: bool = True) -> DownloadResult:
    """Download (or complete) `<to>/<name>` from a URL or a catalogue entry; see the module docstring.

    `source` is a URL (`https://host/path/<name>/`, its `manifest.json`, or `hf://datasets/<org>/<repo>@<rev>/<name>`)
    or a `CatalogEntry` (`ssmbench.data.hub.catalog.find_entry(name)`), whose pinned manifest sha256 is then enforced.
    `to` is the data root (default `$SSMBENCH_DATA` or `./data`); the dataset lands in `<to>/<name>`.

    Raises VerificationError (exit 3) when the manifest or a file disagrees with its checksum, DownloadError
    (exit 1) when a host is unreachable or a file is missing there, ConfigError/DatasetError (exit 2) for bad
    options or a target folder that holds another build.
    """
    from ..folder.locations import data_root

    if workers < 1:
        raise ConfigError("--workers", f"must be >= 1, got {workers}")
    entry, bases = _sources(source)
    http = Http(retries, backoff, timeout)
    manifest_bytes, bases = _get_manifest(http, bases, entry.manifest_sha256 if entry else None)
    manifest = _check_manifest(manifest_bytes, bases[0])
    name = manifest["name"]
    if entry is not None and entry.name != name:
        raise DatasetError(f"the catalogue's {entry.name!r} points at a manifest named {name!r}",
                           f"fix the entry in {entry.catalog}")
    root = data_root(to) / name
    existing = root / "manifest.json"
    if existing.exists() and existing.read_bytes() != manifest_bytes:
        raise DatasetError(f"{root} holds a different build of {name} (its manifest.json differs)",
                           "download into another --to folder, or remove that folder first")
    wanted, left_out = select_files(manifest, splits, include)
    result = DownloadResult(root, name, bases[0], dry_run=dry_run)
    if dry_run:
        present = [f for f in wanted if _is_present(root, f)]
        result.present_files = len(present)
        result.to_fetch = [f for f in wanted if f not in present]
        result.absent = [p for p in left_out if not (root / p).exists()]
        return result
    from .lockfile import Busy, held

    root.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        try:  # one download into a folder at a time; the lock file is removed when done
            stack.enter_context(held(root.parent / f".{name}.download.lock", wait=False))
        except Busy:
            raise DatasetError(f"another download into {root} is running", "wait for it to finish") from None
        try:
            _run(http, bases, root, wanted, result, workers, progress)
        except KeyboardInterrupt:
            done = sum(1 for f in wanted if (root / f.path).exists())
            parts = sum(1 for f in wanted if (root / (f.path + ".part")).exists())
            raise DownloadInterrupted(
                f"interrupted: {done}/{len(wanted)} file(s) complete and verified in {root}"
                + (f", {parts} partial file(s) kept as .part to resume from" if parts else "")
                + "; re-run the same command to continue") from None
        absent = [p for p in left_out if not (root / p).exists()]
        result.absent = absent
        atomic_write_json(root / RECORD, {
            "source": source if entry is None else f"{entry.name} ({entry.catalog})", "base_url": bases[0],
            "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(), "absent": absent,
            "selection": {"splits": list(splits or []), "include": list(include or [])}})
        if not existing.exists():
            atomic_write_bytes(existing, manifest_bytes)  # last: only now does the folder look like a dataset
    if verify:
        from .verify import raise_for, verify_dataset

        # every checked file was hashed on the way in (or, already present, just now): no second pass
        raise_for(verify_dataset(root, hashed={f.path for f in wanted if f.sha256 is not None}))
    return result


def _run(http: Http, bases: list[str], root: Path, wanted: list[FileItem], result: DownloadResult,
         workers: int, progress: bool) -> None:

    for stray in root.rglob("*.tmp.*"):  # atomic writes of an earlier run that died mid-write
        stray.unlink(missing_ok=True)
    STOP.clear()
    with _ctrl_c_sets_stop():
        _fetch_all(http, bases, root, wanted, result, workers, progress)


@contextmanager
def _ctrl_c_sets_stop() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt as usual and also sets STOP, so an interruption is reported as one even when
    the KeyboardInterrupt itself was swallowed while a transfer was blocked (it then ends as a time-out)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        STOP.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if STOP.is_set():
        raise KeyboardInterrupt


def _fetch_all(http: Http, bases: list[str], root: Path, wanted: list[FileItem], result: DownloadResult,
               workers: int, progress: bool) -> None:
    from tqdm import tqdm

    todo = [f for f in wanted if not _is_present(root, f)]
    result.present_files = len(wanted) - len(todo)
    result.to_fetch = todo
    if not todo:
        return
    for item in todo:
        inside(root, item.path, "file").parent.mkdir(parents=True, exist_ok=True)
    resumed = sum((root / (f.path + ".part")).stat().st_size for f in todo if (root / (f.path + ".part")).exists())
    lock = threading.Lock()
    bar = tqdm(total=sum(f.num_bytes or 0 for f in todo), initial=resumed, unit="B", unit_scale=True,
               unit_divisor=1024, desc=root.name, file=sys.stderr, disable=not progress, leave=False)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssmbench-download") as pool:
            descriptive = [f for f in todo if f.sha256 is None]
            checked = [f for f in todo if f.sha256 is not None]
            try:
                failures = [x for x in pool.map(lambda f: fetch_file(http, bases, root, f, bar, lock), checked) if x]
            except KeyboardInterrupt:
                STOP.set()  # the transfers stop at their next chunk; what they wrote stays in .part
                raise
            for item in descriptive:  # optional: a host without them still gives a usable dataset
                failed = fetch_file(http, bases, root, item, bar, lock)
                if failed is not None:
                    why = "was not found at the source" if failed.kind == "missing" else \
                        f"could not be fetched ({failed.detail.rsplit(': ', 1)[-1]})"
                    log.warning("%s %s; `ssmbench card %s` renders it", item.path, why, root)
    finally:
        bar.close()
    result.fetched_files = sum(1 for f in todo if (root / f.path).exists())
    result.fetched_bytes = sum((root / f.path).stat().st_size for f in todo if (root / f.path).exists())
    if not failures:
        return
    if STOP.is_set():  # a transfer that Ctrl-C left blocked timed out: the interruption is what happened
        raise KeyboardInterrupt
    lines = [f"{f.path}: {f.detail}" for f in failures]
    bad = [f for f in failures if f.kind == "checksum"]
    if bad:
        raise VerificationError(f"{len(bad)} file(s) failed their sha256 check and were not kept, e.g. "
                                f"{bad[0].path}", lines, "the host serves corrupted files; try another source")
    missing = [f for f in failures if f.kind == "missing"]
    first = (missing or failures)[0]
    raise DownloadError(f"{len(failures)} file(s) could not be downloaded ({len(missing)} missing at the source), "
                        f"e.g. {first.path}: {first.detail}",
                        "re-run the same command to resume; files already verified are kept")
