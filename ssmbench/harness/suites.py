"""Task suites: `ssmbench eval --task atomic` (a group) or `--task shift,cumsum` (names), one run after another.

Which tasks `--task` names (a task, a group declared by the tasks, several of either) is `config.task_groups`'s to
say. A suite lives in one folder, `runs/<label>-<model>-<8 hex of its settings>/` (or `--out`), with one run
folder per task, so the same command finds it again: a re-run skips finished tasks, resumes an interrupted one from
its `last.pt` and starts the rest; a task folder whose run saved no step (killed before its first checkpoint) starts
again when its config is this command's (`training.protocol.train_and_score`). A task folder another process is writing
is refused (its `.lock`), so two copies of one suite command never write the same run. Progress lines on stderr say
tasks done / total and the time left (from the wall time of the tasks finished so far); the suite ends with the
`compare` table of its runs.

With a time limit (`--time-limit`, `time_limit=`), the tasks share one deadline: a task stopped by it ends the suite
(`SuiteTimeLimit`, exit 75), and a task is not started when too little time is left to set it up and save its first
checkpoint; the same command continues the suite. The limit is not part of the suite's identity (its folder).
suite.json records no path, so a suite folder copied elsewhere continues there with `--out`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import config_sha256
from ..errors import SsmbenchError
from .config.task_groups import expand_tasks
from .runtime.time_limit import Deadline, TimeLimitReached, as_deadline, scope


class SuiteInterrupted(SsmbenchError):
    exit_code = 130


class SuiteTimeLimit(TimeLimitReached):
    """A suite stopped by its time limit (exit 75); the same command continues it."""


def suite_dir(runs_root: str | Path, label: str, model: str, settings: Mapping[str, Any]) -> Path:
    """The suite's folder: the same command (model, tasks, preset, keys, seed) always finds the same one; keys of
    the command only (`train.time_limit`) do not count."""
    settings = _identity(settings)
    digest = config_sha256({"model": model, "label": label, **settings})[:8]
    safe = label.replace(",", "+").replace(":", "_").replace("/", "_")[:60]
    return Path(runs_root) / f"{safe}-{model.replace(':', '_').replace('/', '_')}-{digest}"


def run_suite(model: str, task_text: str, evaluate: Callable[..., Any], resume: Callable[..., Any], *,
              preset: str = "quick", runs_root: str | Path = "runs", out: str | Path | None = None,
              settings: Mapping[str, Any] | None = None, seeds: Sequence[int] | None = None, quiet: bool = False,
              report: Callable[[Any], None] | None = None,
              time_limit: Deadline | float | str | None = None, packer: Any = None,
              **kwargs: Any) -> tuple[Path, list[Any]]:
    """Run every task of `task_text` (with each of `seeds`, when given) in turn in one suite folder; returns
    (folder, results).

    `evaluate(model, task, preset, out=..., quiet=..., **kwargs)` and `resume(run_dir, quiet=..., force=...)` are
    `ssmbench.harness.evaluation`'s (passed in, so this module stays free of torch). `time_limit` (seconds, a
    DURATION or a `Deadline`; from Python it counts from this call) is shared by all the tasks: `SuiteTimeLimit`
    (exit 75) when it stops one or leaves too little time to start the next. `packer` (a `packing.SuitePacker`)
    trains the runs that can share one stacked model as packs (`training.pack_protocol`); without it every run
    trains alone.
    """
    from .results.run_folder import RunFolder

    if time_limit is None:
        time_limit = (kwargs.get("overrides") or {}).get("train.time_limit")
    deadline = as_deadline(time_limit)
    timed = {"time_limit": deadline} if deadline is not None else {}

    names = expand_tasks(task_text)
    runs = [(name, seed) for name in names for seed in (seeds or [None])]
    root = Path(out) if out else suite_dir(runs_root, task_text, model, {"tasks": names, "preset": preset,
                                                                           "seeds": list(seeds or []),
                                                                           **(settings or {})})
    root.mkdir(parents=True, exist_ok=True)
    (root / "suite.json").write_text(json.dumps({"model": model, "tasks": names, "seeds": list(seeds or []),
                                                 "preset": preset, "settings": _identity(settings or {})},
                                                sort_keys=True, default=str))
    results: list[Any] = []
    durations: list[float] = []
    labels = [name.replace(":", "_") + (f"-seed{seed}" if seed is not None else "") for name, seed in runs]
    packs = _packs(packer, runs, labels, root, kwargs.get("logger"))
    trained: dict[int, Any] = {}  # later members of a pack trained already: index -> result
    for i, (name, seed) in enumerate(runs):
        label = labels[i]
        run = RunFolder(root / label)
        if i in trained:
            result = trained.pop(i)
        else:
            members, group = packs.get(i, (None, None))
            plan = _plan(run, durations, len(runs) - i) if not members else \
                f"training {len(members)} runs as one pack ({', '.join(labels[j] for j in members)})"
            _say(f"[{i}/{len(runs)} done] {label}: {plan}", quiet)
            start = time.time()
            args = {**kwargs, **({"seed": seed} if seed is not None else {})}
            done = f"suite {root}: {i}/{len(runs)} runs done"
            if not run.finished and deadline is not None and not deadline.room_to_start():
                raise SuiteTimeLimit(f"time limit reached before {label} ({max(0.0, deadline.left()):.0f} s left, "
                                     f"too little to start it; {done})", "re-run the same command to continue the "
                                     "suite", suite=root, limit=deadline.seconds, step=0, steps=None)
            with _suite_errors(root, label, done, deadline, len(members or [1])):
                if members:
                    with scope(deadline):
                        outcomes = packer.run(group)
                    result = _pack_results(members, outcomes, trained, time.time() - start)
                elif run.finished:
                    result = _finished(run)
                elif run.last.exists():
                    result = resume(run.path, quiet=quiet, force=kwargs.get("force", False), **timed)
                else:
                    result = evaluate(model, name, preset, out=run.path, quiet=quiet, **args, **timed)
        durations.append(float(result.metrics.get("wall_time_s") or (time.time() - start)))
        results.append(result)
        if report is not None:
            report(result)
    _say(f"[{len(runs)}/{len(runs)} done] suite folder: {root}", quiet)
    return root, results


def _packs(packer: Any, runs: Sequence[tuple[str, int | None]], labels: Sequence[str], root: Path,
           logger: str | None) -> dict[int, tuple[list[int], list[Any]]]:
    """The suite's packs: index of a pack's first run -> (the indices of its runs, their `packing.Pending` runs as
    the packer resolved them); runs that train alone are left out."""
    if packer is None:
        return {}
    from .packing import Pending
    from .results.run_folder import RunFolder

    pending = [Pending(labels[i], name, seed, root / labels[i]) for i, (name, seed) in enumerate(runs)
               if not RunFolder(root / labels[i]).finished]
    packs = {}
    for group in packer.group(pending, logger=logger):
        if len(group) > 1:
            indices = [labels.index(p.label) for p in group]
            packs[indices[0]] = (indices, group)
    return packs


def _pack_results(members: Sequence[int], outcomes: Sequence[Any], trained: dict[int, Any], seconds: float) -> Any:
    """The first member's result; the others' kept in `trained` for their turn; a member's own error (a
    non-finite loss) raised once the others are saved."""
    from ..errors import SsmbenchError

    for i, outcome in zip(members, outcomes, strict=True):
        if isinstance(outcome, SsmbenchError):
            raise outcome
        outcome.metrics.setdefault("wall_time_s", seconds / len(members))
        trained[i] = outcome
    return trained.pop(members[0])


@contextlib.contextmanager
def _suite_errors(root: Path, label: str, done: str, deadline: Deadline | None, n: int) -> Iterator[None]:
    """A run's (or pack's) time limit and interruption as the suite's own (exit 75 / 130), naming what continues."""
    try:
        yield
    except (KeyboardInterrupt, SsmbenchError) as exc:
        which = label if n == 1 else f"{label} and its pack"
        if isinstance(exc, TimeLimitReached):
            raise SuiteTimeLimit(f"time limit reached after step {exc.step} of {exc.steps} of {which} ({done})",
                                 "re-run the same command to continue the suite: finished runs are skipped and "
                                 f"{which} resumes from its last.pt", run_dir=exc.run_dir, step=exc.step,
                                 steps=exc.steps, suite=root, limit=deadline.seconds if deadline else exc.limit) \
                from None
        if isinstance(exc, KeyboardInterrupt) or exc.exit_code == 130:
            first = getattr(exc, "message", "interrupted")
            raise SuiteInterrupted(f"{first} ({done})", "re-run the same command to continue the suite: finished "
                                   f"runs are skipped and {which} resumes from its last.pt") from None
        raise


COMMAND_ONLY_KEYS = ("train.time_limit",)
"""`-o` keys of one command, not of the suite: left out of its folder's digest and of suite.json."""


def _identity(settings: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(settings)
    if isinstance(out.get("overrides"), Mapping):
        out["overrides"] = {k: v for k, v in out["overrides"].items() if k not in COMMAND_ONLY_KEYS}
    return out


def _plan(run: Any, durations: list[float], left: int) -> str:
    if run.finished:
        return "finished earlier, skipped"
    what = "resuming from its last.pt" if run.last.exists() else \
        "starting again (it saved no step before it stopped)" if run.config_path.exists() else "starting"
    if not durations:
        return what
    eta = sum(durations) / len(durations) * left
    from ..plain import human_seconds

    return f"{what} (about {human_seconds(eta)} left for {left} task(s))"


def _finished(run: Any) -> Any:
    from .config.run_config import RunConfig
    from .results.eval_result import EvalResult

    try:
        metrics = json.loads(run.metrics_path.read_text())
    except (OSError, ValueError) as exc:  # written atomically, so damaged after the fact (disk, an editor)
        from ..errors import VerificationError

        raise VerificationError(f"{run.metrics_path} is damaged ({type(exc).__name__}): the finished task's scores "
                            "cannot be read", hint=f"move {run.path} away and re-run the same command to train that "
                                                   "task again") from None
    return EvalResult(run.path, RunConfig.from_json(run.read_config()), metrics)


def _say(line: str, quiet: bool) -> None:
    if not quiet:
        print(line, file=sys.stderr, flush=True)
