"""`ssmbench.evaluate`: resolve a run config, run an evaluator (train then score, by default) in a run folder.

    a RunRequest (`run_request`: what `ssmbench eval` asks for; `evaluate` builds one from its arguments)
    -> the resolver, `resolver.resolve_request` (task config -> preset -> --config FILE -> -o keys -> dataset
       folder -> validate; `resolver.resolve_run` from Python arguments)
    -> the evaluator (`--evaluator`, registry `ssmbench.evaluators`: `train_eval` or `score_only`)
    -> train_and_score: threads, model built once (`trainer.setup`), its facts (probe, causality check), the run
       folder (only now: a refused model leaves nothing behind), the training loop, metrics.json, learning curves.

The resolved `RunConfig` is written to `RUN/config.json` before the first step; `evaluate(config=RunConfig.from_json
(...))` repeats the run exactly, and `resume(RUN)` continues it from `last.pt`. Nothing in a run folder names the
folder itself, so a folder copied to another path or machine resumes there (a folder task's dataset, recorded by
its absolute path, is looked up by its dataset_id under the data root when that path is gone there).

One process writes a run folder at a time (`run_folder.run_lock`, `RUN/.lock`): a second `evaluate` or `resume` of
the same folder is refused naming the holder. A folder whose run saved no step (config.json but no last.pt: killed
before its first checkpoint) starts again from step 0 with a note, under `resume` and under `evaluate` of the same
config (a suite's re-run); another config there is refused as before. The intra-op thread count a run starts with
is recorded in config.json (`hardware.threads`), so a resumed run keeps the reduction order of its start and its
weights stay bit-identical to an uninterrupted run's, whatever `data.workers`, the machine or `OMP_NUM_THREADS` are
at resume.

`time_limit=` (seconds, a DURATION such as "4h" or "1h30m", or a `time_limit.Deadline`) stops training cleanly
before the limit with `last.pt` saved and raises `TimeLimitReached` (exit 75); `resume(RUN, time_limit=...)`
continues. From Python the limit counts from the call; the `ssmbench eval` command counts from the process start.

Example (a tiny CPU run; `quiet` silences the progress bar):
    >>> import tempfile
    >>> r = evaluate("dlr", "cumsum", overrides={"L": 32, "train.steps": 4, "train.eval_every": 2,
    ...              "model.d_model": 8, "model.d_state": 32, "eval.val_samples": 8, "eval.test_samples": 8,
    ...              "eval.metric_batch_size": 4, "data.workers": 0}, out=tempfile.mkdtemp() + "/run", quiet=True)
    >>> sorted(r.metrics["test"])[:3], (r.run_dir / "metrics.json").exists()
    (['mse', 'n', 'n_batches_batchavg'], True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, SsmbenchError
from .config.run_config import RunConfig
from .results.checkpoints import load_last
from .results.eval_result import EvalResult
from .results.run_folder import RunFolder, default_run_dir, run_lock
from .runtime import time_limit as TL

if TYPE_CHECKING:
    from .config.run_request import RunRequest

RESUMABLE_KEYS = ("train.steps", "data.workers", "data.prefetch", "data.path", "hardware.device", "hardware.compile",
                  "hardware.threads", "train.time_limit")
"""What `--resume` may set: more steps, the command's own settings, and how the same run is fed and placed."""

NOT_DEFINING = {"data": ("workers", "prefetch", "path"), "hardware": ("device", "compile", "threads")}
"""config.json keys that do not define a run: a folder that saved no step restarts when only these differ."""


def evaluate(model: str = "dlr", task: str | None = None, preset: str = "quick", *, length: int | None = None,
             size: int | None = None, config_file: str | Path | None = None,
             overrides: Mapping[str, Any] | None = None, seed: int = 0, device: str | None = None,
             precision: str | None = None, compile: bool | None = None, out: str | Path | None = None,
             runs_root: str | Path = "runs", quiet: bool = False, logger: str | None = None,
             allow_noncausal: bool = False, config: RunConfig | None = None,
             data: str | Path | None = None, evaluator: str = "train_eval",
             split: str | None = None, force: bool = False,
             time_limit: TL.Deadline | float | str | None = None) -> EvalResult:
    """Train `model` on `task` with a preset and score it; the run folder is `out` or runs/<task>-<model>-<time>.

    `data` is the dataset folder of a folder task (ListOps, Pathfinder; default: a matching folder under the data
    root); without `task` the folder's own task is trained. `config` (a RunConfig, e.g. from a run's config.json)
    replaces every resolution argument. `evaluator` names the protocol (`ssmbench ls evaluators`); `split` is the
    split `score_only` scores; `force` trains even when the memory estimate exceeds the device's free memory.
    `time_limit` (or `overrides={"train.time_limit": ...}`): stop before it, resumable (`TimeLimitReached`).
    """
    from .config.run_request import RunOptions, RunRequest, RunSettings, TaskSelector

    settings = RunSettings(preset=preset, config_file=config_file, overrides=dict(overrides or {}), seed=seed,
                           allow_noncausal=allow_noncausal, evaluator=evaluator, split=split)
    options = RunOptions(device=device, precision=precision, compile=compile, data=data, out=out,
                         runs_root=runs_root, quiet=quiet, logger=logger, force=force, time_limit=time_limit)
    return evaluate_request(RunRequest(mode="single", model=model, selector=TaskSelector(task, length, size),
                                       settings=settings, options=options, config=config))


def evaluate_request(request: RunRequest) -> EvalResult:
    """The single run `request` asks for: its config resolved (`resolver.resolve_request`), then its evaluator run.
    Without a task, a `--data` folder names its own."""
    from .config.resolver import resolve_request

    o = request.options
    if request.selector.task is None and request.config is None and o.data is not None:
        from ..data.folder.manifest import load_manifest

        selector = dataclasses.replace(request.selector, task=load_manifest(o.data).task)
        request = dataclasses.replace(request, selector=selector)
    if request.selector.task is None and request.config is None:
        raise ConfigError("--task", "evaluate() needs a task; `ssmbench.harness.suites.run_suite` runs a group "
                                    "(`ssmbench eval --task atomic`)")
    config = resolve_request(request)
    evaluator = request.settings.evaluator
    deadline = _deadline(o.time_limit, config.train.time_limit)
    if deadline is not None and evaluator != "train_eval":
        raise ConfigError("--time-limit", f"applies to training runs, not to the {evaluator} evaluator")
    from ..registry import evaluators

    options: dict[str, Any] = {"split": request.settings.split} if request.settings.split else {}
    if o.force:
        options["force"] = True
    with TL.scope(deadline):
        return evaluators.get(evaluator)().run(config, out=o.out, runs_root=o.runs_root, quiet=o.quiet,
                                               logger=o.logger, **options)


def _deadline(time_limit: TL.Deadline | float | str | None, configured: float | None) -> TL.Deadline | None:
    """`time_limit` as a Deadline, else the config's `train.time_limit` (`configured`) counted from now (from the
    process start under the CLI), else None."""
    return TL.as_deadline(time_limit if time_limit is not None else configured)


def resume(run_dir: str | Path, overrides: Mapping[str, Any] | None = None, quiet: bool = False,
           logger: str | None = None, force: bool = False,
           time_limit: TL.Deadline | float | str | None = None) -> EvalResult:
    """Continue an interrupted run from `RUN/checkpoints/last.pt` (or extend a finished one with train.steps);
    `time_limit` as in `evaluate` (a limit of the run's earlier commands does not carry over). A run that saved no
    step (killed before its first checkpoint) starts again from step 0 with its own config, with a note. Refused
    while another process writes the folder."""
    run = RunFolder(run_dir)
    if not run.config_path.exists():
        raise ConfigError("--resume", f"{run.path} is not an ssmbench run folder (no config.json)",
                          "pass the folder that `ssmbench eval` printed")
    bad = [k for k in (overrides or {}) if k not in RESUMABLE_KEYS]
    if bad:
        raise ConfigError(bad[0], "cannot change on --resume: it takes the run's own config (its config.json), "
                          "so the run stays reproducible", f"only {', '.join(RESUMABLE_KEYS)} may be given; start "
                          "a new run (another --out) to change anything else")
    with _writer_lock(run.path, os.environ.get("RANK", "0") == "0"):
        try:
            config = RunConfig.from_json(run.read_config())
        except (TypeError, ValueError, KeyError) as exc:
            saved = "" if run.last.exists() else "; no step was saved: delete the folder and start the run again"
            raise ConfigError("--resume", f"{run.config_path} is not an ssmbench run config ({exc}){saved}") \
                from None
        old_steps = config.train.steps
        overrides = dict(overrides or {})
        if overrides.get("data.path"):  # stored absolute: the run may be resumed from another directory
            overrides["data.path"] = str(Path(overrides["data.path"]).resolve())
        config = _relocate_data(config.with_overrides(overrides), explicit="data.path" in overrides).validate()
        deadline = _deadline(time_limit, config.train.time_limit)
        if run.finished and config.train.steps <= old_steps:
            raise ConfigError("--resume", f"{run.path} has already finished ({old_steps} steps)",
                              "pass -o train.steps=N with a larger N to extend it, or start a new run")
        if not run.last.exists():
            if run.finished:
                raise ConfigError("--resume", f"{run.path} has finished but holds no checkpoints/last.pt to extend",
                                  "start a new run with more steps")
            with TL.scope(deadline):  # nothing was saved: the same run from step 0 (train_and_score says so)
                return train_and_score(config, run.path, None, quiet=quiet, logger=logger, force=force,
                                       restart=True)
        _refuse_steps_below_reached(run, config.train.steps)
        if run.finished:
            run.metrics_path.replace(run.path / "metrics.previous.json")
        with TL.scope(deadline):
            return train_and_score(config, run.path, None, resume=True, quiet=quiet, logger=logger, force=force)


def _refuse_steps_below_reached(run: RunFolder, steps: int) -> None:
    """`-o train.steps=N` on --resume may extend a run, never cut it below the step its last.pt holds (it would be
    scored at once and recorded as an N-step run that trained longer)."""
    state = load_last(run.last).get("state", {})
    reached = state.get("step") if isinstance(state, dict) else None
    if isinstance(reached, int) and steps < reached:
        raise ConfigError("train.steps", f"{steps} is below the step {run.path} has reached ({reached})",
                          f"drop -o train.steps to finish the run as configured, or pass a value of at least {reached}")


@contextlib.contextmanager
def _writer_lock(path: Path, is_main: bool) -> Iterator[None]:
    """The run folder's lock on the process that writes it (rank 0 under torchrun); nothing on other ranks."""
    if not is_main:
        yield
        return
    with run_lock(path):
        yield


def _relocate_data(config: RunConfig, explicit: bool) -> RunConfig:
    """A folder task's config whose dataset folder is gone from its recorded path (a run folder copied to another
    machine): the folder with the same dataset_id directly under the data root (`$SSMBENCH_DATA` or ./data), if
    there is one; else unchanged (the data feed then says how to point at it)."""
    import dataclasses
    import json
    import logging

    from ..data.folder.locations import data_root

    d = config.data
    if explicit or not d.path or not d.dataset_id or (Path(d.path) / "manifest.json").is_file():
        return config
    root = data_root()
    for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
        try:
            found = json.loads(manifest.read_text()).get("dataset_id") == d.dataset_id
        except (OSError, ValueError, AttributeError):
            continue
        if found:
            logging.getLogger(__name__).warning("the run's dataset folder %s is not here; using %s (same dataset_id)",
                                                d.path, manifest.parent)
            return dataclasses.replace(config, data=dataclasses.replace(d, path=str(manifest.parent.resolve())))
    return config


def train_and_score(config: RunConfig, out: str | Path | None, runs_root: str | Path | None, *, resume: bool = False,
                    quiet: bool = False, logger: str | None = None, force: bool = False,
                    restart: bool = False) -> EvalResult:
    """The `train_eval` protocol: build the model once, check it (output shape, causality, memory: `force` runs a
    model whose estimated peak memory exceeds the device's free memory), train with selection on val, score test.
    `restart`: `out` holds this run's config.json and no saved step; start it again from step 0 (`resume`)."""
    import torch

    from .feed.batches import prefer_fork_safe_numba
    from .feed.folder_feed import probe_inputs
    from .results.loggers import check_logger, make_logger
    from .results.plots import learning_curves
    from .runtime import distributed as D
    from .runtime.threads import apply_threads
    from .training.facts import check_direction, model_facts
    from .training.memory import check_batch_fits, check_fits
    from .training.trainer import setup, train

    prefer_fork_safe_numba()
    check_logger(logger)
    threads = apply_threads(config.hardware.threads, config.data.workers)
    if config.hardware.threads is None:  # recorded: resumed with other workers or elsewhere, the same reductions
        config = dataclasses.replace(config, hardware=dataclasses.replace(config.hardware,
                                                                          threads=threads["threads"]))
    env = D.init_distributed(config.hardware.device)
    spec = config.spec()
    check_batch_fits(config, spec, env.device, env.world_size, force)  # shapes only: before anything runs the model
    check_direction(config, spec)
    s = setup(config, env)
    facts = {**model_facts(s), **threads}  # before the folder exists: a refused model leaves nothing behind
    facts["memory"] = check_fits(s, probe_inputs(config, "val", 1).to(env.device), force)
    path = Path(out) if out else D.broadcast_object(default_run_dir(runs_root or "runs", config.task, config.model))
    run = RunFolder(path)
    fresh = not resume and not path.exists()
    ext = None
    start = time.time()
    with contextlib.ExitStack() as held:
        problem = None
        if env.is_main:
            try:  # one writer per run folder; a folder of this run that saved no step starts again
                held.enter_context(run_lock(path))
                _check_start(run, config, resume=resume, restart=restart)
            except SsmbenchError as exc:
                problem = exc
        shared = D.broadcast_object(None if problem is None else problem.message)
        if problem is not None:
            raise problem
        if shared is not None:  # another rank: rank 0 refused
            raise SsmbenchError(shared)
        try:
            if env.is_main:
                run.create()
                run.write_config(config.to_json())
                ext = make_logger(logger, run.path, config)
            D.barrier()
            metrics = train(s, run, resume=resume, quiet=quiet, logger=ext)
        except torch.OutOfMemoryError as exc:
            _discard_if_empty(run, fresh and env.is_main)
            raise out_of_memory(config, exc) from None
        except BaseException as exc:  # a time limit spent before the first step: kept, for the --resume it prints
            _discard_if_empty(run, fresh and env.is_main and not isinstance(exc, TL.TimeLimitReached))
            raise
        finally:
            if ext is not None:
                ext.close()
        metrics.update(facts, wall_time_s=time.time() - start)
        if env.is_main:
            learning_curves(run.read_log(), run.plots / "learning_curves.png",
                            title=f"{config.task} / {config.model}")
            run.write_metrics(metrics)
        D.barrier()
    return EvalResult(run.path, config, metrics)


def _check_start(run: RunFolder, config: RunConfig, *, resume: bool, restart: bool) -> None:
    """Under the folder's lock, before anything is written: refuse a run that would overwrite another; a folder
    that holds this run's config and no saved step (killed before its first checkpoint) starts again from step 0,
    with a note."""
    if resume or not run.config_path.exists():
        return
    path = run.path
    if run.finished or run.last.exists():
        raise ConfigError("--out", f"{path} already holds a run", "choose another --out, or continue it with "
                                                                  f"`ssmbench eval --resume {path}`")
    if not restart:
        try:
            stored = RunConfig.from_json(run.read_config())
        except (TypeError, ValueError, KeyError):
            stored = None
        differs = "its config.json is not readable" if stored is None else _first_difference(stored, config)
        if differs:
            raise ConfigError("--out", f"{path} holds another run that saved no step ({differs})",
                              f"choose another --out, or delete {path} to start this run there")
    print(f"note: {path} holds this run with no saved step (stopped before its first checkpoint); starting it "
          "again from step 0", file=sys.stderr, flush=True)
    run.clear_unsaved()


def _first_difference(stored: RunConfig, config: RunConfig) -> str | None:
    """The first key (in -o syntax) whose value defines the run and differs, as "KEY: A there, B here"; None if none."""
    def flat(cfg: RunConfig) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in cfg.to_json().items():
            if isinstance(value, dict):
                skip, prefix = NOT_DEFINING.get(key, ()), {"model_overrides": "model", "task_config": "task"}
                out.update({f"{prefix.get(key, key)}.{k}": v for k, v in value.items() if k not in skip})
            else:
                out[key] = value
        return out

    a, b = flat(stored), flat(config)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"{key}: {a.get(key)!r} there, {b.get(key)!r} here"
    return None


def _discard_if_empty(run: RunFolder, created_here: bool) -> None:
    """A run this call created that failed before saving any step (a full disk, a worker that could not start)
    leaves nothing behind that would block the same command."""
    if created_here and not run.last.exists():
        shutil.rmtree(run.path, ignore_errors=True)


def out_of_memory(config: RunConfig, exc: BaseException) -> SsmbenchError:
    """CUDA out of memory -> one line naming the batch, the precision, and what to try."""
    t, precision = config.train, config.hardware.precision
    try:
        T = config.spec().seq_len
    except Exception:  # noqa: BLE001  (only the message needs it)
        T = "?"
    tips = [f"-o train.batch_size={max(1, t.batch_size // 2)}" if t.batch_size > 1 else None,
            f"-o eval.batch_size={max(1, config.eval.batch_size // 2)}" if config.eval.batch_size > 1 else None,
            "--precision bf16" if precision == "fp32" else None]
    first = str(exc).splitlines()[0] if str(exc) else "out of memory"
    return SsmbenchError(f"CUDA out of memory training {config.model} on {config.task} (T = {T}, global batch "
                         f"{t.batch_size}, eval batch {config.eval.batch_size}, {precision}): {first[:120]}",
                         "try " + " or ".join(x for x in tips if x) + " (under torchrun, more GPUs share the batch)")
