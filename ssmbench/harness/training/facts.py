"""What metrics.json records about a run besides its scores, and the checks of a built model before training.

`model_facts(setup)` probes the model built for the run (one forward on two validation samples: a wrong output
shape or dtype is a usage error), runs the causality check on causal tasks (perturb the future, the past must not
move; a mixer that declares `causal = True` and leaks is refused) and collects versions, seeds, sizes and the
environment. `check_direction` refuses a causal-only mixer on a bidirectional task before anything is built.
"""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

from ... import __version__
from ...errors import ConfigError


def model_facts(s: Any) -> dict[str, Any]:
    """Everything metrics.json records besides the scores, for a built `trainer.Setup`; refuses a model with the
    wrong output and a mixer that claims causality and leaks."""
    import numpy as np
    import torch

    from ...config import config_sha256
    from ..models.build import causality_checks
    from ..runtime.threads import usable_cpus

    config, env, spec, model = s.cfg, s.env, s.spec, s.model
    task = config.resolved_task.task
    n_params = sum(p.numel() for p in model.parameters())
    mixers = getattr(model, "mixers", [])
    state = sum(m.state_size(spec.seq_len) for m in mixers if hasattr(m, "state_size")) if mixers else None
    devices = [env.device] if env.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # the probes draw no number that training would see
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
                        "usable_cpus": usable_cpus(), "dev_shm_free_mib": _shm_free_mib(),
                        "cuda_device": torch.cuda.get_device_name(env.device) if env.device.type == "cuda" else None},
        "device": str(env.device.type), "world_size": env.world_size, "precision": config.hardware.precision,
        "parameters": n_params, "state_size": state, "layers": config.model_overrides.get("n_layers"),
        "seq_len": spec.seq_len, "batch_size": config.train.batch_size, "causality": causality}


def _shm_free_mib() -> int | None:
    """Free MiB of /dev/shm before the data workers start: below ~700 MiB (a container's default is 64) their
    messages hold fewer steps, which a fast GPU step pays for (`TrainFeed.shm_note`); None without /dev/shm."""
    from ...data.read.ring import shm_free

    free = shm_free()
    return None if free is None else free >> 20


def _probe(model: Any, config: Any, device: Any) -> None:
    """One forward on two validation samples: a model with the wrong output shape or dtype is a usage error."""
    import torch

    from ...errors import SsmbenchError
    from ..feed.folder_feed import probe_inputs

    sample = probe_inputs(config, "val", 2)
    try:
        with torch.no_grad():
            model(sample.to(device))
    except ConfigError:
        raise
    except SsmbenchError as exc:
        raise ConfigError("--model", exc.message, "a model maps (B, T, ...) to (B, l_output, d_output) floats; "
                                                  "see `ssmbench describe TASK` for the shapes") from None


def _causality(model: Any, spec: Any, config: Any, checks: Any, device: Any) -> dict[str, Any]:
    """The perturbation check of the built model on two validation samples (causal tasks only)."""
    if not spec.causal:
        return {"applicable": False}
    from ..feed.folder_feed import probe_inputs

    sample, alt = probe_inputs(config, "val", 2), probe_inputs(config, "test", 2)
    reports = checks(model, sample.to(device), x_alt=alt.to(device), l_output=spec.l_output)
    return {"applicable": True, "passed": all(r.passed for r in reports.values()),
            "summary": "; ".join(str(r) for r in reports.values()),
            **{k: r.to_json() for k, r in reports.items()}}


def check_direction(config: Any, spec: Any) -> None:
    """A bidirectional task (Pathfinder) refuses a causal-only mixer unless `-o model.bidirectional=false` forces a
    causal run, which is logged as not the paper's setting."""
    import inspect
    import logging

    from ..config.model_lookup import is_mixer
    from ..config.model_lookup import resolve as resolve_model

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


def git_revision() -> str | None:
    """The checkout's commit when ssmbench runs from a git working tree (editable installs), else None.

    None too when this file is not tracked by the enclosing repository (an exported copy such as `git archive`'s
    inside another checkout): that repository's commit says nothing about the code that ran.
    """
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
        tracked = subprocess.run(["git", "-C", str(here), "ls-files", "--error-unmatch", Path(__file__).name],
                                 capture_output=True, timeout=5, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    if out.returncode or not rev or not tracked:
        return None
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5, check=False).stdout.strip()
    return rev + ("-dirty" if dirty else "")


