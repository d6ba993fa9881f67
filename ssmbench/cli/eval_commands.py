"""Harness commands: eval (train and score, score a checkpoint, resume) and compare (thin shells over
`ssmbench.harness`)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

import click

from .app import cli, emit

if TYPE_CHECKING:
    pass

EVAL_EPILOG = """\b
Model resolution: a registered name (`ssmbench ls models`), or `module:Object`. An nn.Module subclass is a
sequence mixer, wrapped in the harness backbone ((B, L, D) -> (B, L, D), declares `causal`); any other callable
is a factory `build(spec, **hparams)` returning the whole model.

\b
Examples:
  ssmbench eval --model dlr --task shift                  # quick preset: minutes on a laptop CPU
  ssmbench eval --model dlr                               # the atomic group, then a Table-1-style summary
  ssmbench eval --model dlr --task shift,cumsum           # several tasks (or a group: see --task);
                                                          #   re-run to continue
  ssmbench eval --model attention --task mips --length 512 -o train.steps=2000 -o model.d_model=64
  ssmbench eval --model dlr --task shift --preset paper --device cuda
  ssmbench eval --model dlr --task pathfinder --size 128      # trains on data/pathfinder-128 (ssmbench generate)
  ssmbench eval --model local_attention --task listops_subtrees --data data/listops_subtrees-short
  torchrun --nproc-per-node 2 --no-python ssmbench eval --model dlr --task cumsum
  ssmbench eval --model mypkg.mixers:MyMixer --task cumsum
  ssmbench eval --checkpoint runs/RUN/checkpoints/best.pt --split test
  ssmbench eval --checkpoint runs/RUN/checkpoints/best.pt --length 1024   # length generalisation
  ssmbench eval --checkpoint runs/RUN/checkpoints/best.pt --lengths 256,1024,4096   # one table + plot
  ssmbench eval --evaluator score_only --model dlr --task cumsum   # the untrained model's scores
  ssmbench eval --resume runs/RUN [-o train.steps=4000]
  ssmbench eval --model dlr --task table1 --preset paper --time-limit 3h50m   # re-run the same command to go on
  ssmbench eval --resume runs/RUN --time-limit 45m
  ssmbench eval --model dlr --task cumsum --seeds 0,1,2 --log-samples   # three seeds; per-sample predictions

\b
Override keys (-o, repeatable): model.<key> (d_model, n_layers, d_state, ... and the mixer's own arguments),
train.<key> (steps, lr, lr_ssm, weight_decay, batch_size, schedule, warmup_steps, eval_every, ...),
eval.<key> (val_samples, test_samples, metric_batch_size, ...), data.<key> (seed, workers), and task keys
(L, num_shifts, ...). The run folder gets config.json, metrics.jsonl, metrics.json, checkpoints/, plots/.

\b
Time limits (--time-limit or -o train.time_limit; 90s, 45m, 4h, 1h30m, 1:30:00 or seconds), counted from the start
of the command: training stops at the last step boundary that leaves time for a checkpoint (and never starts an
evaluation that would not finish), saves checkpoints/last.pt and exits 75 with the command that continues it; a suite
stops the same way and continues with the same command. The limit is not part of the run (not in config.json), so
a resumed run may take another. A run folder holds no absolute path to itself: copied elsewhere, it resumes there.

\b
Exit status: 0 finished; 1 runtime failure; 2 usage or configuration error; 3 damaged data (a dataset folder's
shards or a finished run's files); 75 stopped at --time-limit
(resumable); 130 interrupted (Ctrl-C, SIGTERM; resumable)."""


class GroupsHelp(click.Option):
    """An option whose help names the task groups the registered tasks declare (`config.task_groups`), read when
    the help is shown, so plug-in groups appear and `eval` starts without importing the tasks."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from ..harness.config.task_groups import task_groups

        template = self.help or ""
        groups = sorted(task_groups(), key=lambda g: g == "all")  # the registry's order, `all` last
        self.help = template.replace("{groups}", ", ".join(groups))
        try:
            return super().get_help_record(ctx)
        finally:
            self.help = template


@cli.command("eval", epilog=EVAL_EPILOG)
@click.option("--model", "model", default=None, help="Registered name or module:Object (mixer or factory) "
              "[default: dlr; with --checkpoint: the checkpoint's].")
@click.option("--task", cls=GroupsHelp, help="A task, a group ({groups}) or several, comma-separated "
              "[default: the atomic group].")
@click.option("--length", type=int, help="Sequence length L of an atomic task.")
@click.option("--size", type=int, help="Image side of pathfinder.")
@click.option("--data", type=click.Path(file_okay=False), help="Dataset folder of a task that trains from one "
              "(ListOps, Pathfinder) [default: the matching folder under $SSMBENCH_DATA or ./data].")
@click.option("--preset", default="quick", help="Training preset: quick, paper, or a full row name "
              "(`ssmbench ls presets`).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="TOML or JSON file of -o keys (applied after the preset).")
@click.option("-o", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a key (repeatable); ~model.KEY removes a model key the preset set.")
@click.option("--seed", type=int, default=0, help="Training seed (the data seed is -o data.seed).")
@click.option("--seeds", help="Several training seeds, e.g. 0,1,2: one run each (a suite); `compare` shows "
              "mean ± std.")
@click.option("--device", default=None, help="auto, cpu, cuda or cuda:i [default: auto].")
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]), default=None,
              help="fp32 (the paper) or mixed precision; SSM mixers stay float32 [default: fp32].")
@click.option("--compile", "compile_", is_flag=True, default=None,
              help="torch.compile the model: on a GPU, fewer kernel launches for models whose steps wait on the "
                   "host (DLR, S4D).")
@click.option("--cuda-graph", "cuda_graph", is_flag=True, default=None,
              help="Capture the training step as one CUDA graph after 3 eager steps (GPU, fp32 / bf16, one process): "
                   "the host launches one graph a step instead of hundreds of kernels.")
@click.option("--out", type=click.Path(file_okay=False), help="Run folder (a suite's folder for several tasks) "
              "[default: runs/<task>-<model>-<time>].")
@click.option("--runs-root", default="runs", type=click.Path(file_okay=False), help="Parent of default run folders.")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False), help="Continue an interrupted run.")
@click.option("--time-limit", "time_limit", metavar="DURATION", help="Stop cleanly before this wall-clock limit "
              "(90s, 45m, 4h, 1h30m, 1:30:00 or seconds) counted from the command's start: last.pt saved, exit 75, "
              "continue with --resume (a suite: the same command) [-o train.time_limit].")
@click.option("--checkpoint", type=click.Path(dir_okay=False), help="Only score this checkpoint (score_only).")
@click.option("--lengths", metavar="L1,L2,...", help="With --checkpoint: score it at each length and write one "
              "table and plot of the score against length (lengths.md, lengths.png in --out).")
@click.option("--evaluator", default=None, help="Protocol: train_eval (default) or score_only "
              "(`ssmbench ls evaluators`).")
@click.option("--split", default=None, type=click.Choice(["val", "test"]),
              help="Split scored by score_only / --checkpoint [default: test].")
@click.option("--logger", type=click.Choice(["tensorboard", "wandb"]), help="Also log to TensorBoard or W&B.")
@click.option("--log-samples", is_flag=True, help="Also write the test split's per-sample predictions to "
              "RUN/predictions/test.npz (-o eval.log_samples=true).")
@click.option("--force", is_flag=True, help="Train even when the estimated peak memory exceeds the free memory.")
@click.option("--pack", "pack", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Runs of a suite sharing an architecture and shapes (--seeds, same-shaped tasks) train as one "
                   "stacked model: auto where a packed step measures faster on this device, always, or never (one "
                   "by one). The results are the same.")
@click.option("--allow-noncausal", is_flag=True, help="Run a mixer declaring causal = False on a causal task "
              "(results are marked non-compliant).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or per-evaluation lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def eval_command(**given: Any) -> None:
    """Train a model on a task with the paper's protocol and score it (R², accuracy, macro-F1)."""
    from ..config import parse_overrides
    from ..harness.runtime.time_limit import TimeLimitReached

    keys: dict[str, Any] = parse_overrides(given["overrides"], removable=True)
    deadline = _deadline(given["time_limit"], keys)  # before anything slow: a bad DURATION is one line, exit 2
    if deadline is not None and (given["checkpoint"] or given["evaluator"] == "score_only"):
        raise click.UsageError("--time-limit stops training runs; --checkpoint / --evaluator score_only train nothing")
    if given["resume_dir"]:
        _resume_takes_its_config(click.get_current_context(), keys, given["log_samples"])
    _refuse_conflicts(click.get_current_context(), given)
    given["config_read"] = _early_checks(given["model"], given["preset"], given["config_file"], keys,
                                         given["device"], given["checkpoint"], given["evaluator"])
    try:
        _eval(_request_parts(given, keys, deadline), given["as_json"])
    except TimeLimitReached as exc:
        _stopped(exc, given["as_json"])


RUN_DEFINING = ("model", "task", "length", "size", "preset", "config_file", "seed", "seeds", "precision", "evaluator",
                "split", "allow_noncausal", "out", "runs_root")
"""eval's options that define (or place) a run: `--resume` takes the run's own, so each is a usage error there."""


def _resume_takes_its_config(ctx: click.Context, keys: dict[str, Any], log_samples: bool) -> None:
    """`--resume RUN` with an option that defines a run (--model, --task, --preset, --seed, --out, ...) or an -o key
    that --resume cannot change: one line naming it (exit 2), instead of a run that silently ignores it."""
    from click.core import ParameterSource

    from ..errors import ConfigError
    from ..harness.evaluation import RESUMABLE_KEYS

    hint = ("--resume takes -o train.steps=N (to extend the run), --time-limit, --device, --data, --compile, "
            "-o data.workers=N, --logger, --force, -q, --json; to change the run itself, start a new one")
    for name in RUN_DEFINING:
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            option = next(o for o in ctx.command.params if o.name == name).opts[-1]
            raise ConfigError(option, "not with --resume, which continues the run with its own config "
                              "(config.json)", hint)
    if log_samples:
        raise ConfigError("--log-samples", "not with --resume, which continues the run with its own config "
                          "(config.json)", hint)
    bad = [k for k in keys if k not in RESUMABLE_KEYS]
    if bad:
        raise ConfigError(bad[0], "cannot change on --resume: it takes the run's own config (its config.json)",
                          f"only {', '.join(RESUMABLE_KEYS)} may be given; start a new run to change anything else")


def _refuse_conflicts(ctx: click.Context, given: dict[str, Any]) -> None:
    """Options that contradict each other or point a run at the wrong place: one line, exit 2, before anything runs.
    `--seed N --seeds A,B` would run seeds A and B and record N; a run folder inside a dataset folder would be mixed
    into the dataset's files."""
    from pathlib import Path

    from click.core import ParameterSource

    from ..errors import ConfigError

    if given["seeds"] and ctx.get_parameter_source("seed") in (ParameterSource.COMMANDLINE,
                                                                ParameterSource.ENVIRONMENT):
        raise ConfigError("--seed", f"conflicts with --seeds {given['seeds']} (which names every seed to run)",
                          f"give one of them: --seeds {given['seeds']}, or --seed {given['seed']} alone")
    for option, value in (("--out", given["out"]), ("--runs-root", given["runs_root"])):
        dataset = dataset_folder_at(value) if value else None
        if dataset is not None:
            where = "a dataset folder" if Path(dataset) == Path(value).absolute() else f"inside the dataset folder {dataset}"
            raise ConfigError(option, f"{value} is {where}: a run there would be mixed into the dataset's files",
                              "choose a folder outside it (the default is runs/<task>-<model>-<time>)")


def dataset_folder_at(path: str | os.PathLike[str]) -> str | None:
    """The dataset folder (a folder whose manifest.json names a task and its splits) that `path` is or lies in;
    None when there is none (only folders that exist are read)."""
    from pathlib import Path

    here = Path(path).absolute()
    for folder in (here, *here.parents):
        manifest = folder / "manifest.json"
        if manifest.is_file():
            try:
                obj = json.loads(manifest.read_text(errors="replace"))
            except (OSError, ValueError):
                continue
            if isinstance(obj, dict) and "splits" in obj and "task" in obj:
                return str(folder)
    return None


def _early_checks(model: str | None, preset: str, config_file: str | None, keys: dict[str, Any],
                  device: str | None, checkpoint: str | None, evaluator: str | None) -> Any:
    """What can be checked from names, tables and files alone, before torch, Numba or a model is imported (those
    take 15-20 s on a busy machine): registered model and evaluator names (the registry's tables, not the plug-ins),
    the preset name, -o keys and values of the train / eval / data / hardware sections, --device, and that
    --checkpoint exists. Task names (--task also takes the groups the tasks declare), model and task keys
    (-o model.*, -o L=...) need the tasks' and the model's own code and are checked when they are loaded.
    Returns `--config FILE` as read here, (text, keys), or None: the run's settings carry it, not read again."""
    from ..config import read_config_file
    from ..errors import ConfigError
    from ..harness.config.run_config import check_keys
    from ..registry import evaluators, models

    if checkpoint is not None and not os.path.isfile(checkpoint):
        what = "is a folder" if os.path.isdir(checkpoint) else "does not exist"
        raise ConfigError("--checkpoint", f"{checkpoint} {what}",
                          "pass a checkpoint that `ssmbench eval` wrote (RUN/checkpoints/best.pt or last.pt)")
    if model is not None and ":" not in model:
        models.canonical(model)
    if evaluator is not None and ":" not in evaluator:
        evaluators.canonical(evaluator)
    if preset not in ("quick", "paper"):
        from ..harness.config.presets import paper_rows

        rows = paper_rows()
        if preset not in rows:
            import difflib

            close = difflib.get_close_matches(preset, ["quick", "paper", *rows], n=1)
            raise ConfigError("--preset", f"unknown preset {preset!r}" + (f"; did you mean {close[0]!r}?" if close
                                                                           else ""), "run `ssmbench ls presets`")
    read = read_config_file(config_file) if config_file else None
    file_keys = dict(read[1]) if read else {}
    check_keys({**file_keys, **keys})
    for asked in (device, keys.get("hardware.device"), file_keys.get("hardware.device")):
        if isinstance(asked, str):
            _check_device(asked.strip())
    return read


def _check_device(name: str) -> None:
    """--device's form, and `cuda` on a Linux machine with no GPU device node at all (torch would say the same after
    its import); anything else is left to torch."""
    import glob

    from ..errors import ConfigError

    if name in ("auto", "cpu"):
        return
    if not (name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit())):
        raise ConfigError("--device", f"expected auto, cpu, cuda or cuda:i, got {name!r}")
    nodes = ("/dev/nvidia[0-9]*", "/dev/nvhost*", "/dev/nvmap", "/dev/kfd", "/dev/dxg")
    if sys.platform.startswith("linux") and not any(glob.glob(pattern) for pattern in nodes):
        raise ConfigError("--device", f"{name} was asked for but this machine has no usable CUDA device",
                          "use --device cpu (or auto)")


def _deadline(flag: str | None, keys: dict[str, Any]) -> Any:
    """The command's Deadline (counted from the process start) from --time-limit, else -o train.time_limit (taken
    out of `keys`: the limit is no key of the run or the suite), else None; a bad DURATION is a ConfigError."""
    from ..harness.runtime import time_limit as TL

    TL.anchor_at_process_start()  # a limit from --config FILE also counts from the process start
    raw = keys.pop("train.time_limit", None)
    option = "train.time_limit"
    if flag is not None:
        raw, option = flag, "--time-limit"
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("none", "null")):
        return None
    return TL.Deadline(TL.parse_duration(raw, option))


def _stopped(exc: Any, as_json: bool) -> None:
    """A run or suite stopped at its time limit: one line with the command that continues it, exit 75."""
    from .app import _leave_process_group

    if os.environ.get("RANK", "0") == "0":
        if exc.suite is not None:
            again = shlex.join(["ssmbench", *sys.argv[1:]])
            line = f"{exc.summary}; continue with: {again}"
        else:
            again = exc.resume_command()
            line = f"{exc.summary}; continue with: {again}"
        if as_json:
            emit({"stopped": "time_limit", "exit_code": exc.exit_code, "run_dir": exc.run_dir, "suite": exc.suite,
                  "step": exc.step, "steps": exc.steps, "continue": again}, True, "")
        click.echo(line, err=True)
        if exc.suite is None and exc.hint and not exc.hint.startswith("continue with"):
            click.echo(f"hint: {exc.hint}", err=True)
    _leave_process_group()  # every rank stopped at the same step boundary
    sys.exit(exc.exit_code)


def _request_parts(given: dict[str, Any], keys: dict[str, Any], deadline: Any) -> dict[str, Any]:
    """The command's options as the parts of one `RunRequest` (`dispatch.plan` decides its mode); the
    combinations of options that make no command are usage errors here."""
    from ..harness.config.run_request import RunOptions, RunSettings, TaskSelector

    checkpoint, evaluator, split = given["checkpoint"], given["evaluator"], given["split"]
    if given["log_samples"]:
        keys["eval.log_samples"] = "true"
    if checkpoint and given["resume_dir"]:
        raise click.UsageError("--checkpoint scores a checkpoint and --resume continues a run: give one of them")
    if checkpoint and evaluator not in (None, "score_only"):
        raise click.UsageError(f"--checkpoint is scored by the score_only evaluator, not {evaluator}")
    scoring = bool(checkpoint) or evaluator == "score_only"
    if given["force"] and scoring:
        raise click.UsageError("--force lets a training run past the memory check; scoring runs no such check")
    if split and not scoring:
        raise click.UsageError("--split chooses what --checkpoint / --evaluator score_only scores; training always "
                               "selects on val and scores test")
    lengths: tuple[int, ...] = ()
    if given["lengths"] is not None:
        from ..harness.length_sweep import parse_lengths

        if not checkpoint:
            raise click.UsageError("--lengths scores a trained checkpoint at several lengths: add --checkpoint "
                                   "RUN/checkpoints/best.pt")
        if given["length"] is not None or given["size"] is not None:
            raise click.UsageError("--lengths already names the lengths: drop --length / --size")
        lengths = tuple(parse_lengths(given["lengths"]))
    seeds = () if checkpoint or given["resume_dir"] else tuple(_seeds(given["seeds"]))  # read by runs only
    settings = RunSettings(preset=given["preset"], config_file=given["config_file"], overrides=keys,
                           config_read=given["config_read"], seed=given["seed"], seeds=seeds,
                           allow_noncausal=given["allow_noncausal"], evaluator=evaluator or "train_eval", split=split)
    options = RunOptions(device=given["device"], precision=given["precision"], compile=given["compile_"], cuda_graph=given["cuda_graph"],
                         data=given["data"], out=given["out"], runs_root=given["runs_root"], quiet=given["quiet"],
                         logger=given["logger"], force=given["force"], time_limit=deadline,
                         pack=given["pack"])
    return {"model": given["model"], "selector": TaskSelector(given["task"], given["length"], given["size"]),
            "settings": settings, "options": options, "resume_dir": given["resume_dir"], "checkpoint": checkpoint,
            "lengths": lengths}


def _eval(parts: dict[str, Any], as_json: bool) -> None:
    """Plan the request (`dispatch.plan`), run it (`dispatch.run_request`) and print what it made."""
    from ..harness.dispatch import plan, run_request

    request = plan(**parts)

    outcome = run_request(request, None if as_json or request.mode != "suite" else (lambda r: _report([r], False)))
    split = request.settings.split
    if outcome.sweep is not None:
        from ..harness.length_sweep import markdown

        sweep = outcome.sweep
        emit({"folder": str(sweep.folder), "trained_length": sweep.trained_length, "split": sweep.split,
              "rows": sweep.rows}, as_json, f"{markdown(sweep)}\n\n{sweep.folder}/lengths.md, lengths.png")
    elif request.mode == "checkpoint":
        _report(outcome.results, as_json, splits=(split or "test",))
    elif request.mode == "single":
        _report(outcome.results, as_json, splits=(split,) if split else ("val", "test"))
    elif request.mode == "resume":
        _report(outcome.results, as_json)
    else:
        from ..harness.results.compare import build_table, load_runs, render_text

        table = build_table(load_runs([r.run_dir for r in outcome.results]))
        emit({"suite": str(outcome.suite), "runs": [str(r.run_dir) for r in outcome.results], "table": table},
             as_json, "\n" + render_text(table))


def _seeds(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise click.UsageError(f"--seeds takes integers separated by commas, e.g. 0,1,2 (got {text!r})") from None
    if len(set(seeds)) != len(seeds):
        raise click.UsageError(f"--seeds names a seed twice: {text}")
    return seeds


def _report(results: list[Any], as_json: bool, splits: tuple[str, ...] = ("val", "test")) -> None:
    if os.environ.get("RANK", "0") != "0":  # under torchrun only rank 0 reports (every rank holds the same numbers)
        return
    from ..harness.metrics.headlines import headline_keys

    for r in results:
        m = r.metrics
        head = [f"{s} " + ", ".join(f"{k} {m[s][k]:.4f}" for k in headline_keys(m[s]) if isinstance(m[s].get(k), float))
                for s in splits if s in m]
        emit({"run_dir": str(r.run_dir), **{s: m[s] for s in splits if s in m},
              **{k: m.get(k) for k in PACE_KEYS}}, as_json, f"{r.run_dir}: " + "; ".join(head) + _pace(m))


PACE_KEYS = ("time_per_step_s", "data_wait_share", "startup_s")


def _pace(m: dict[str, Any]) -> str:
    """How a training run went, for the result line: whether the data workers kept up is the first thing to know
    when a run is slower than expected (a score-only run has none of these).

    >>> _pace({"time_per_step_s": 0.0123, "data_wait_share": 0.004, "startup_s": 1.52})
    ' (12.3 ms a step, 0.4 % of it waiting for data; start-up 1.5 s)'
    >>> _pace({})
    ''
    """
    if not all(isinstance(m.get(k), int | float) for k in PACE_KEYS):
        return ""
    return (f" ({1e3 * m['time_per_step_s']:.1f} ms a step, {100 * m['data_wait_share']:.1f} % of it waiting for "
            f"data; start-up {m['startup_s']:.1f} s)")


@cli.command("compare", epilog="Examples:\n\n\b\n  ssmbench compare runs/*\n"
                                "  ssmbench compare runs/* --markdown > table.md\n  ssmbench compare runs/* --json")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--markdown", is_flag=True, help="Print a Markdown table.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def compare_command(runs: tuple[str, ...], markdown: bool, as_json: bool) -> None:
    """A table across finished runs like the paper's Table 1 (tasks x models; exact and per-batch R²).

    RUNS are run folders, suite folders or folders holding either; what cannot be tabulated is skipped with a note."""
    from ..harness.results.compare import build_table, load_runs, render_markdown, render_text

    loaded = load_runs(runs)
    if not loaded:
        raise click.UsageError("none of the given folders holds a finished run with test scores (see the notes "
                               "above)")
    table = build_table(loaded)
    if as_json:
        click.echo(json.dumps(table, sort_keys=True, default=str))
    else:
        click.echo(render_markdown(table) if markdown else render_text(table))


def list_presets_text(as_json: bool) -> str:
    from ..harness.config.presets import list_presets

    items = list_presets()
    if as_json:
        return json.dumps(items, sort_keys=True)
    width = max(len(i["name"]) for i in items)
    return "\n".join(f"{i['name']:<{width}}  {i['source']}" + (f"; {i['notes']}" if i["name"].startswith("quick (")
                                                                else "") for i in items)

