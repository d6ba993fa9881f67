"""Building a dataset folder: resolve names, plan, run shard jobs (in process or a process pool), finalize.

`generate_dataset` is the library function behind `ssmbench generate`; it never calls click or exits. Every sample
is a pure function of (task, version, config, root seed, split, index), so the result is the same for any number
of workers, shards or job-array slices, and a rerun only does the missing work.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__
from ...config import canonical_json, config_sha256
from ...errors import DatasetError
from ...registry import disable_svml, get_task
from ...seeding import SEED_SCHEME, keys_for
from ..folder.atomic import atomic_write_json
from ..folder.locations import data_root
from ..folder.manifest import FORMAT_VERSION
from .jobs import BuildInterrupted, interrupts
from .ownership import LOCKS, hold, lock_path, remove_shard_temporaries, sweep_temporaries
from .progress import check_fits_before_planning, check_space, finalized, shards_present, space_needed, sweep
from .provenance import environment
from .shards import (
    MAX_SAMPLES,
    BuildPlan,
    ShardSpec,
    auto_samples_per_shard,
    block_rows,
    check_codec,
    make_plan,
    shard_done,
    split_sizes,
    storage_fields,
    write_shard,
)

log = logging.getLogger(__name__)


def preset_of(task: Any, config: Any) -> tuple[str, bool]:
    """(preset the config starts from, whether the config equals it). Atomic tasks: the preset is L."""
    if task.preset_option == "length":
        name = str(config.L)
        return name, config == type(config)(L=config.L)
    for name, preset in task.presets.items():
        if preset == config:
            return name, True
    if task.preset_option == "size" and hasattr(config, "size"):
        from ...task_config import nearest_size_preset

        return nearest_size_preset(task, config.size), False
    return task.default_preset, False


def dataset_name(task: Any, config: Any) -> str:
    """`<task>-<preset>`, plus a config digest when the config is not the preset's; size tasks name the real size
    (a 32-pixel Pathfinder scaled from the 128 preset is `pathfinder-32-<digest>`, not `pathfinder-128-...`)."""
    preset, exact = preset_of(task, config)
    if task.preset_option == "size" and hasattr(config, "size"):
        preset = str(config.size)
    base = f"{task.name}-{preset}"
    return base if exact else f"{base}-{config_sha256(config.to_dict())[:8]}"


def _config_of(plan: BuildPlan) -> Any:
    from ...task_config import from_plain

    task = get_task(plan.task)
    return task, from_plain(task, plan.config)


def run_shard(root: str, plan: BuildPlan, shard: ShardSpec, progress: Any = None,
              survivors: np.ndarray | None = None) -> dict[str, Any] | None:
    """One shard job, holding the shard's lock (see ownership.py): write the shard unless another run has
    written it (or finished the folder) meanwhile; returns the record written, or None when there was nothing
    to do. Runs in this process or in a worker.

    For de-duplicated tasks, candidate shards are written under `root/.build` (split "candidates"), and final
    shards copy the rows of `survivors` (this split's surviving candidate indices) from them.
    """
    from .shards import TemporaryVanished

    folder = Path(root)
    target = folder / ".build" if shard.split == "candidates" else folder
    if finalized(folder, plan):
        return None
    with hold(lock_path(folder, shard)):
        if finalized(folder, plan) or shard_done(target, shard) is not None:
            return None
        for attempt in range(2):
            remove_shard_temporaries(folder, target, shard)
            try:
                return _write_shard(folder, target, plan, shard, progress, survivors)
            except TemporaryVanished as exc:  # deleted by another process: rewrite it once, then give up
                if attempt:
                    raise DatasetError(f"{exc.message} (twice)", "make sure only ssmbench writes to this "
                                       "folder, then re-run the same command") from None
    return None


def _write_shard(folder: Path, target: Path, plan: BuildPlan, shard: ShardSpec, progress: Any,
                 survivors: np.ndarray | None) -> dict[str, Any]:
    root = str(folder)
    task, config = _config_of(plan)
    spec = task.spec(config)
    fields = storage_fields(spec, plan.codec)
    attrs = {
        "ssmbench_format": FORMAT_VERSION, "ssmbench_version": __version__, "task": plan.task,
        "task_version": plan.version, "dataset_id": plan.dataset_id, "split": shard.split,
        "split_shard_index": shard.index, "split_num_shards": shard.num_shards, "sample_start": shard.start,
        "sample_stop": shard.stop, "root_seed": plan.seed, "seed_scheme": SEED_SCHEME,
        "config_json": canonical_json(plan.config).decode(), "config_sha256": config_sha256(plan.config),
        **{f"{k}_version": v for k, v in environment().items() if k in ("numpy", "numba", "h5py", "hdf5")},
    }

    def make_rows(lo: int, hi: int) -> dict[str, np.ndarray]:
        if survivors is not None:  # de-duplicated task: copy the surviving candidates' rows
            from .dedup import copy_rows

            ids = survivors[lo:hi]
            rows = copy_rows(Path(root), plan.samples_per_shard, ids,
                             [k for k in spec.fields if k != "candidate_index"])
            rows["candidate_index"] = ids.astype(np.int64)
            return rows
        rows = task.generate(config, keys_for(plan.task, plan.version, plan.config, plan.seed, shard.split, lo, hi,
                                              task.stream_exempt))
        if shard.split == "candidates" and "candidate_index" in rows:
            rows["candidate_index"] = np.arange(lo, hi, dtype=np.int64)
        return rows

    def stats_fn(block: dict[str, np.ndarray]) -> Any:
        return task.statistics(config, block)

    return write_shard(target, shard, fields, make_rows, attrs, task.fixed_arrays(config),
                       block_rows(spec.bytes_per_sample()), stats_fn if shard.split != "candidates" else None,
                       progress)


@dataclass
class GenerateResult:
    path: Path
    name: str
    manifest: dict[str, Any] | None
    shards_written: int
    shards_skipped: int
    finalized: bool


def plan_build(task_name: str, config: Any, n: int | None = None, split: Mapping[str, float] | None = None,
               seed: int = 0, samples_per_shard: int | None = None, codec: str | None = None) -> BuildPlan:
    task = get_task(task_name)
    sizes = split_sizes(n if n is not None else task.default_n, split or task.default_split)
    MAX_SAMPLES.check("--n", sum(sizes.values()))
    spec = task.spec(config)
    spp = samples_per_shard if samples_per_shard is not None else \
        task.samples_per_shard or auto_samples_per_shard(spec, sizes["train"])  # 0 is refused, not automatic
    if spp < 1:
        from ...errors import ConfigError

        raise ConfigError("--samples-per-shard", f"must be >= 1, got {spp}")
    check_codec(codec)
    cfg = config.to_dict()
    name = dataset_name(task, config)
    ident = canonical_json({"task": task.name, "version": task.version, "config_sha256": config_sha256(cfg),
                            "seed": seed, "sizes": sizes})
    plan = BuildPlan(task.name, task.version, cfg, seed, sizes, spp, codec, name,
                     f"{name}-{hashlib.sha256(ident).hexdigest()[:8]}")
    plan.shards = make_plan(sizes, spp)
    return plan


def check_fits(task_name: str, config: Any, out: str | Path | None = None, n: int | None = None,
               split: Mapping[str, float] | None = None, seed: int = 0, codec: str | None = None) -> None:
    """Refuse (`space.DiskFullError`, one line naming the size and the free space) a build that cannot fit the free
    disk space of its folder, before its shard plan is made (`progress.check_fits_before_planning`)."""
    task = get_task(task_name)
    sizes = split_sizes(n if n is not None else task.default_n, split or task.default_split)
    check_fits_before_planning(data_root(out) / dataset_name(task, config), task, config, sum(sizes.values()),
                               seed, codec, plan_build=plan_build)


def _check_folder(path: Path, plan: BuildPlan, overwrite: bool) -> None:
    """Refuse to mix datasets: an existing folder must hold this very build (or be empty).

    `--overwrite` deletes only what ssmbench wrote (a folder with other files is refused); a folder left by a run
    that stopped before its first shard (only `.build/plan.json`) is replaced without asking.
    """
    from ..folder.own_files import check_writable, failed_before_first_shard, read_json, remove_own_files

    check_writable(path)
    if not path.exists() or not any(path.iterdir()):
        return
    recorded, manifest = path / ".build" / "plan.json", path / "manifest.json"
    identity = read_json(recorded) if recorded.exists() else (read_json(manifest) or {}).get("build_identity")
    if identity == plan.identity():
        return
    if overwrite or failed_before_first_shard(path):
        remove_own_files(path)
        return
    if identity is None and (recorded.exists() or manifest.exists()):
        damaged = recorded if recorded.exists() else manifest
        raise DatasetError(f"{path} holds a damaged build ({damaged.relative_to(path)} is not valid JSON)",
                           "pass --overwrite to replace it, or choose another --out")
    if identity is None:
        raise DatasetError(f"{path} exists and is not an ssmbench dataset folder",
                           "choose another --out, or pass --overwrite to replace it")
    diff = [k for k in plan.identity() if identity.get(k) != plan.identity()[k]]
    raise DatasetError(f"{path} holds a different build (differs in: {', '.join(diff)})",
                       "choose another --out, or pass --overwrite to replace it")


def generate_dataset(task: str, config: Any, out: str | Path | None = None, n: int | None = None,
                     split: Mapping[str, float] | None = None, seed: int = 0, workers: int = 1,
                     samples_per_shard: int | None = None, codec: str | None = None,
                     shard_index: int | None = None, num_shards: int | None = None, overwrite: bool = False,
                     quiet: bool = True, argv: list[str] | None = None, explicit: list[str] | None = None,
                     plan: BuildPlan | None = None, estimate: Mapping[str, Any] | None = None) -> GenerateResult:
    """Build (or resume, or finalize) the dataset folder `<out>/<name>` and return where it is.

    `plan`: the caller's `plan_build(task, config, n, split, seed, samples_per_shard, codec)` (the CLI has one
    for its summary and estimate already), so the plan is computed once; `estimate`: its `estimate_build`, if
    any, for the free-space check (else one is made only when space looks short).

    Ctrl-C raises `BuildInterrupted` ("interrupted: k/n shards done; re-run the same command to continue");
    a full disk raises `space.DiskFullError` naming the folder and about how much more it needs. Either way
    the finished shards stay and no partial file does, so the same call continues the build. Several runs
    (job-array jobs, a second run of the same command) may write one folder at once (see ownership.py).
    """
    from .space import DiskFullError, disk_errno, disk_full_message

    disable_svml()
    if plan is None:
        check_fits(task, config, out, n, split, seed, codec)
        plan = plan_build(task, config, n, split, seed, samples_per_shard, codec)
    path = data_root(out) / plan.name
    estimates = dict(estimate or {})
    with interrupts():
        try:
            return _generate(path, task, config, plan, workers, shard_index, num_shards, overwrite, quiet, argv,
                             explicit, estimates)
        except KeyboardInterrupt:
            sweep(path)
            raise BuildInterrupted(f"interrupted: {shards_present(path, plan)}/{len(plan.shards)} shards done; "
                                   "re-run the same command to continue") from None
        except (DiskFullError, OSError, RuntimeError) as exc:  # h5py's RuntimeError: a write HDF5 could not finish
            code = exc.errno if isinstance(exc, DiskFullError) else disk_errno(exc, path)
            if code is None:  # another OS error, or the free-space check before starting (it says it all)
                raise
            sweep(path)
            raise DiskFullError(disk_full_message(path, code, *space_needed(path, plan, estimates)), code) from None


FINALIZE_FILES = frozenset({"manifest.json", "README.md", "croissant.json", "fixed.npy", "preview.png"})
"""Files finalize writes: their temporaries are stale when the folder lock is held."""


def _generate(path: Path, task: str, config: Any, plan: BuildPlan, workers: int, shard_index: int | None,
              num_shards: int | None, overwrite: bool, quiet: bool, argv: list[str] | None,
              explicit: list[str] | None, estimates: dict[str, Any]) -> GenerateResult:
    _check_folder_patiently(path, plan, overwrite)
    done = _already_finished(path, plan, overwrite)
    if done is not None:
        return done
    task_obj = get_task(task)
    check_space(path, plan, task_obj, config, workers, estimates)  # before anything is created
    for attempt in range(3):  # another run may finish this build and remove .build/ meanwhile
        try:
            atomic_write_json(path / ".build" / "plan.json", plan.identity())
            break
        except FileNotFoundError:
            done = _already_finished(path, plan, overwrite)
            if done is not None:
                return done
            if attempt == 2:
                raise
    extras: dict[str, Any] = {}
    survivors: dict[str, np.ndarray] | None = None
    if task_obj.deduplicate:
        from .dedup import build_root, candidate_margin, candidate_shards, survivors_by_split

        if num_shards is not None:  # job array: only this job's slice of the initial candidate stream
            total = sum(plan.sizes.values())
            cands = candidate_shards(total + candidate_margin(total), plan.samples_per_shard)
            todo = [s for j, s in enumerate(cands)
                    if j % num_shards == shard_index and shard_done(build_root(path), s) is None]
            written = _run_jobs(path, plan, todo, workers, quiet)
            _tidy_if_finished(path, plan)
            return GenerateResult(path, plan.name, None, written, 0, False)
        survivors, extras["deduplication"] = survivors_by_split(
            task_obj, config, path, plan, lambda todo: _run_jobs(path, plan, todo, workers, quiet))
    todo = [s for j, s in enumerate(plan.shards)
            if (num_shards is None or j % num_shards == shard_index) and shard_done(path, s) is None]
    selected = sum(1 for j in range(len(plan.shards)) if num_shards is None or j % num_shards == shard_index)
    written = _run_jobs(path, plan, todo, workers, quiet, survivors)
    if num_shards is not None:
        _tidy_if_finished(path, plan)
        return GenerateResult(path, plan.name, None, written, selected - written, False)
    from .finalize import finalize

    with hold(path / LOCKS / "folder.lock"):  # one finalize at a time; a later one finds the folder finished
        done = _already_finished(path, plan, overwrite=False)
        if done is not None:
            return GenerateResult(path, plan.name, done.manifest, written, selected - written, True)
        sweep_temporaries(path, FINALIZE_FILES)
        manifest = finalize(path, plan, argv=argv, explicit=explicit, extras=extras)
        shutil.rmtree(path / ".build", ignore_errors=True)  # sidecars, plan, ListOps candidates: no longer needed
    return GenerateResult(path, plan.name, manifest, written, selected - written, True)


def _tidy_if_finished(path: Path, plan: BuildPlan) -> None:
    """A run that ends after another finalized the folder may have re-created a lock under `.build/`: remove it."""
    if finalized(path, plan):
        shutil.rmtree(path / ".build", ignore_errors=True)


def _check_folder_patiently(path: Path, plan: BuildPlan, overwrite: bool, seconds: float = 5.0) -> None:
    """`_check_folder`, but a folder that holds nothing but the `.build/` of a run starting at this very moment
    (its plan not written yet) is given a few seconds for the plan to appear rather than called foreign. Without a
    `.build/` no run is starting there, and the refusal (a file in the way, a folder not writable) comes at once."""
    import time

    deadline, rechecked = time.monotonic() + seconds, False
    while True:
        try:
            return _check_folder(path, plan, overwrite)
        except DatasetError:
            if time.monotonic() > deadline or not (path / ".build").is_dir() or not all(
                    p.relative_to(path).parts[0] == ".build" for p in path.rglob("*")):
                raise
            if (path / ".build" / "plan.json").exists() or (path / "manifest.json").exists():
                if rechecked:  # the plan appeared since the check: check once more
                    raise
                rechecked = True
            else:
                time.sleep(0.05)


def _already_finished(path: Path, plan: BuildPlan, overwrite: bool) -> GenerateResult | None:
    """A re-run on a finished folder: nothing to do when every shard still matches the manifest (the leftover
    `.build/` of an older version is removed); a damaged one is refused unless `--overwrite` rebuilds it."""
    from ..folder.own_files import finished_build, remove_own_files

    manifest, damaged = finished_build(path, plan.identity())
    if manifest is None:
        return None
    if not damaged:
        shutil.rmtree(path / ".build", ignore_errors=True)
        return GenerateResult(path, plan.name, manifest, 0, len(plan.shards), True)
    if (path / ".build" / "plan.json").exists():
        return None  # the build state is still there: the resume rewrites the damaged shards
    if overwrite:
        remove_own_files(path)
        return None
    raise DatasetError(f"{path} is finished but {len(damaged)} shard(s) no longer match its manifest "
                       f"(e.g. {damaged[0]})", "run `ssmbench verify` on it for details; pass --overwrite to "
                       "rebuild it")


def _run_jobs(path: Path, plan: BuildPlan, todo: list[ShardSpec], workers: int, quiet: bool,
              survivors: dict[str, np.ndarray] | None = None) -> int:
    """Write the `todo` shards (in this process or a pool, see jobs.py); returns how many this run wrote."""
    from tqdm import tqdm

    from .jobs import run_jobs, runs_here, svml_in_use

    if not todo:
        return 0
    desc = "candidates" if todo[0].split == "candidates" else f"generate {plan.name}"
    bar = tqdm(total=sum(s.stop - s.start for s in todo), unit="sample", desc=desc, disable=quiet,
               file=sys.stderr, dynamic_ncols=True)
    here = runs_here(workers)
    written = 0

    def on_done(index: int, record: dict[str, Any] | None) -> None:
        nonlocal written
        written += record is not None
        if not here:
            bar.update(todo[index].stop - todo[index].start)

    jobs = [{"root": str(path), "plan": plan, "shard": s, "survivors": _rows_of(survivors, s)} for s in todo]
    try:
        if not svml_in_use():  # compile here once (filling Numba's cache for the workers), never with SVML on
            from .estimate import load_kernels

            task, config = _config_of(plan)
            keys = keys_for(plan.task, plan.version, plan.config, plan.seed, "train", 0, 1, task.stream_exempt)
            load_kernels(task, config, keys, bar.set_postfix_str)  # a cold cache: "compiling ..." on the bar
            bar.set_postfix_str("")
        run_jobs(run_shard, jobs, workers, on_done, bar.update)
    finally:
        bar.close()
    return written


def _rows_of(survivors: dict[str, np.ndarray] | None, shard: ShardSpec) -> np.ndarray | None:
    """The surviving candidate indices a final shard copies (global sample index -> candidate index)."""
    if survivors is None or shard.split == "candidates":
        return None
    full = np.zeros(shard.stop, dtype=np.int64)
    full[shard.start:shard.stop] = survivors[shard.split][shard.start:shard.stop]
    return full
