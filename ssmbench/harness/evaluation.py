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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .config.run_config import RunConfig
from .length_sweep import score_lengths
from .results.checkpoints import load_last
from .results.eval_result import EvalResult
from .results.run_folder import RunFolder, run_lock
from .runtime import time_limit as TL
from .training.protocol import train_and_score

if TYPE_CHECKING:
    from .config.run_request import RunRequest

__all__ = ["evaluate", "evaluate_request", "resume", "train_and_score", "RESUMABLE_KEYS"]

RESUMABLE_KEYS = ("train.steps", "data.workers", "data.prefetch", "data.path", "hardware.device", "hardware.compile", "hardware.cuda_graph",
                  "hardware.threads", "train.time_limit")
"""What `--resume` may set: more steps, the command's own settings, and how the same run is fed and placed."""

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
    from .config.resolver import resolve_saved

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
        config = _relocate_data(resolve_saved(config, overrides), explicit="data.path" in overrides)
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
                                       restart=True, score_lengths=score_lengths)
        last = _refuse_steps_below_reached(run, config.train.steps)
        if run.finished:
            run.metrics_path.replace(run.path / "metrics.previous.json")
        with TL.scope(deadline):
            return train_and_score(config, run.path, None, resume=True, quiet=quiet, logger=logger, force=force,
                                   last=last, score_lengths=score_lengths)


def _refuse_steps_below_reached(run: RunFolder, steps: int) -> dict[str, Any]:
    """`-o train.steps=N` on --resume may extend a run, never cut it below the step its last.pt holds (it would be
    scored at once and recorded as an N-step run that trained longer); returns last.pt, read once for the run."""
    last = load_last(run.last)
    state = last.get("state", {})
    reached = state.get("step") if isinstance(state, dict) else None
    if isinstance(reached, int) and steps < reached:
        raise ConfigError("train.steps", f"{steps} is below the step {run.path} has reached ({reached})",
                          f"drop -o train.steps to finish the run as configured, or pass a value of at least {reached}")
    return last


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
