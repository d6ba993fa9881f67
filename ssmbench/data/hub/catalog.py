"""Download catalogues: dataset name -> where it is hosted, the manifest's sha256 and the size.

Three sources are merged: the built-in `ssmbench/catalog.json` (the paper's datasets as built by
`python -m ssmbench.data.hub.catalog_build`: rebuilt by `ssmbench get`, since none is hosted yet),
`$SSMBENCH_CATALOG` (one or more files separated by the OS path separator) and `--catalog FILE`. A name present in
two different catalogues is an error naming both, so a download never silently picks one of two pins.

A catalogue is JSON::

    {"format": 1,
     "datasets": {
       "shift-64": {
         "sources": ["https://example.org/ssmbench/shift-64/",
                     "hf://datasets/ORG/ssmbench@0123abcd/shift-64"],
         "manifest_sha256": "<sha256 of shift-64/manifest.json>",
         "num_bytes": 123456,
         "task": "shift", "task_version": "1", "dataset_id": "shift-64-b9accf39",
         "description": "Shift, L = 64"}}}

Names must be plain folder names and shard paths plain relative paths (`ssmbench.data.folder.safe_paths`): a
catalogue naming `../x` or an absolute path is refused when it is read, before anything is created.
`sources` are tried in order (`url` is accepted for a single one); `ssmbench.data.hub.download` explains the URL forms.
An entry may instead (or also) carry `build` ({"argv": ["generate", ...], "workers": W}) and `shards` (each
shard's path, size, sha256 and per-field content hashes), which `ssmbench get` (`ssmbench.data.hub.get`) uses to
rebuild it and check every shard. `ssmbench.data.hub.get.resolve_dataset` turns a name into a folder for
`ssmbench.open_dataset`:

>>> import json, tempfile, pathlib
>>> tmpdir = tempfile.TemporaryDirectory(); tmp = pathlib.Path(tmpdir.name)
>>> _ = (tmp / "cat.json").write_text(json.dumps({"format": 1, "datasets": {"demo-8": {
...     "sources": ["https://example.org/demo-8/"], "manifest_sha256": "ab" * 32, "num_bytes": 2048}}}))
>>> cat = load_catalog(tmp / "cat.json", env=False)
>>> cat["demo-8"].sources, cat["demo-8"].num_bytes
(('https://example.org/demo-8/',), 2048)
>>> (tmp / "demo-8").mkdir(); _ = (tmp / "demo-8" / "manifest.json").write_text("{}")
>>> from ssmbench.data.hub.get import resolve_dataset
>>> resolve_dataset("demo-8", catalog=tmp / "cat.json", data_root=tmp) == tmp / "demo-8"
True
>>> tmpdir.cleanup()
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError, DatasetError
from ...plain import human_bytes, human_seconds
from ..folder.safe_paths import UnsafePathError, check_name, check_relative

BUILTIN = "<built-in>"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class CatalogEntry:
    """One dataset a catalogue knows how to fetch (`sources`) or rebuild (`build`), and check (`shards`)."""

    name: str
    sources: tuple[str, ...]
    manifest_sha256: str | None = None
    num_bytes: int | None = None
    task: str | None = None
    task_version: str | None = None
    dataset_id: str | None = None
    description: str = ""
    catalog: str = BUILTIN
    folder: str | None = None
    """The folder name `generate` gives it (`<task>-<preset>[-<config hash>]`); `get` stores it under `name`."""
    content_digest: str | None = None
    build: dict[str, Any] = field(default_factory=dict)
    """{"argv": ["generate", TASK, ...], "workers": W, "wall_s": ..., "cpu_s": ...}: how it was built here."""
    shards: tuple[dict[str, Any], ...] = ()
    """Every shard: {"path", "num_bytes", "sha256", "content": {field: first 16 hex of its content sha256}}."""
    files: tuple[dict[str, Any], ...] = ()
    codec: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    num_samples: dict[str, int] = field(default_factory=dict)

    @property
    def folder_name(self) -> str:
        return self.folder or self.name

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sources": list(self.sources), "manifest_sha256": self.manifest_sha256,
                "num_bytes": self.num_bytes, "task": self.task, "task_version": self.task_version,
                "dataset_id": self.dataset_id, "description": self.description, "catalog": self.catalog,
                "folder": self.folder_name, "content_digest": self.content_digest, "build": self.build,
                "codec": self.codec, "num_samples": self.num_samples, "shards": len(self.shards)}


@dataclass
class Catalog:
    """The merged catalogues, by dataset name."""

    entries: dict[str, CatalogEntry] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> CatalogEntry:
        return self.entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.entries))

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, name: str) -> CatalogEntry | None:
        return self.entries.get(name)


def _entry(name: str, raw: Any, origin: str) -> CatalogEntry:
    where = f"catalogue {origin}, dataset {name!r}"
    if not isinstance(raw, dict):
        raise ConfigError(where, "must be a JSON object")
    sources = raw.get("sources", [raw["url"]] if "url" in raw else [])
    if isinstance(sources, str):
        sources = [sources]
    build = raw.get("build") or {}
    argv = build.get("argv") if isinstance(build, dict) else None
    if build and not (isinstance(argv, list) and argv[:1] == ["generate"] and all(isinstance(a, str) for a in argv)):
        raise ConfigError(where, 'build.argv must be a list of strings starting with "generate"')
    if not all(isinstance(s, str) and s for s in sources) or not (sources or build):
        raise ConfigError(where, "needs `sources`, a list of base URLs (https://..., hf://datasets/...), "
                          "or `build`, the generate command that rebuilds it")
    shards = raw.get("shards") or []
    for sh in shards:
        if not (isinstance(sh, dict) and isinstance(sh.get("path"), str) and _SHA256.match(str(sh.get("sha256")))):
            raise ConfigError(where, f"shard {sh!r} needs a path and a 64-hex sha256")
    try:  # names become folders under the data root, shard paths files under them: nothing may lead outside
        for sh in shards:
            check_relative(sh["path"], "shard path")
        if raw.get("folder") is not None:
            check_name(raw["folder"], "folder")
    except UnsafePathError as exc:
        raise ConfigError(where, exc.message) from None
    sha = raw.get("manifest_sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA256.match(sha)):
        raise ConfigError(where, f"manifest_sha256 must be 64 lower-case hex digits, got {sha!r}")
    size = raw.get("num_bytes")
    if size is not None and not (isinstance(size, int) and size >= 0):
        raise ConfigError(where, f"num_bytes must be a non-negative integer, got {size!r}")
    return CatalogEntry(name=name, sources=tuple(sources), manifest_sha256=sha, num_bytes=size,
                        task=raw.get("task"), task_version=raw.get("task_version"),
                        dataset_id=raw.get("dataset_id"), description=str(raw.get("description", "")),
                        catalog=origin, folder=raw.get("folder"), content_digest=raw.get("content_digest"),
                        build=dict(build), shards=tuple(shards), files=tuple(raw.get("files") or ()),
                        codec=dict(raw.get("codec") or {}), environment=dict(raw.get("environment") or {}),
                        num_samples=dict(raw.get("num_samples") or {}))


def parse_catalog(obj: Any, origin: str) -> dict[str, CatalogEntry]:
    """Entries of one catalogue document (already decoded from JSON)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("datasets", {}), dict):
        raise ConfigError(f"catalogue {origin}", 'must be {"format": 1, "datasets": {NAME: {...}}}')
    if obj.get("format", 1) != 1:
        raise ConfigError(f"catalogue {origin}", f"format {obj.get('format')!r} is not supported (this is 1)")
    for name in obj.get("datasets", {}):
        try:  # the name is the folder `get` and `download` write under the data root
            check_name(name, "dataset name")
        except UnsafePathError as exc:
            raise ConfigError(f"catalogue {origin}", exc.message, "rename the entry") from None
    return {name: _entry(name, raw, origin) for name, raw in obj.get("datasets", {}).items()}


def _read(path: Path) -> dict[str, CatalogEntry]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError("--catalog", f"cannot read {path} ({exc.strerror})",
                          "pass an existing catalogue JSON file") from None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ConfigError("--catalog", f"{path} is not valid JSON ({exc})") from None
    return parse_catalog(obj, str(path))


def catalog_files(catalog: str | Path | Sequence[str | Path] | None = None, env: bool = True) -> list[Path]:
    """User catalogue files: `$SSMBENCH_CATALOG` (when `env`) then `catalog`, without repeats."""
    paths: list[Path] = []
    if env and os.environ.get("SSMBENCH_CATALOG"):
        paths += [Path(p) for p in os.environ["SSMBENCH_CATALOG"].split(os.pathsep) if p]
    if catalog is not None:
        paths += [Path(catalog)] if isinstance(catalog, (str, Path)) else [Path(p) for p in catalog]
    unique: list[Path] = []
    for p in paths:
        if p.resolve() not in {u.resolve() for u in unique}:
            unique.append(p)
    return unique


def _builtin_file() -> Any:
    """The packaged catalogue, `ssmbench/catalog.json` (a Traversable: a path, or a member of a zip)."""
    from importlib import resources

    return resources.files("ssmbench").joinpath("catalog.json")


def _read_builtin() -> dict[str, CatalogEntry]:
    """The built-in catalogue's entries; a damaged installation (the file missing, truncated, not a catalogue) is a
    one-line DatasetError (exit 2) that says to reinstall, never a traceback."""
    file = _builtin_file()
    fix = ("this ssmbench installation is damaged: reinstall it (pip install --force-reinstall --no-deps ssmbench; "
           "in a checkout: git checkout ssmbench/catalog.json)")
    try:
        obj = json.loads(file.read_text())
    except OSError as exc:
        raise DatasetError(f"the built-in catalogue {file} cannot be read ({exc.strerror or exc}); {fix}") from None
    except ValueError as exc:  # truncated, or not UTF-8
        raise DatasetError(f"the built-in catalogue {file} is not valid JSON ({exc}); {fix}") from None
    try:
        return parse_catalog(obj, BUILTIN)
    except ConfigError as exc:
        raise DatasetError(f"the built-in catalogue {file} is not a catalogue ({exc.message}); {fix}") from None


def load_catalog(catalog: str | Path | Sequence[str | Path] | None = None, env: bool = True) -> Catalog:
    """The built-in catalogue merged with the user's; a name found in two catalogues is a ConfigError."""
    merged = Catalog()
    builtin = _read_builtin()
    sources = [(BUILTIN, builtin)] + [(str(p), _read(p)) for p in catalog_files(catalog, env)]
    for origin, entries in sources:
        merged.files.append(origin)
        for name, entry in entries.items():
            if name in merged.entries:
                raise ConfigError("catalogue", f"dataset {name!r} is in both {merged.entries[name].catalog} and "
                                  f"{origin}", "rename it in one of them or pass only one catalogue")
            merged.entries[name] = entry
    return merged


def _host(source: str) -> str:
    if source.startswith("hf://datasets/"):
        repo = source[len("hf://datasets/"):].split("@")[0]
        return "hf:" + "/".join(repo.split("/")[:2])
    return source.split("://", 1)[-1].split("/", 1)[0]


def build_time(entry: CatalogEntry) -> str:
    """The entry's build time as measured where it was built (wall, CPU, workers), or '-' without a build.

    A wall time over twice the CPU time per worker was measured on a shared machine (the catalogue's builds ran
    under `nice` beside other work: mqar-512 took 157 s of wall for 18 s of CPU, and builds in 7-9 s on two free
    cores): the CPU time per worker, what the build takes on cores of its own, is shown instead.

    >>> e = CatalogEntry("mqar-512", (), build={"workers": 2, "wall_s": 156.6, "cpu_s": 18.0})
    >>> build_time(e), build_time(CatalogEntry("x", (), build={"workers": 2, "wall_s": 95.0, "cpu_s": 150.0}))
    ('9 s (18 s CPU, 2 workers)', '1.6 min (2.5 min CPU, 2 workers)')
    """
    if not entry.build.get("wall_s"):
        return "-"
    wall, cpu, workers = float(entry.build["wall_s"]), entry.build.get("cpu_s"), entry.build.get("workers", 1)
    if cpu and wall > 2 * float(cpu) / max(1, int(workers)):  # the load of the moment, not the build's
        wall = float(cpu) / max(1, int(workers))
    used = f"{human_seconds(float(cpu))} CPU, " if cpu else ""
    return f"{human_seconds(wall)} ({used}{workers} workers)"


def catalog_table(cat: Catalog) -> str:
    """The `ssmbench ls datasets` table: name, size, task, samples, build time, where it comes from, catalogue."""
    if not len(cat):
        return ("(no datasets in the catalogues; add yours with --catalog FILE or $SSMBENCH_CATALOG)")
    rows = [("name", "size", "task", "samples", "build (measured)", "from", "catalogue")]
    for name in cat:
        e = cat[name]
        task = f"{e.task} v{e.task_version}" if e.task and e.task_version else (e.task or "?")
        hosts = ", ".join(dict.fromkeys(map(_host, e.sources))) or "rebuilt here (ssmbench get)"
        rows.append((name, human_bytes(e.num_bytes), task, f"{sum(e.num_samples.values()):,}" if e.num_samples
                     else "?", build_time(e), hosts, "built-in" if e.catalog == BUILTIN else e.catalog))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
                     for r in rows)


def find_entry(name: str, catalog: str | Path | Sequence[str | Path] | None = None,
               searched: Path | None = None) -> CatalogEntry:
    """The catalogue entry for `name`; a DatasetError with close matches when no catalogue has it."""
    cat = load_catalog(catalog)
    entry = cat.get(name)
    if entry is None:
        import difflib

        close = difflib.get_close_matches(name, list(cat), n=3, cutoff=0.5)
        hint = (f"did you mean {' or '.join(map(repr, close))}? " if close else "") + \
            "list the catalogue with `ssmbench ls datasets`, add one with --catalog FILE, or pass a URL"
        where = f" in {searched} nor" if searched else ""
        raise DatasetError(f"no dataset named {name!r}{where} in the catalogues ({', '.join(cat.files)})", hint)
    return entry
