"""`ssmbench get NAME`: a catalogue dataset, downloaded from its mirror or rebuilt here, checked shard by shard.

The folder lands in `<data root>/NAME` (where `ssmbench.open_dataset(NAME)` looks for it).

A catalogue entry (`ssmbench.data.hub.catalog`) pins what the dataset *is*: the generate command, the content digest
and every shard's size, sha256 and per-field content hashes. `get_dataset` fetches the folder from the entry's
`sources` when it has any (`ssmbench.data.hub.download`), else rebuilds it here, in this process, with the entry's
`build.argv` and workers (`ssmbench.data.make.replay`) into a staging folder beside the destination, then compares
every shard with the entry:

* equal sha256 everywhere (and the content digest): the folder is moved into place;
* a shard whose decoded content differs is a `VerificationError` (exit 3) naming the first such shard and field
  and the facts that could explain it (NumPy, Numba, h5py versions and the CPU, here and in the entry); nothing is
  moved into place, and the rebuilt copy stays in the staging folder for inspection;
* equal content with other file bytes happens only when the writer versions recorded in each shard's attributes
  (NumPy, Numba, h5py, HDF5, ssmbench) differ from the entry's: accepted, since every array is byte-identical, and
  the versions that differ are named in `notes`. The content hashes are decoded from the files themselves, never
  taken from the manifest; other bytes with the entry's own versions are a VerificationError.

A folder already in place is checked the same way (every shard file read and hashed, then the manifest against the
files) before `get` answers "present". `<root>/.get-NAME.lock` lets one `get` of an entry into a data root run at a
time (it is removed when that `get` ends); a second one waits with a line, then checks the folder the first one made.
Before a rebuild (not with `quiet`), `get` says that it rebuilds, how big the dataset is and, from the build
estimate, how long it will take. The entry's name must be a plain folder name and its shard paths plain relative
paths (`ssmbench.data.folder.safe_paths`; the catalogue refuses others when it is read).

`check_against_entry` is the comparison, shared with `ssmbench verify DIR --catalog`. Example (the reduced twin
of shift-4096 that the tests rebuild, a few seconds)::

    >>> from ssmbench.data.hub.get import get_dataset
    >>> result = get_dataset("shift-4096-ci", to="data")                        # doctest: +SKIP
    >>> result.path, result.how, len(result.checked)                            # doctest: +SKIP
    (PosixPath('data/shift-4096-ci'), 'built', 3)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import DatasetError, VerificationError
from ..folder.manifest import Manifest, load_manifest
from ..folder.safe_paths import check_name, check_relative, inside
from ..folder.splits import SPLIT_ORDER
from .catalog import CatalogEntry, find_entry

log = logging.getLogger(__name__)


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


VERSION_KEYS = ("ssmbench", "numpy", "numba", "h5py", "hdf5")
"""Writers whose versions a shard's attributes record (`<key>_version`): other versions, other file bytes."""


def _hash_workers(workers: int | None) -> int:
    return max(1, workers or min(4, os.cpu_count() or 1))


def _read_manifest(folder: Path) -> Manifest:
    """The folder's manifest, with a shard list for each of train, val and test; a VerificationError (exit 3)
    when it is missing or unreadable."""
    try:
        manifest = Manifest.from_json(json.loads((folder / "manifest.json").read_text()), folder / "manifest.json")
        unlisted = [s for s in SPLIT_ORDER if s not in manifest.splits or not manifest.splits[s].listed]
        if unlisted:
            raise KeyError(unlisted[0])
    except FileNotFoundError:
        raise VerificationError(f"{folder}: manifest.json is missing") from None
    except (ValueError, KeyError, TypeError, AttributeError, DatasetError) as exc:  # truncated, or not a manifest
        raise VerificationError(f"{folder}: manifest.json is unreadable ({type(exc).__name__}: {exc})") from None
    return manifest


def _shard_paths(manifest: Manifest) -> list[str]:
    return [sh.path for s in SPLIT_ORDER for sh in manifest.shards(s)]


def _content_sha256(dset: Any) -> str:
    """sha256 over '<dtype>|<shape>|' and the array's C-order bytes, as the manifest's content hashes, read from the
    file in blocks of rows (a field's whole array is never held)."""
    import numpy as np

    from ..make.shards import content_prefix

    digest = hashlib.sha256(content_prefix(dset.dtype, dset.shape))
    if dset.shape == ():
        digest.update(np.ascontiguousarray(dset[()]).tobytes())
        return digest.hexdigest()
    row = max(1, dset.dtype.itemsize * int(np.prod(dset.shape[1:], dtype=np.int64)))
    step = max(1, (32 << 20) // row)
    for lo in range(0, dset.shape[0], step):
        digest.update(np.ascontiguousarray(dset[lo:lo + step]).tobytes())
    return digest.hexdigest()


def shard_facts(file: Path, want: dict[str, Any]) -> dict[str, Any]:
    """What a catalogue check needs from one shard file: its sha256 (computed while reading it once) and, when that
    differs from the catalogue's `want["sha256"]`, the per-field content hashes decoded from the file itself and the
    writer versions its attributes record (`error` when it cannot be decoded)."""
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    out: dict[str, Any] = {"sha256": digest.hexdigest()}
    if out["sha256"] == want["sha256"] or not want.get("content"):
        return out
    import h5py
    import hdf5plugin  # noqa: F401  (a repacked Zstd copy decodes too)

    try:
        with h5py.File(file, "r", locking=False) as h5:
            versions = {k: h5.attrs.get(f"{k}_version") for k in VERSION_KEYS}
            out["versions"] = {k: v.decode() if isinstance(v, bytes) else str(v)
                               for k, v in versions.items() if v is not None}
            out["content"] = {k: _content_sha256(h5[k]) if k in h5 else None for k in want["content"]}
    except (OSError, ValueError, KeyError) as exc:  # fletcher32 or decompression failure, not an HDF5 file
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def _check(folder: Path, entry: CatalogEntry, workers: int | None = None,
           hint: str | None = None) -> tuple[list[str], list[str], dict[str, str]]:
    """(checked shard paths, notes, sha256 of each file read); a VerificationError at the first disagreement."""
    from ..folder.checks import absent_by_selection

    if not entry.shards:
        raise DatasetError(f"catalogue entry {entry.name!r} lists no shards to check against",
                           "use a catalogue entry written by `python -m ssmbench.data.hub.catalog_build`")
    manifest = _read_manifest(folder)
    on_disk = {p.relative_to(folder).as_posix() for p in folder.glob("*/*.h5")}
    left_out = absent_by_selection(folder)
    wanted = [sh for sh in entry.shards
              if sh["path"] not in left_out or (folder / check_relative(sh["path"], "shard path")).exists()]
    missing = [sh["path"] for sh in wanted if sh["path"] not in on_disk]
    if missing:
        raise VerificationError(f"{folder}: shard {missing[0]} is missing here"
                                f"{f' ({len(missing)} missing)' if len(missing) > 1 else ''}; {_facts_line(entry)}",
                                hint=hint)
    unlisted = sorted((set(_shard_paths(manifest)) | on_disk) - {sh["path"] for sh in entry.shards})
    if unlisted:
        raise VerificationError(f"{folder}: shard {unlisted[0]} is not in the catalogue entry {entry.name!r} (the "
                                f"split or shard plan differs); {_facts_line(entry)}", hint=hint)
    files = [inside(folder, sh["path"], "shard") for sh in wanted]  # a symlink out of the folder: refused
    pool = ThreadPoolExecutor(_hash_workers(workers))  # sha256 and file reads release the GIL
    try:
        facts = list(pool.map(shard_facts, files, wanted))
    finally:  # Ctrl-C: the shards not started yet are not read (a `with` block would wait for all of them)
        pool.shutdown(wait=True, cancel_futures=True)
    checked: list[str] = []
    containers: list[str] = []
    differing: dict[str, str] = {}
    for want, got in zip(wanted, facts, strict=True):
        path = want["path"]
        checked.append(path)
        if got["sha256"] == want["sha256"]:
            continue
        if "error" in got:
            raise VerificationError(f"{folder}: {path} cannot be decoded ({got['error']}): the file is damaged",
                                    hint=hint)
        if not want.get("content"):
            raise VerificationError(f"{folder}: {path} differs from catalogue entry {entry.name!r} in its file bytes "
                                    f"(no content hashes to compare); {_facts_line(entry)}", hint=hint)
        fields = [k for k, h in want["content"].items() if not (got["content"].get(k) or "").startswith(h)]
        if fields:
            raise VerificationError(f"{folder}: {path} differs from catalogue entry {entry.name!r} in field "
                                    f"{fields[0]!r}; {_facts_line(entry)}", hint=hint)
        versions = got["versions"]
        differ = {k: f"{k} {v} (catalogue: {entry.environment[k]})" for k, v in versions.items()
                  if entry.environment.get(k) not in (None, v)}
        if not differ:
            same = ", ".join(f"{k} {v}" for k, v in versions.items() if entry.environment.get(k) == v)
            why = (f"yet records the entry's writer versions ({same})" if same else
                   "and no writer version it records differs from the entry's")
            raise VerificationError(f"{folder}: {path} holds the content of catalogue entry {entry.name!r} in other "
                                    f"file bytes, {why}: the file was rewritten, or the catalogue's sha256 for it "
                                    "is wrong", hint=hint)
        containers.append(path)
        for k in VERSION_KEYS:
            if k in differ:
                differing.setdefault(k, differ[k])
    if entry.content_digest and manifest.content_digest != entry.content_digest:
        raise VerificationError(f"{folder}: content digest {str(manifest.content_digest)[:16]}... differs "
                                f"from the catalogue's {entry.content_digest[:16]}...; {_facts_line(entry)}", hint=hint)
    notes = []
    if containers:
        notes.append(f"{len(containers)} shard(s) (first {containers[0]}) have equal content but other file bytes "
                     f"(content decoded from the files): they were written with {', '.join(differing.values())}")
    skipped = [sh["path"] for sh in entry.shards if sh["path"] not in set(checked)]
    if skipped:
        notes.append(f"{len(skipped)} shard(s) left out by `download --split/--include` were not checked")
    return checked, notes, {p: f["sha256"] for p, f in zip(checked, facts, strict=True)}


def check_against_entry(folder: Path, entry: CatalogEntry, workers: int | None = None) -> tuple[list[str], list[str]]:
    """(checked shard paths, notes); a VerificationError at the first shard that disagrees with `entry`.

    The shard files themselves are read (in `workers` threads; the manifest's hashes are not trusted): a file with
    the catalogue's sha256 passes; one with other bytes passes only when the content hashes decoded from it equal
    the entry's and the writer versions it records (NumPy, Numba, h5py, HDF5, ssmbench) differ from the entry's,
    which the note names. Every shard of the entry must be there (but those a partial download left out), no
    other, and the manifest's content digest must be the entry's.
    """
    checked, notes, _ = _check(Path(folder), entry, workers)
    return checked, notes


def _rebuild(entry: CatalogEntry, staging: Path, workers: int | None, quiet: bool) -> Path:
    """Build the entry's `generate` command into `staging`, in this process (`ssmbench.data.make.replay`).

    Ctrl-C or SIGTERM stops the build as Ctrl-C stops `generate` (at its next block; a pool's workers are ended,
    the shards done are kept) and raises `BuildInterrupted` (exit 130) naming the signal: a re-run of the same
    `get` continues the build in the staging folder. A second signal stops at once. If this process is killed
    outright, the pool's workers go with it (they watch it; see `ssmbench.data.make.jobs`).
    """
    from ..make.jobs import BuildInterrupted
    from ..make.replay import generate_from_argv

    w = workers or int(entry.build.get("workers") or 1)
    argv = [*entry.build["argv"], "--workers", str(w), "--out", str(staging), "--json", *(["-q"] if quiet else [])]
    with _signals_stop_the_build() as caught:
        try:
            return generate_from_argv(argv).path
        except (BuildInterrupted, KeyboardInterrupt):
            raise BuildInterrupted(
                f"interrupted ({signal_name(caught.get('signum', signal.SIGINT))}) while rebuilding {entry.name}: "
                f"the shards done are kept in {staging}; re-run the same command to continue") from None


def rebuild_notice(entry: CatalogEntry, dest: Path, workers: int | None) -> Iterator[str]:
    """The lines `get` says before it rebuilds `entry` (a dataset without a mirror): first what and how big (from the
    catalogue, at once), then how long, from `ssmbench.data.make.estimate` (a probe of a few seconds; a cold Numba
    cache compiles the task's kernels first, which the build then reuses)."""
    from ...plain import human_bytes
    from ...task_config import extra_overrides, resolve_config
    from ..make.estimate import estimate_build
    from ..make.generate import plan_build
    from ..make.replay import parse_generate_argv
    from ..make.shards import parse_split

    argv = entry.build["argv"]
    w = workers or int(entry.build.get("workers") or 1)
    samples = f"{sum(entry.num_samples.values()):,} samples, " if entry.num_samples else ""
    yield (f"{entry.name} has no mirror: rebuilding it here ({samples}{human_bytes(entry.num_bytes)}) with "
           f"`ssmbench {' '.join(argv)}`, then checking every shard against the catalogue")
    # the plan as `generate_from_argv` makes it (ssmbench.data.make.replay)
    options, _, extra = parse_generate_argv(argv)
    task, config, _ = resolve_config(options["task"], length=options.get("length"), size=options.get("size"),
                                     preset=options.get("preset"), config_file=options.get("config_file"),
                                     overrides=[*options["overrides"], *extra_overrides(extra)])
    split = parse_split(options["split"]) if options.get("split") else None
    plan = plan_build(task.name, config, options.get("n"), split, options.get("seed", 0),
                      options.get("samples_per_shard"), options.get("codec"))
    est = estimate_build(task, config, plan, w)
    yield (f"{entry.name}: about {est['time_human']} with {w} worker(s) (estimated), about {est['disk_human']} on "
           f"disk -> {dest}")


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@contextmanager
def _signals_stop_the_build() -> Iterator[dict[str, int]]:
    """For the duration, SIGINT and SIGTERM both do what Ctrl-C does to a build (`build.jobs.interrupts`: the first
    stops it at its next check, a second at once); yields a dict that records the first one's number ("signum")."""
    import threading

    from ..make.jobs import interrupts

    caught: dict[str, int] = {}
    with interrupts():
        if threading.current_thread() is not threading.main_thread():
            yield caught
            return
        build_handler = signal.getsignal(signal.SIGINT)

        def handler(signum: int, frame: Any) -> None:
            caught.setdefault("signum", signum)
            if callable(build_handler):
                build_handler(signum, frame)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield caught
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt for the duration (main thread only), so it ends as Ctrl-C does: one line,
    exit 130, whatever is half done cleaned up by the usual `finally` blocks."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _entry_lock(root: Path, entry: CatalogEntry, dest: Path, on_wait: Callable[[str], None] | None) -> Iterator[None]:
    """One `get` of an entry into a data root at a time (`<root>/.get-<name>.lock`, removed when done); a second
    one says it waits."""
    from .lockfile import held

    path = root / f".get-{entry.name}.lock"

    def say() -> None:
        (on_wait or log.warning)(f"waiting for another `ssmbench get {entry.name}` into {root} to finish "
                                 f"(it holds {path})")

    with ExitStack() as stack:
        try:
            stack.enter_context(held(path, on_wait=say))
        except OSError:  # a read-only data root: nothing can be written there, so check what is present unlocked
            if not (dest / "manifest.json").exists():
                raise
        yield


def _check_present(dest: Path, entry: CatalogEntry, workers: int | None) -> tuple[list[str], list[str]]:
    """A folder already in place: its files against the catalogue entry, then against its own manifest."""
    from .verify import raise_for, verify_dataset

    hint = f"remove {dest} and run `ssmbench get {entry.name}` again to fetch it anew"
    checked, notes, read = ([], [], {})
    if entry.shards:
        checked, notes, read = _check(dest, entry, workers, hint)
    elif entry.manifest_sha256:
        got = hashlib.sha256((dest / "manifest.json").read_bytes()).hexdigest()
        if got != entry.manifest_sha256:
            raise VerificationError(f"{dest}: manifest.json differs from catalogue entry {entry.name!r} (sha256 "
                                    f"{got[:16]}..., catalogue {entry.manifest_sha256[:16]}...)", hint=hint)
    listed = {sh.path: sh.sha256 for s in SPLIT_ORDER for sh in _read_manifest(dest).shards(s)}
    try:  # the manifest against the files: what was just read is not read again
        raise_for(verify_dataset(dest, hashed={p for p, sha in read.items() if listed.get(p) == sha}))
    except VerificationError as exc:
        raise VerificationError(exc.message, exc.problems, hint) from None
    return checked, notes


def get_dataset(name: str, to: str | Path | None = None, *, catalog: str | Path | Sequence[str | Path] | None = None,
                workers: int | None = None, quiet: bool = False, rebuild: bool = False,
                on_wait: Callable[[str], None] | None = None) -> GetResult:
    """Fetch or rebuild the catalogue dataset `name` into `<to>/<folder>` and check every shard against its entry.

    A folder already there is checked the same way (its files, not only its manifest) before it is answered
    "present"; a VerificationError (exit 3) says what differs. One `get` of an entry into a data root runs at a
    time: a second one calls `on_wait` with a line (default: a logged warning), waits, then finds and checks the
    folder the first one made. Before a rebuild, unless `quiet`, `on_wait` also gets `rebuild_notice`'s lines. `workers` processes rebuild, and as many threads hash the shards.
    """
    from ..folder.locations import data_root

    entry = find_entry(name, catalog)
    root = data_root(to)
    dest = root / check_name(entry.name, "catalogue name")  # where open_dataset(name) and `download NAME` look
    root.mkdir(parents=True, exist_ok=True)
    with _entry_lock(root, entry, dest, on_wait):
        if (dest / "manifest.json").exists():
            checked, notes = _check_present(dest, entry, workers)
            return GetResult(dest, name, "present", checked, notes)
        if entry.sources and not rebuild:
            from .download import download_dataset

            result = download_dataset(entry, to=root, progress=not quiet)
            checked, notes = check_against_entry(result.path, entry, workers) if entry.shards else ([], [])
            return GetResult(result.path, name, "downloaded", checked, notes)
        if not entry.build:
            raise DatasetError(f"catalogue entry {name!r} has neither sources nor a build command",
                               "fix the catalogue")
        staging = root / f".get-{entry.name}"
        if not quiet:
            for line in rebuild_notice(entry, dest, workers):  # a rebuild can take hours: say so before it starts
                (on_wait or log.warning)(line)
        built = _rebuild(entry, staging, workers, quiet)
        checked, notes = check_against_entry(built, entry, workers)
        os.replace(built, dest)
        shutil.rmtree(staging, ignore_errors=True)
        return GetResult(dest, name, "built", checked, notes)


def entry_for_folder(folder: Path, catalog: str | Path | Sequence[str | Path] | None = None) -> CatalogEntry:
    """The catalogue entry describing `folder`: by folder name, else by dataset id (the content digest decides)."""
    from .catalog import load_catalog

    manifest = load_manifest(folder)
    cat = load_catalog(catalog)
    if Path(folder).name in cat and cat[Path(folder).name].dataset_id in (None, manifest.dataset_id):
        return cat[Path(folder).name]
    same = [cat[n] for n in cat if cat[n].dataset_id == manifest.dataset_id]
    exact = [e for e in same if e.content_digest == manifest.content_digest]
    if exact or same:
        return (exact or same)[0]
    raise DatasetError(f"no catalogue entry describes {folder} (dataset id {manifest.dataset_id})",
                       "list the entries with `ssmbench ls datasets`; add a catalogue with --catalog FILE")


def verify_catalog(folder: str | Path, catalog: str | Path | Sequence[str | Path] | None = None,
                   workers: int | None = None) -> dict[str, Any]:
    """`verify DIR --catalog`: every shard file of `folder` against its catalogue entry (VerificationError if not)."""
    entry = entry_for_folder(Path(folder), catalog)
    checked, notes = check_against_entry(Path(folder), entry, workers)
    return {"entry": entry.name, "catalog": entry.catalog, "checked_shards": len(checked), "notes": notes}


def entry_from_folder(folder: Path, argv: list[str], workers: int, build: dict[str, float] | None = None,
                      description: str = "") -> dict[str, Any]:
    """A catalogue entry (JSON) for a verified folder built by `ssmbench <argv> --workers <workers>`."""
    manifest = load_manifest(folder)
    shards = [{"path": sh.path, "num_bytes": sh.num_bytes, "sha256": sh.sha256,
               "content": {k: v[:16] for k, v in sorted((sh.content_sha256 or {}).items())}}
              for split in SPLIT_ORDER for sh in manifest.splits[split].shards]
    files = [f for f in manifest.files or [] if f["path"] != "preview.png"]
    storage, environment = manifest.storage or {}, manifest.environment or {}
    return {
        "description": description or manifest.name, "task": manifest.task,
        "task_version": manifest.version, "dataset_id": manifest.dataset_id, "folder": manifest.name,
        "content_digest": manifest.content_digest,
        "build": {"argv": list(argv), "workers": workers,
                  **{k: round(float(v), 1) for k, v in (build or {}).items() if k in ("wall_s", "cpu_s")}},
        "codec": {k: f"{v['codec']}{'+shuffle' if v['shuffle'] else ''}" for k, v in sorted(storage["fields"].items())},
        "environment": {"ssmbench": manifest.ssmbench_version,
                        **{k: environment[k] for k in ("numpy", "numba", "h5py", "hdf5", "platform")}},
        "num_samples": {s: manifest.splits[s].num_samples for s in SPLIT_ORDER},
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
    from ..folder.locations import data_root as default_root
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
    from ..folder.checks import absent_by_selection
    from ..folder.splits import SPLIT_ALIASES

    prefix = SPLIT_ALIASES.get(split, split) + "/"
    return any(p.startswith(prefix) for p in absent_by_selection(folder))
