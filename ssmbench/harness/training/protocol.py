"""The `train_eval` protocol of one run: build the model once, check it, train with selection on val, score test.

`ssmbench.evaluate` resolves the config (`config.resolver`) and hands it to the evaluator; the default evaluator,
`evaluators/train_eval.py`, runs `train_and_score` here, and `evaluation.resume` continues a run through it. In
order: the intra-op threads, the shapes-only memory check, the model built once (`trainer.setup`), its direction,
its facts (output probe, causality check) and its measured memory, and only then the run folder (a refused model
leaves nothing behind), under its lock; then the training loop, metrics.json and the learning curves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import ConfigError, SsmbenchError
from ..config.run_config import RunConfig
from ..results.eval_result import EvalResult
from ..results.run_folder import RunFolder, default_run_dir, run_lock
from ..runtime import time_limit as TL

NOT_DEFINING = {"data": ("workers", "prefetch", "path"), "hardware": ("device", "compile", "cuda_graph", "threads")}
"""config.json keys that do not define a run: a folder that saved no step restarts when only these differ."""


def train_and_score(config: RunConfig, out: str | Path | None, runs_root: str | Path | None, *, resume: bool = False,
                    quiet: bool = False, logger: str | None = None, force: bool = False,
                    restart: bool = False, last: dict[str, Any] | None = None,
                    score_lengths: Callable[..., dict[str, Any]] | None = None) -> EvalResult:
    """The `train_eval` protocol: build the model once, check it (output shape, causality, memory: `force` runs a
    model whose estimated peak memory exceeds the device's free memory), train with selection on val, score test.
    `restart`: `out` holds this run's config.json and no saved step; start it again from step 0 (`resume`).
    `last`: with `resume`, the run's last.pt as `resume` loaded it already. `score_lengths`
    (`length_sweep.score_lengths`, passed by the entry points above this floor): a run with `eval.test_lengths`
    scores its best checkpoint at each, under the folder's lock, into metrics.json's "lengths"."""
    import torch

    from ..feed.batches import prefer_fork_safe_numba
    from ..results.loggers import check_logger, make_logger
    from ..runtime import distributed as D
    from ..runtime import lengths as length_protocol
    from .trainer import train

    if length_protocol.eval_lengths(config) and score_lengths is None:
        raise ConfigError("eval.test_lengths", "scoring the test lengths needs the caller's length scoring",
                          "train through ssmbench.evaluate / the train_eval evaluator, or pass "
                          "score_lengths=ssmbench.harness.length_sweep.score_lengths")
    prefer_fork_safe_numba()
    check_logger(logger)
    config, threads = with_threads(config, config.data.workers)
    env = D.init_distributed(config.hardware.device)
    s, facts = preflight(config, env, force, threads)
    path = Path(out) if out else D.broadcast_object(default_run_dir(runs_root or "runs", config.task, config.model))
    run = RunFolder(path)
    fresh = not resume and not path.exists()
    ext = None
    start = time.time()
    with contextlib.ExitStack() as held:
        claim(held, run, config, env, resume=resume, restart=restart)
        try:
            if env.is_main:
                run.create()
                run.write_config(config.to_json())
                ext = make_logger(logger, run.path, config)
            D.barrier()
            metrics = train(s, run, resume=resume, quiet=quiet, logger=ext, last=last)
        except torch.OutOfMemoryError as exc:
            _discard_if_empty(run, fresh and env.is_main)
            raise out_of_memory(config, exc) from None
        except BaseException as exc:  # a time limit spent before the first step: kept, for the --resume it prints
            _discard_if_empty(run, fresh and env.is_main and not isinstance(exc, TL.TimeLimitReached))
            raise
        finally:
            if ext is not None:
                ext.close()
        if length_protocol.eval_lengths(config):  # train short, test long: the best checkpoint at each length
            assert score_lengths is not None  # refused before training otherwise
            metrics["lengths"] = score_lengths(config, run, quiet=quiet)
        conclude(run, config, metrics, facts, start, env)
    return EvalResult(run.path, config, metrics)


def with_threads(config: RunConfig, workers: int) -> tuple[RunConfig, dict[str, Any]]:
    """Set the intra-op threads for `workers` data workers in all; the config records the count (resumed with other
    workers or elsewhere, the run keeps the reductions of its start)."""
    from ..runtime.threads import apply_threads

    threads = apply_threads(config.hardware.threads, workers)
    if config.hardware.threads is None:
        config = dataclasses.replace(config, hardware=dataclasses.replace(config.hardware,
                                                                          threads=threads["threads"]))
    return config, threads


def preflight(config: RunConfig, env: Any, force: bool, threads: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Before any folder exists: the shapes-only memory bound, the model built once (`trainer.setup`, which refuses a
    causal-only mixer on a bidirectional task first), its facts and its measured memory -> (setup, facts)."""
    from ..feed.folder_feed import probe_inputs
    from .cuda_graph import check_cuda_graph
    from .facts import model_facts
    from .memory import check_batch_fits, check_fits
    from .trainer import setup

    check_cuda_graph(config, env.device, env.distributed)  # before anything is built or written
    check_batch_fits(config, config.resolved_task.spec, env.device, env.world_size, force)
    s = setup(config, env)
    facts = {**model_facts(s), **threads}
    facts["memory"] = check_fits(s, probe_inputs(config, "val", 1).to(env.device), force)
    return s, facts


def claim(held: contextlib.ExitStack, run: RunFolder, config: RunConfig, env: Any, *, resume: bool,
          restart: bool = False) -> None:
    """Take the run folder's lock (rank 0, held until `held` closes) and check that this run may start there; every
    rank raises rank 0's refusal."""
    from ..runtime import distributed as D

    problem = None
    if env.is_main:
        try:  # one writer per run folder; a folder of this run that saved no step starts again
            held.enter_context(run_lock(run.path))
            _check_start(run, config, resume=resume, restart=restart)
        except SsmbenchError as exc:
            problem = exc
    shared = D.broadcast_object(None if problem is None else problem.message)
    if problem is not None:
        raise problem
    if shared is not None:  # another rank: rank 0 refused
        raise SsmbenchError(shared)


def conclude(run: RunFolder, config: RunConfig, metrics: dict[str, Any], facts: dict[str, Any], start: float,
             env: Any) -> None:
    """metrics.json (with the model's facts and the wall time) and the learning curves, by rank 0."""
    from ..results.plots import learning_curves
    from ..runtime import distributed as D

    metrics.update(facts, wall_time_s=time.time() - start)
    if env.is_main:
        learning_curves(run.read_log(), run.plots / "learning_curves.png", title=f"{config.task} / {config.model}")
        run.write_metrics(metrics)
    D.barrier()


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
        T = config.resolved_task.spec.seq_len
    except Exception:  # noqa: BLE001  (only the message needs it)
        T = "?"
    tips = [f"-o train.batch_size={max(1, t.batch_size // 2)}" if t.batch_size > 1 else None,
            f"-o eval.batch_size={max(1, config.eval.batch_size // 2)}" if config.eval.batch_size > 1 else None,
            "--precision bf16" if precision == "fp32" else None]
    first = str(exc).splitlines()[0] if str(exc) else "out of memory"
    return SsmbenchError(f"CUDA out of memory training {config.model} on {config.task} (T = {T}, global batch "
                         f"{t.batch_size}, eval batch {config.eval.batch_size}, {precision}): {first[:120]}",
                         "try " + " or ".join(x for x in tips if x) + " (under torchrun, more GPUs share the batch)")
