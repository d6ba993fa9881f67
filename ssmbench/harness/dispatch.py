"""Decide a `RunRequest`'s mode (`plan`) and run it in that mode (`run_request`): the one place that decides
what an eval command does.

* `resume`: `evaluation.resume` of the run folder, with the keys `--resume` takes (`-o`, `--device`, `--compile`,
  `--data`);
* `checkpoint`: `scoring.score_checkpoint` (score a saved model on one split);
* `single`: `evaluation.evaluate_request` (resolve the config once, run the evaluator);
* `suite`: `suites.run_suite` over the tasks of `--task` (and `--seeds`), each member a single run of the request.

Example (a tiny CPU run):
    >>> import tempfile
    >>> from ssmbench.harness.config.run_request import RunOptions, RunSettings, TaskSelector
    >>> plan(model="dlr", selector=TaskSelector("shift,cumsum")).mode, plan(model=None, resume_dir="runs/r1").mode
    ('suite', 'resume')
    >>> keys = {"L": 32, "train.steps": 2, "train.eval_every": 2, "model.d_model": 8, "eval.val_samples": 8,
    ...         "eval.test_samples": 8, "eval.metric_batch_size": 4, "data.workers": 0}
    >>> request = plan(model="dlr", selector=TaskSelector("cumsum"), settings=RunSettings(overrides=keys),
    ...                options=RunOptions(out=tempfile.mkdtemp() + "/run", quiet=True))
    >>> request.mode
    'single'
    >>> outcome = run_request(request)
    >>> outcome.suite is None, len(outcome.results), outcome.results[0].config.train.steps
    (True, 1, 2)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .config.run_request import Mode, RunOptions, RunRequest, RunSettings, TaskSelector

if TYPE_CHECKING:
    from .length_sweep import LengthSweep
    from .results.eval_result import EvalResult
    from .runtime.time_limit import Deadline


@dataclass(frozen=True)
class RunOutcome:
    """The runs a request made (or continued, or scored), and the suite folder when it ran a suite."""

    results: list[EvalResult]
    suite: Path | None = None
    sweep: LengthSweep | None = None
    """checkpoint mode with `lengths`: the sweep's folder, trained length and rows."""


def choose_mode(task: str | None, *, seeds: Sequence[int] = (), data: str | Path | None = None,
                resume_dir: str | Path | None = None, checkpoint: str | Path | None = None) -> Mode:
    """What an eval command does: `--resume` continues a run, `--checkpoint` scores one, one task without `--seeds`
    (or `--data` alone: the folder's task) is a single run, anything else (a group, several tasks, seeds, no
    task: the atomic group) a suite.

    >>> choose_mode("shift"), choose_mode("shift,cumsum"), choose_mode("shift", seeds=[0, 1]), choose_mode(None)
    ('single', 'suite', 'suite', 'suite')
    >>> choose_mode(None, resume_dir="runs/r1"), choose_mode(None, checkpoint="best.pt")
    ('resume', 'checkpoint')
    """
    if resume_dir and checkpoint:
        raise ConfigError("--checkpoint", "scores a checkpoint and --resume continues a run: give one of them")
    if resume_dir:
        return "resume"
    if checkpoint:
        return "checkpoint"
    from .config.task_groups import group_names

    # one name that is no group: a task (or a plug-in module:Class); an unknown name is refused by the resolver
    named = task is not None and "," not in task and task not in group_names()
    one = named or (data is not None and task is None)
    return "single" if one and not seeds else "suite"


def plan(*, model: str | None, selector: TaskSelector = TaskSelector(), settings: RunSettings = RunSettings(),
         options: RunOptions = RunOptions(), resume_dir: str | Path | None = None,
         checkpoint: str | Path | None = None, lengths: tuple[int, ...] = ()) -> RunRequest:
    """The request of these parts, its mode decided by `choose_mode`."""
    mode = choose_mode(selector.task, seeds=settings.seeds, data=options.data, resume_dir=resume_dir,
                       checkpoint=checkpoint)
    return RunRequest(mode=mode, model=model, selector=selector, settings=settings, options=options,
                      resume_dir=resume_dir, checkpoint=checkpoint, lengths=lengths)


def run_request(request: RunRequest, report: Callable[[EvalResult], None] | None = None) -> RunOutcome:
    """Do what `request` asks in its mode; `report` is called with each run of a suite as it finishes."""
    from . import evaluation

    s, o = request.settings, request.options
    if request.mode == "resume":
        assert request.resume_dir is not None
        placed = {k: v for k, v in (("hardware.device", o.device), ("hardware.compile", o.compile),
                                    ("hardware.cuda_graph", o.cuda_graph),
                                    ("data.path", o.data)) if v is not None}
        return RunOutcome([evaluation.resume(request.resume_dir, {**s.overrides, **placed}, quiet=o.quiet,
                                             logger=o.logger, force=o.force, time_limit=o.time_limit)])
    if request.mode == "checkpoint":
        from .scoring import score_checkpoint

        assert request.checkpoint is not None
        sel = request.selector
        if request.lengths:
            from .length_sweep import sweep_lengths

            sweep = sweep_lengths(request.checkpoint, request.lengths, s.split or "test", out=o.out,
                                  runs_root=o.runs_root, device=o.device, overrides=s.overrides, quiet=o.quiet)
            return RunOutcome([], sweep=sweep)
        return RunOutcome([score_checkpoint(request.checkpoint, split=s.split or "test", task=sel.task,
                                            length=sel.length, size=sel.size, out=o.out, runs_root=o.runs_root,
                                            device=o.device, overrides=s.overrides, quiet=o.quiet, data=o.data,
                                            model=request.model)])
    if request.mode == "single":
        return RunOutcome([evaluation.evaluate_request(request)])
    return _suite(request, report)


def _suite(request: RunRequest, report: Callable[[EvalResult], None] | None) -> RunOutcome:
    """Every task of the request (a group, several, or the atomic group) with each of its seeds, in one suite
    folder named by the settings that define the suite."""
    import dataclasses

    from . import evaluation
    from .suites import run_suite

    s, o, sel = request.settings, request.options, request.selector
    model = request.model or "dlr"
    request = dataclasses.replace(request, model=model)
    identity: dict[str, Any] = {"length": sel.length, "size": sel.size, "overrides": s.overrides, "seed": s.seed,
                                "evaluator": s.evaluator, "split": s.split}
    if s.config_read is not None:
        identity["config_file"] = s.config_read[0]  # the file's text, as read once
    task = sel.task
    if o.data and not task:
        from ..data.folder.manifest import load_manifest

        task = load_manifest(o.data).task

    def one_run(model: str, task: str, preset: str, *, out: str | Path, quiet: bool, seed: int | None = None,
                time_limit: Deadline | None = None, **_: Any) -> EvalResult:
        return evaluation.evaluate_request(request.member(task, out, seed, time_limit))

    packer = None
    if o.pack != "never" and s.evaluator == "train_eval":
        from .config.resolver import resolve_request
        from .packing import SuitePacker

        def resolve(task: str, out: Path, seed: int | None) -> Any:
            return resolve_request(request.member(task, out, seed))

        packer = SuitePacker(resolve, quiet=o.quiet, force=o.force, policy=o.pack)
    root, results = run_suite(model, task or "atomic", one_run, evaluation.resume, preset=s.preset, out=o.out,
                              settings=identity, seeds=list(s.seeds), report=report, runs_root=o.runs_root,
                              quiet=o.quiet, time_limit=o.time_limit, overrides=s.overrides, force=o.force,
                              packer=packer, logger=o.logger)
    return RunOutcome(results, root)
