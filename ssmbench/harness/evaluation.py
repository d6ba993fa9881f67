"""`ssmbench.evaluate`: resolve a run config, train and score a model in a run folder, return its metrics.

Config resolution: the task's config at `--length` / `--size` -> training preset (`quick` or `paper`) ->
`--config FILE` -> `-o key=value` -> explicit hardware options. The resolved `RunConfig` is written to
`RUN/config.json` before the first step; `evaluate(config=RunConfig.from_json(...))` repeats the run exactly.

Example (a tiny CPU run; `quiet` silences the progress bar):
    >>> import tempfile
    >>> r = evaluate("dlr", "cumsum", overrides={"L": 32, "train.steps": 4, "train.eval_every": 2,
    ...              "model.d_model": 8, "model.d_state": 32, "eval.val_samples": 8, "eval.test_samples": 8,
    ...              "data.workers": 0}, out=tempfile.mkdtemp() + "/run", quiet=True)
    >>> sorted(r.metrics["test"])[:3], (r.run_dir / "metrics.json").exists()
    (['mse', 'n', 'n_batches_batchavg'], True)
"""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ConfigError, SsmbenchError
from ..plain import json_plain
from .presets import ATOMIC, resolve_preset
from .run_config import RunConfig, task_config_object
from .run_folder import RunFolder, default_run_dir

RESUMABLE_KEYS = ("train.steps", "data.workers", "data.prefetch", "data.path", "hardware.device", "hardware.compile")


@dataclass
class EvalResult:
    run_dir: Path
    config: RunConfig
    metrics: dict[str, Any]


def resolve_run_config(model: str, task: str, preset: str = "quick", *, length: int | None = None,
                       size: int | None = None, config_file: str | Path | None = None,
                       overrides: Mapping[str, Any] | None = None, seed: int = 0,
                       allow_noncausal: bool = False, data: str | Path | None = None) -> RunConfig:
    """Preset -> config file -> overrides, validated; `${T}` in a preset becomes the task's input length.

    Folder-backed tasks (ListOps, Pathfinder) also settle their dataset folder (`data`, else `data.path`, else a
    matching folder under the data root) and take the folder's task config; see `data_folders.attach_folder`.
    """
    from ..config import load_config_file
    from ..data.task_config import resolve_config
    from ..registry import get_task
    from .data_folders import FOLDER_TASKS, attach_folder, folder_size, is_folder_task

    get_task(task)  # unknown task: did-you-mean, before anything else
    user: dict[str, Any] = dict(load_config_file(config_file)) if config_file else {}
    user.update(overrides or {})
    data = data if data is not None else user.get("data.path")
    if data is not None and not is_folder_task(task):
        raise ConfigError("--data", f"{task} draws fresh samples every step and takes no dataset folder",
                          f"--data applies to {', '.join(FOLDER_TASKS)}")
    asked_size = user.get("size", user.get("task.size"))
    if data is not None and size is None and asked_size is None and get_task(task).preset_option == "size":
        size = folder_size(data)  # the folder's size picks the paper preset's family
    p = resolve_preset(preset, task, model, length=length, size=size)
    keys: dict[str, Any] = _for_model(model, p.keys)
    keys.update(user)
    task_keys = {k.removeprefix("task."): v for k, v in keys.items() if k.startswith("task.") or "." not in k}
    other = {k: v for k, v in keys.items() if not (k.startswith("task.") or "." not in k)}
    if length is not None:
        task_keys["L"] = length
    if size is not None:
        task_keys["size"] = size
    L, S = task_keys.pop("L", None), task_keys.pop("size", None)
    t = get_task(task)
    kwargs = {"length": int(L) if L is not None else None} if t.preset_option == "length" else \
        {"size": int(S) if S is not None else None} if t.preset_option == "size" else \
        {"preset": p.dataset.get("preset")}
    _, task_config, _ = resolve_config(task, overrides=[f"{k}={v}" for k, v in task_keys.items()], **kwargs)
    cfg = RunConfig(task=task, task_config=json_plain(task_config.to_dict()), model=model, seed=seed, preset=p.name,
                    allow_noncausal=allow_noncausal)
    T = t.spec(task_config).seq_len
    cfg = cfg.with_overrides({k: (T if v == "${T}" else v) for k, v in other.items()})
    if is_folder_task(task):
        explicit = {k.removeprefix("task."): v for k, v in user.items() if k.startswith("task.") or "." not in k}
        explicit.update({k: v for k, v in (("L", length), ("size", size)) if v is not None})
        cfg = attach_folder(cfg, data, explicit, p.dataset.get("n"))
    _check(cfg)
    return cfg


def _for_model(model: str, keys: Mapping[str, Any]) -> dict[str, Any]:
    """A preset's keys minus the `model.*` keys a user's factory does not take (it builds its own backbone)."""
    import inspect

    from .models import is_mixer
    from .models import resolve as resolve_model

    obj, _ = resolve_model(model)
    if is_mixer(obj):
        return dict(keys)
    accepted = set(list(inspect.signature(obj).parameters)[1:])
    return {k: v for k, v in keys.items() if not k.startswith("model.") or k.removeprefix("model.") in accepted}


def _check(cfg: RunConfig) -> None:
    from .objectives import lr_factor

    t, e = cfg.train, cfg.eval
    for name, value, low in (("train.steps", t.steps, 1), ("train.batch_size", t.batch_size, 1),
                             ("train.eval_every", t.eval_every, 1), ("eval.batch_size", e.batch_size, 1),
                             ("eval.metric_batch_size", e.metric_batch_size, 1), ("eval.val_samples", e.val_samples, 1),
                             ("eval.test_samples", e.test_samples, 0), ("data.workers", cfg.data.workers, 0)):
        if value < low:
            raise ConfigError(name, f"must be >= {low}, got {value}")
    if t.lr <= 0:
        raise ConfigError("train.lr", f"must be > 0, got {t.lr}")
    total = t.schedule_steps or t.steps  # the cosine's length; checked here, before a run folder exists
    if t.schedule == "cosine" and total <= t.warmup_steps:
        raise ConfigError("train.schedule_steps" if t.schedule_steps else "train.steps",
                          f"must exceed train.warmup_steps ({t.warmup_steps}) for the cosine schedule, got {total}",
                          f"pass -o train.warmup_steps=N with N < {total}, or more steps")
    lr_factor(t.schedule, t.warmup_steps, total)  # an unknown schedule name


def evaluate(model: str = "dlr", task: str | None = None, preset: str = "quick", *, length: int | None = None,
             size: int | None = None, config_file: str | Path | None = None,
             overrides: Mapping[str, Any] | None = None, seed: int = 0, device: str | None = None,
             precision: str | None = None, compile: bool | None = None, out: str | Path | None = None,
             runs_root: str | Path = "runs", quiet: bool = False, logger: str | None = None,
             allow_noncausal: bool = False, config: RunConfig | None = None,
             data: str | Path | None = None) -> EvalResult:
    """Train `model` on `task` with a preset and score it; the run folder is `out` or runs/<task>-<model>-<time>.

    `data` is the dataset folder of ListOps / Pathfinder (default: a matching folder under the data root); without
    `task` the folder's own task is trained. `config` (a RunConfig, e.g. from a run's config.json) replaces every
    resolution argument.
    """
    if task is None and config is None and data is not None:  # the folder names its task
        from ..data.build import load_manifest

        task = load_manifest(data)["task"]
    if task is None and config is None:
        raise ConfigError("--task", "evaluate() needs a task; `ssmbench eval` without --task runs every atomic "
                                    f"task in turn ({', '.join(ATOMIC)})")
    hardware = {f"hardware.{k}": v for k, v in (("device", device), ("precision", precision),
                                                 ("compile", compile)) if v is not None}
    if config is None:
        config = resolve_run_config(model, task, preset, length=length, size=size,  # type: ignore[arg-type]
                                    config_file=config_file, overrides={**(overrides or {}), **hardware},
                                    seed=seed, allow_noncausal=allow_noncausal, data=data)
    elif hardware:
        config = config.with_overrides(hardware)
    return _run(config, out, runs_root, resume=False, quiet=quiet, logger=logger)


def resume(run_dir: str | Path, overrides: Mapping[str, Any] | None = None, quiet: bool = False,
           logger: str | None = None) -> EvalResult:
    """Continue an interrupted run from `RUN/checkpoints/last.pt` (or extend a finished one with train.steps)."""
    run = RunFolder(run_dir)
    if not run.config_path.exists():
        raise ConfigError("--resume", f"{run.path} is not an ssmbench run folder (no config.json)",
                          "pass the folder that `ssmbench eval` printed")
    bad = [k for k in (overrides or {}) if k not in RESUMABLE_KEYS]
    if bad:
        raise ConfigError(bad[0], "cannot change on --resume (the run would no longer be reproducible)",
                          f"only {', '.join(RESUMABLE_KEYS)} may change; start a new run otherwise")
    try:
        config = RunConfig.from_json(run.read_config())
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError("--resume", f"{run.config_path} is not an ssmbench run config ({exc})") from None
    old_steps = config.train.steps
    overrides = dict(overrides or {})
    if overrides.get("data.path"):  # stored absolute: the run may be resumed from another directory
        overrides["data.path"] = str(Path(overrides["data.path"]).resolve())
    config = config.with_overrides(overrides)
    if not run.last.exists():
        raise ConfigError("--resume", f"{run.path} has no checkpoints/last.pt to resume from",
                          "start it again with `ssmbench eval` (no step was saved)")
    if run.finished and config.train.steps <= old_steps:
        raise ConfigError("--resume", f"{run.path} has already finished ({old_steps} steps)",
                          "pass -o train.steps=N with a larger N to extend it, or start a new run")
    if run.finished:
        run.metrics_path.replace(run.path / "metrics.previous.json")
    return _run(config, run.path, None, resume=True, quiet=quiet, logger=logger)


def _run(config: RunConfig, out: str | Path | None, runs_root: str | Path | None, *, resume: bool, quiet: bool,
         logger: str | None) -> EvalResult:
    import torch

    from . import distributed as D
    from .batches import prefer_fork_safe_numba
    from .loggers import make_logger
    from .plots import learning_curves
    from .trainer import train

    prefer_fork_safe_numba()
    env = D.init_distributed(config.hardware.device)
    facts = model_facts(config, env)  # before the folder exists: a model refused here leaves nothing behind
    path = Path(out) if out else D.broadcast_object(default_run_dir(runs_root or "runs", config.task, config.model))
    run = RunFolder(path)
    if not resume:
        # Only rank 0 looks: once it has written config.json, another rank would see its own run as a clash.
        if D.broadcast_object(run.config_path.exists() if env.is_main else None):
            raise ConfigError("--out", f"{path} already holds a run", "choose another --out, or continue it with "
                                                                      f"`ssmbench eval --resume {path}`")
        if env.is_main:
            run.create()
            run.write_config(config.to_json())
        D.barrier()
    if env.is_main:
        run.write_config(config.to_json())
    ext = make_logger(logger, run.path, config) if env.is_main else None
    start = time.time()
    try:
        metrics = train(config, run, resume=resume, quiet=quiet, logger=ext)
    except torch.OutOfMemoryError as exc:
        raise out_of_memory(config, exc) from None
    finally:
        if ext is not None:
            ext.close()
    metrics.update(facts, wall_time_s=time.time() - start)
    if env.is_main:
        learning_curves(run.read_log(), run.plots / "learning_curves.png", title=f"{config.task} / {config.model}")
        run.write_metrics(metrics)
    D.barrier()
    return EvalResult(run.path, config, metrics)


def model_facts(config: RunConfig, env: Any) -> dict[str, Any]:
    """Everything metrics.json records besides the scores; refuses a mixer that claims causality and leaks."""
    import numpy as np
    import torch

    from ..config import config_sha256
    from ..registry import get_task
    from .models import build_model, causality_checks

    task = get_task(config.task)
    spec = task.spec(task_config_object(config.task, config.task_config))
    check_direction(config, spec)
    torch.manual_seed(config.seed)
    model = build_model(config.model, spec, dict(config.model_overrides), allow_noncausal=config.allow_noncausal)
    model.to(env.device)
    n_params = sum(p.numel() for p in model.parameters())
    mixers = getattr(model, "mixers", [])
    state = sum(m.state_size(spec.seq_len) for m in mixers if hasattr(m, "state_size")) if mixers else None
    _probe(model, config, env.device)
    causality = _causality(model, spec, config, causality_checks, env.device)
    if causality.get("passed") is False and not config.allow_noncausal:
        raise ConfigError("--model", f"{config.model!r} declares causal = True but fails the causality check: "
                          f"{causality['summary']}", "fix the mixer, or declare causal = False")
    return {
        "task": config.task, "task_version": task.version, "model": config.model, "preset": config.preset,
        "task_config_sha256": config_sha256(dict(config.task_config)), "config_sha256": config.digest(),
        "seeds": {"train": config.seed, "data": config.data.seed},
        "ssmbench_version": __version__, "git_revision": git_revision(),
        "environment": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                        "platform": platform.platform(), "cpu_threads": torch.get_num_threads(),
                        "cuda_device": torch.cuda.get_device_name(env.device) if env.device.type == "cuda" else None},
        "device": str(env.device.type), "world_size": env.world_size, "precision": config.hardware.precision,
        "parameters": n_params, "state_size": state, "layers": config.model_overrides.get("n_layers"),
        "seq_len": spec.seq_len, "batch_size": config.train.batch_size, "causality": causality}


def _probe(model: Any, config: RunConfig, device: Any) -> None:
    """One forward on two validation samples: a model with the wrong output shape or dtype is a usage error."""
    import torch

    from ..errors import SsmbenchError
    from .folder_feed import probe_inputs

    sample = probe_inputs(config, "val", 2)
    try:
        with torch.no_grad():
            model(sample.to(device))
    except ConfigError:
        raise
    except SsmbenchError as exc:
        raise ConfigError("--model", exc.message, "a model maps (B, T, ...) to (B, l_output, d_output) floats; "
                                                  "see `ssmbench describe TASK` for the shapes") from None


def _causality(model: Any, spec: Any, config: RunConfig, checks: Any, device: Any) -> dict[str, Any]:
    """The perturbation check of the built model on two validation samples (causal tasks only)."""
    if not spec.causal:
        return {"applicable": False}
    from .folder_feed import probe_inputs

    sample, alt = probe_inputs(config, "val", 2), probe_inputs(config, "test", 2)
    reports = checks(model, sample.to(device), x_alt=alt.to(device), l_output=spec.l_output)
    return {"applicable": True, "passed": all(r.passed for r in reports.values()),
            "summary": "; ".join(str(r) for r in reports.values()),
            **{k: r.to_json() for k, r in reports.items()}}


def check_direction(config: RunConfig, spec: Any) -> None:
    """A bidirectional task (Pathfinder) refuses a causal-only mixer unless `-o model.bidirectional=false` forces a
    causal run, which is logged as not the paper's setting."""
    import inspect
    import logging

    from .models import is_mixer
    from .models import resolve as resolve_model

    if spec.causal:
        return
    forced = str(config.model_overrides.get("bidirectional", "")).strip().lower() in ("false", "0", "no", "off")
    if forced:
        logging.getLogger(__name__).warning(
            "%s runs causally (model.bidirectional=false): not the paper's setting (its %s models are "
            "bidirectional), so the scores are not comparable with Table 3", config.task, config.task)
        return
    obj, name = resolve_model(config.model)
    takes_direction = "bidirectional" in inspect.signature(obj.__init__).parameters if is_mixer(obj) else True
    if not takes_direction and getattr(obj, "causal", True):  # a `causal = False` mixer already sees both ways
        raise ConfigError("--model", f"{name!r} is causal-only (its mixer takes no `bidirectional` argument) and "
                          f"{config.task} is a bidirectional task",
                          "force a causal run with -o model.bidirectional=false (not the paper's setting)")


def out_of_memory(config: RunConfig, exc: BaseException) -> SsmbenchError:
    """CUDA out of memory -> one line naming the batch, the precision, and what to try."""
    from ..errors import SsmbenchError

    t, precision = config.train, config.hardware.precision
    try:
        from ..registry import get_task

        T = get_task(config.task).spec(task_config_object(config.task, config.task_config)).seq_len
    except Exception:  # noqa: BLE001  (only the message needs it)
        T = "?"
    tips = [f"-o train.batch_size={max(1, t.batch_size // 2)}" if t.batch_size > 1 else None,
            f"-o eval.batch_size={max(1, config.eval.batch_size // 2)}" if config.eval.batch_size > 1 else None,
            "--precision bf16" if precision == "fp32" else None]
    first = str(exc).splitlines()[0] if str(exc) else "out of memory"
    return SsmbenchError(f"CUDA out of memory training {config.model} on {config.task} (T = {T}, global batch "
                         f"{t.batch_size}, eval batch {config.eval.batch_size}, {precision}): {first[:120]}",
                         "try " + " or ".join(x for x in tips if x) + " (under torchrun, more GPUs share the batch)")


def git_revision() -> str | None:
    """The checkout's commit when ssmbench runs from a git working tree (editable installs), else None."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    if out.returncode or not rev:
        return None
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    return rev + ("-dirty" if dirty else "")


def run_all_atomic(model: str, preset: str = "quick", **kwargs: Any) -> list[EvalResult]:
    """Every atomic task in turn (the paper's Table 1 column of one model)."""
    return [evaluate(model, task, preset, **kwargs) for task in ATOMIC]

