"""The `train_eval` protocol for a pack: every member checked and placed as its single run, trained together.

For each member, as `protocol.train_and_score` does for one run: the intra-op threads (for the data workers of the
whole pack), the shapes-only memory bound, the model built once from its own seed, its facts, its measured memory;
then whether the members stack (`pack.pack_problem`, with a probe under vmap) and whether the pack fits the device's
free memory (else it is split into packs that do). A pack that cannot stack runs its members one by one, with one
line saying why. Each member's folder is locked and checked like a single run's, gets its `config.json`, and a
`pack.json` recording what it was trained with; `packed_loop.train_pack` trains; each member's `metrics.json` and
learning curves are written as a single run's.

Example (two seeds of a tiny DLR on cumsum, packed):
    >>> import tempfile
    >>> from ssmbench.harness.config.resolver import resolve_run
    >>> keys = {"L": 16, "train.steps": 4, "train.eval_every": 2, "model.d_model": 8, "eval.val_samples": 8,
    ...         "eval.test_samples": 8, "eval.metric_batch_size": 4, "data.workers": 0}
    >>> root = tempfile.mkdtemp()
    >>> members = [PackMember(resolve_run("dlr", "cumsum", overrides=keys, seed=seed), f"{root}/seed{seed}")
    ...            for seed in (0, 1)]
    >>> results = train_and_score_pack(members, quiet=True)
    >>> [r.metrics["steps"] for r in results], [r.run_dir.name for r in results]
    ([4, 4], ['seed0', 'seed1'])
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import SsmbenchError
from ..config.run_config import RunConfig
from ..results.eval_result import EvalResult
from ..results.run_folder import RunFolder
from ..runtime import time_limit as TL

PACK_RECORD = "pack.json"
"""The one file a packed member's folder holds that its single run's does not: what it was trained with."""


@dataclass(frozen=True)
class PackMember:
    """One run of a pack: its resolved config, its folder, and whether it continues from its last.pt (`last`,
    loaded already, or read by the loop)."""

    config: RunConfig
    out: str | Path
    resume: bool = False
    last: dict[str, Any] | None = None


def train_and_score_pack(members: Sequence[PackMember], *, quiet: bool = False, force: bool = False,
                         policy: str = "always") -> list[EvalResult | SsmbenchError]:
    """Train `members` as one pack (or as the packs the memory allows, or one by one when they do not stack) and
    score each; returns each member's EvalResult, or the error that stopped it alone (a non-finite loss). A signal
    or the time limit raises for the whole pack, after every member's last.pt is saved. `policy` "auto": first time
    a packed forward and backward against the members' one by one on this device (`pack_pays`) and train one by
    one when packing is not faster here; "always": pack whenever the members stack."""
    from ..feed.batches import prefer_fork_safe_numba
    from ..feed.folder_feed import probe_inputs
    from ..runtime import distributed as D
    from .pack import pack_problem
    from .protocol import preflight, train_and_score, with_threads

    prefer_fork_safe_numba()
    workers = sum(m.config.data.workers for m in members)  # the data workers scale with the pack
    configs, threads = [], {}
    for m in members:
        config, threads = with_threads(m.config, workers)
        configs.append(config)
    env = D.init_distributed(configs[0].hardware.device)
    prepared = [preflight(c, env, force, threads) for c in configs]
    setups = [p[0] for p in prepared]
    probe = probe_inputs(configs[0], "val", 1).to(env.device)
    problem = pack_problem([s.bare for s in setups], probe)
    if problem is None and policy == "auto":
        problem = pack_pays([s.bare for s in setups], probe, configs[0].train.batch_size // env.world_size)
    if problem is not None:
        _note(f"{len(members)} runs of {configs[0].model} do not pack ({problem}); training them one by one", quiet)
        return [train_and_score(c, m.out, None, resume=m.resume, quiet=quiet, force=force, last=m.last)
                for c, m in zip(configs, members, strict=True)]
    results: list[EvalResult | SsmbenchError] = []
    for chunk in _split_for_memory([p[1]["memory"] for p in prepared], env.device, force, quiet):
        results += _run_pack([members[i] for i in chunk], [configs[i] for i in chunk], [prepared[i] for i in chunk],
                             env, quiet)
    return results


def pack_pays(models: Sequence[Any], probe: Any, batch_size: int, repeats: int = 3,
              clock: Any = None) -> str | None:
    """None when a packed forward and backward of `models` on a batch of `batch_size` copies of `probe` (1, ...)
    takes less time than the members' one after another on this device (the best of `repeats` timings each, after
    one untimed warm-up); else why not, in one line. The members' own gradients and buffers (a norm's running
    statistics) are left as they were."""
    import time

    import torch

    from .pack import Pack

    clock = clock or time.perf_counter
    kept = [{name: b.clone() for name, b in model.named_buffers()} for model in models]
    x = probe.expand(batch_size, *probe.shape[1:]).contiguous()
    stacked = x.unsqueeze(0).expand(len(models), *x.shape).contiguous()
    pack = Pack(models, checked=True)
    sync = torch.cuda.synchronize if x.device.type == "cuda" else (lambda: None)

    def packed() -> None:
        pack(stacked).float().square().mean().backward()

    def alone() -> None:
        for model in models:
            model(x).float().square().mean().backward()

    def best(fn: Any) -> float:
        times = []
        for _ in range(repeats + 1):
            sync()
            t0 = clock()
            fn()
            sync()
            times.append(clock() - t0)
        return min(times[1:])

    one_by_one, together = best(alone), best(packed)
    with torch.no_grad():
        for model, buffers in zip(models, kept, strict=True):
            model.zero_grad(set_to_none=True)
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
    if together < one_by_one:
        return None
    return (f"a packed step is not faster on this {x.device.type} device: {together * 1e3:.1f} ms for "
            f"{len(models)} against {one_by_one * 1e3:.1f} ms one by one; --pack always packs anyway")


def _split_for_memory(estimates: Sequence[dict[str, int]], device: Any, force: bool, quiet: bool) -> list[list[int]]:
    """Member indices in packs whose summed peak estimate fits the device's free memory (one pack when it all fits
    or `force`)."""
    from .memory import free_bytes

    n = len(estimates)
    peaks = [int(e["estimated_peak_bytes"]) for e in estimates]
    free = free_bytes(device)
    if force or free is None or sum(peaks) <= free:
        return [list(range(n))]
    size = max(1, free // max(peaks))
    from ...plain import human_bytes

    _note(f"a pack of {n} needs about {human_bytes(sum(peaks))} and {human_bytes(free)} is free: training it as "
          f"{-(-n // size)} packs of at most {size}", quiet)
    return [list(range(i, min(n, i + size))) for i in range(0, n, size)]


def _run_pack(members: Sequence[PackMember], configs: Sequence[RunConfig], prepared: Sequence[tuple[Any, Any]],
              env: Any, quiet: bool) -> list[EvalResult | SsmbenchError]:
    """Lock, check and write every member's folder, train them together, write each one's metrics."""
    import torch

    from ..runtime import distributed as D
    from .packed_loop import train_pack
    from .protocol import _discard_if_empty, claim, conclude, out_of_memory

    runs = [RunFolder(Path(m.out)) for m in members]
    fresh = [not m.resume and not run.path.exists() for m, run in zip(members, runs, strict=True)]
    start = time.time()
    with contextlib.ExitStack() as held:
        for run, config, m in zip(runs, configs, members, strict=True):
            claim(held, run, config, env, resume=m.resume)
        try:
            if env.is_main:
                for i, (run, config) in enumerate(zip(runs, configs, strict=True)):
                    run.create()
                    run.write_config(config.to_json())
                    _record_pack(run, [r.path.name for r in runs], i, members[i].last)
            D.barrier()
            outcomes = train_pack([p[0] for p in prepared], runs, resume=[m.resume for m in members], quiet=quiet,
                                  lasts=[m.last for m in members])
        except torch.OutOfMemoryError as exc:
            for run, new in zip(runs, fresh, strict=True):
                _discard_if_empty(run, new and env.is_main)
            raise out_of_memory(configs[0], exc) from None
        except BaseException as exc:
            for run, new in zip(runs, fresh, strict=True):
                _discard_if_empty(run, new and env.is_main and not isinstance(exc, TL.TimeLimitReached))
            raise
        results: list[EvalResult | SsmbenchError] = []
        for run, config, (_, facts), outcome in zip(runs, configs, prepared, outcomes, strict=True):
            if isinstance(outcome, SsmbenchError):
                results.append(outcome)
                continue
            conclude(run, config, outcome, dict(facts), start, env)
            results.append(EvalResult(run.path, config, outcome))
    return results


def _record_pack(run: RunFolder, names: Sequence[str], position: int, last: dict[str, Any] | None) -> None:
    """Append this stretch of training to RUN/pack.json: the step it started from, the members' folder names (their
    order is the pack's run dimension) and this member's position."""
    from ...data.folder.atomic import atomic_write_bytes

    path = run.path / PACK_RECORD
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = {"packs": []}
    step = int(last["state"]["step"]) if last is not None else 0
    record["packs"].append({"from_step": step, "members": list(names), "position": position})
    atomic_write_bytes(path, (json.dumps(record, indent=1) + "\n").encode())


def _note(line: str, quiet: bool) -> None:
    if not quiet:
        print(f"note: {line}", file=sys.stderr, flush=True)
