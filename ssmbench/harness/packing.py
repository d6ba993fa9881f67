"""Which runs of a suite train together as packs, and running a pack (`training.pack_protocol`).

Runs pack when they would build the same architecture on inputs of the same shapes and step in lockstep: everything
in their configs is equal but for what a member may hold on its own (`MEMBER_KEYS`: its seed, its data stream, its
learning rate, weight decay, AdamW constants and schedule, its task and task config when the task's shapes are
equal, its evaluation sizes) and for the keys that only place a run (threads). Runs resumed from a last.pt pack
with the runs at the same step. The evaluator must be `train_eval`; fp16 (a loss scaler per member), `--compile`
and an external logger keep runs one by one. Whether packing pays is measured on the built models (`--pack auto`, the
default: a packed forward and backward against the members' one by one, `pack_protocol.pack_pays`; `always` skips
the timing). Whether the built models really stack (a plug-in that declares
`packable = False`, a forward that fails under vmap) is checked on the built models (`pack.pack_problem`), and a
group that does not stack runs one by one with a line saying why. Runs of the train-short-test-long protocol
(`runtime.lengths.in_use`: per-step lengths or test lengths) train one by one.

Example:
    >>> from ssmbench.harness.config.resolver import resolve_run
    >>> a, b = (resolve_run("dlr", "cumsum", seed=s) for s in (0, 1))
    >>> c = resolve_run("dlr", "cumsum", overrides={"model.d_model": 32})
    >>> pack_key(a, 0) == pack_key(b, 0), pack_key(a, 0) == pack_key(c, 0)
    (True, False)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MEMBER_KEYS = {
    "top": ("task", "task_config", "seed", "preset"),
    "train": ("lr", "lr_ssm", "weight_decay", "beta1", "beta2", "eps", "schedule", "warmup_steps", "schedule_steps",
              "time_limit"),
    "eval": ("val_samples", "test_samples", "batch_size", "metric_batch_size", "monitor", "monitor_variant"),
    "data": ("seed", "path", "dataset_id", "train_samples"),
    "hardware": ("threads",),
}
"""What each member of a pack may hold on its own; every other config key must be equal across a pack."""


def pack_key(config: Any, start_step: int) -> str | None:
    """The text equal for runs that can share a pack (None: this run trains alone), from its resolved config and
    the step it starts from."""
    from .runtime.lengths import in_use

    h = config.hardware
    if h.precision == "fp16" or h.compile or config.eval.log_samples or in_use(config):
        return None  # train short, test long: batches of one shape across a pack, and a scoring of its own
    shared = {k: v for k, v in config.to_json().items() if k not in MEMBER_KEYS["top"]}
    for section, keys in MEMBER_KEYS.items():
        if section != "top" and isinstance(shared.get(section), dict):
            shared[section] = {k: v for k, v in shared[section].items() if k not in keys}
    spec = config.resolved_task.spec.to_json()
    shapes = {k: spec[k] for k in ("input_kind", "d_input", "seq_len", "target_kind", "d_output", "l_output")}
    shapes["fields"] = {name: (f["dtype"], f["shape"]) for name, f in spec["fields"].items()}
    return json.dumps({"config": shared, "shapes": shapes, "step": start_step}, sort_keys=True, default=str)


@dataclass
class Pending:
    """A suite run that is not finished: its label, task, seed and folder; filled in by `SuitePacker.group`."""

    label: str
    task: str
    seed: int | None
    path: Path
    config: Any = None
    last: dict[str, Any] | None = None
    key: str | None = None


class SuitePacker:
    """Groups a suite's pending runs into packs and trains a pack. `resolve(task, out, seed)` resolves a new run's
    config as the single run would (`resolver.resolve_request` of the suite's member request)."""

    def __init__(self, resolve: Callable[[str, Path, int | None], Any], *, quiet: bool = False,
                 force: bool = False, policy: str = "auto") -> None:
        self.resolve, self.quiet, self.force, self.policy = resolve, quiet, force, policy

    def group(self, pending: Sequence[Pending], logger: str | None = None) -> list[list[Pending]]:
        """The pending runs in groups (each in suite order, groups in the order of their first run); a group of
        one trains alone. Resolving a run here resolves it as its single run would; a run that cannot be resolved
        stays alone (its own run reports the problem)."""
        from ..errors import SsmbenchError
        from .results.run_folder import RunFolder

        groups: dict[str, list[Pending]] = {}
        alone: list[list[Pending]] = []
        order: list[Any] = []
        for p in pending:
            run = RunFolder(p.path)
            try:
                if run.last.exists():
                    p.config, p.last = _saved(run)
                    step = int(p.last["state"]["step"])
                else:
                    p.config, step = self.resolve(p.task, p.path, p.seed), 0
                p.key = None if logger else pack_key(p.config, step)
            except (SsmbenchError, KeyError, TypeError, ValueError):
                p.key = None
            if p.key is None:
                alone.append([p])
                order.append(alone[-1])
            elif p.key in groups:
                groups[p.key].append(p)
            else:
                groups[p.key] = [p]
                order.append(groups[p.key])
        return order

    def run(self, group: Sequence[Pending]) -> list[Any]:
        """Train a group as a pack; each member's EvalResult or the error that stopped it alone."""
        from .training.pack_protocol import PackMember, train_and_score_pack

        members = [PackMember(p.config, p.path, resume=p.last is not None, last=p.last) for p in group]
        return train_and_score_pack(members, quiet=self.quiet, force=self.force, policy=self.policy)


def _saved(run: Any) -> tuple[Any, dict[str, Any]]:
    """A folder's run as `evaluation.resume` continues it: its config.json re-resolved, and its last.pt."""
    from .config.resolver import resolve_saved
    from .config.run_config import RunConfig
    from .evaluation import _refuse_steps_below_reached, _relocate_data

    config = _relocate_data(resolve_saved(RunConfig.from_json(run.read_config()), {}), explicit=False)
    return config, _refuse_steps_below_reached(run, config.train.steps)
