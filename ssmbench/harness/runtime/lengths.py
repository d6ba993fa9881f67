"""Train short, test long: training lengths drawn per step from a range, the best checkpoint scored at longer lengths.

Three keys turn the protocol on (docs/benchmarks.md, "Train short, test long"):

* `train.length_min` / `train.length_max`: the task's length `L` of training step s is drawn uniformly in
  [length_min, length_max], one length for the whole batch (Delétang et al. 2023: 1-40; Grazzi et al. 2025: 3-40).
  The draw is a pure function of (data seed, step) (`TrainLengths.at`), so a resumed run and the background data
  workers see exactly the lengths of an uninterrupted run. The batch of step s is the one `TaskStream` gives at that
  length: the task config of length L_s is the run's with `L` changed as `--length` changes it (`at_length`).
  Validation (checkpoint selection) and the ordinary test split stay at the run's own `L`.
* `eval.test_lengths`: "41-500", "64,128,256" or "40-256:8" (every 8th length). When training ends, the best
  checkpoint is scored at each (`length_sweep.score_lengths`: each length exactly as `ssmbench eval --checkpoint
  best.pt --length N`), into RUN/lengths/ (one scoring folder per length, lengths.md / .json / .png), with the
  per-length scores and their mean in metrics.json under "lengths" and the plot in RUN/plots/lengths.png.

Models built for a longest length (`l_max`) are built for the longest length the run will see,
max(L, length_max, test lengths) (`model_length`): S4 (its kernel lives on the roots of unity of l_max and C~ belongs
to that length, so longer inputs are refused and its weights mean something else at another l_max) and SGConv (its
number of scales, so its parameter count, follows l_max) need it; every other reference mixer takes any length.

Example:
    >>> lengths = TrainLengths(low=1, high=40, data_seed=0)
    >>> [lengths.at(s) for s in range(6)] == lengths.many(range(6)).tolist()
    True
    >>> all(1 <= n <= 40 for n in lengths.many(range(1000)))
    True
    >>> over_seeds([0.5, 0.75, 1.0])
    {'n': 3, 'max': 1.0, 'mean': 0.75, 'std': 0.25}
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError
from ...seeding import splitmix64, splitmix64_array

LENGTH_TAG = 0x4C454E47  # "LENG": the length stream of a data seed, apart from every sample key


@dataclass(frozen=True)
class TrainLengths:
    """The training length of each step: uniform in [low, high], a pure function of (data seed, step)."""

    low: int
    high: int
    data_seed: int

    def many(self, steps: Iterable[int]) -> np.ndarray:
        """(n,) int64 lengths of `steps`: low + sm(sm(data_seed ^ LENG) ^ step) mod (high - low + 1)."""
        base = np.uint64(splitmix64(self.data_seed ^ LENGTH_TAG))
        mixed = splitmix64_array(np.asarray(list(steps), dtype=np.uint64) ^ base)  # (n,) uint64
        return (self.low + mixed % np.uint64(self.high - self.low + 1)).astype(np.int64)

    def at(self, step: int) -> int:
        return int(self.many([step])[0])


def train_lengths(cfg: Any) -> TrainLengths | None:
    """The run's per-step lengths, or None when it trains at its one length L."""
    t = cfg.train
    if t.length_min is None and t.length_max is None:
        return None
    return TrainLengths(int(t.length_min), int(t.length_max), int(cfg.data.seed))


def eval_lengths(cfg: Any) -> list[int]:
    """The lengths `eval.test_lengths` names, in order ([] when it names none)."""
    text = cfg.eval.test_lengths
    return [] if text is None else parse_lengths(str(text), "eval.test_lengths")


def in_use(cfg: Any) -> bool:
    """Whether the run follows the protocol (per-step lengths or test lengths): such runs train alone, never in a
    pack, since the members of a pack step on batches of one shape and the protocol ends with a scoring of its own."""
    return train_lengths(cfg) is not None or cfg.eval.test_lengths is not None


def model_length(cfg: Any) -> int:
    """The longest input the run's model will see: max(L, train.length_max, the test lengths)."""
    lengths = [int(cfg.task_config["L"]), *eval_lengths(cfg)]
    if cfg.train.length_max is not None:
        lengths.append(int(cfg.train.length_max))
    return max(lengths)


def build_spec(cfg: Any, spec: Any) -> Any:
    """The Spec a model is built from: the task's, with `seq_len` the run's longest length under the protocol (what
    a mixer gets as `l_max`); the task's own Spec otherwise."""
    if not in_use(cfg):
        return spec
    return dataclasses.replace(spec, seq_len=max(spec.seq_len, model_length(cfg)))


def at_length(task: Any, length: int) -> Any:
    """The `ResolvedTask` of `task` (a run's) at length `length`, its config changed as `--length` changes it (the
    preset `length` selects, then the keys the run set on top), exactly as scoring a checkpoint at that length does."""
    from ...task_config import ResolvedTask, rebase, to_plain

    if task.plain.get("L") == length:
        return task
    return ResolvedTask.of(task.task, to_plain(rebase(task.task, task.plain, {"L": length})))


@contextlib.contextmanager
def output_rows(model: Any, rows: int | None) -> Iterator[None]:
    """The backbone decodes the rightmost `rows` positions for this step (a per-position task trained at several
    lengths has as many target rows as positions); its own count again afterwards. A model without `l_output` (a
    plug-in factory), or targets without a row axis (`rows` None: one label a sample), is left alone."""
    before = getattr(model, "l_output", None)
    if not isinstance(before, int) or rows is None or before == rows:
        yield
        return
    model.l_output = rows
    try:
        yield
    finally:
        model.l_output = before


def check(cfg: Any) -> None:
    """Refuse protocol keys no run can use (a ConfigError naming the key and the fix)."""
    t = cfg.train
    if t.length_min is None and t.length_max is None and cfg.eval.test_lengths is None:
        return
    task = cfg.resolved_task
    if not isinstance(task.plain.get("L"), int) or task.task.policy.reads_folder:
        key = "train.length_min" if t.length_min is not None or t.length_max is not None else "eval.test_lengths"
        raise ConfigError(key, f"{cfg.task} has no sequence length L that changes per sample stream",
                          "use a streamed task whose config has L (the atomic tasks, MQAR, induction heads, ...)")
    if (t.length_min is None) != (t.length_max is None):
        missing = "train.length_max" if t.length_max is None else "train.length_min"
        raise ConfigError(missing, "the training range needs both ends", "set train.length_min and train.length_max")
    if t.length_min is not None:
        if t.length_min > t.length_max:
            raise ConfigError("train.length_min", f"{t.length_min} exceeds train.length_max = {t.length_max}")
        for end in (t.length_min, t.length_max):  # the task's own bounds on L, with its message
            at_length(task, int(end))
    eval_lengths(cfg)


def parse_lengths(text: str, key: str = "--lengths") -> list[int]:
    """'256,1024,4096' -> [256, 1024, 4096]; 'A-B' is every length from A to B, 'A-B:K' every K-th from A (B
    included when it falls on the step); a usage error naming `key` (one line, the fix) for anything else.

    >>> parse_lengths("256, 1024"), parse_lengths("41-44"), parse_lengths("40-64:8,128")
    ([256, 1024], [41, 42, 43, 44], [40, 48, 56, 64, 128])
    """
    fix = f"e.g. {key} 256,1024,4096 or {key} 41-500 (every length) or {key} 40-256:8 (every 8th)"
    bad = ConfigError(key, f"takes positive integers or ranges A-B[:K] separated by commas (got {text!r})", fix)
    lengths: list[int] = []
    try:
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            span, _, step = part.partition(":")
            low, dash, high = span.partition("-")
            if dash and low.strip():
                a, b, k = int(low), int(high), int(step) if step else 1
                if a > b or k < 1:
                    raise bad
                lengths.extend(range(a, b + 1, k))
            elif step:
                raise bad
            else:
                lengths.append(int(part))
    except ValueError:
        raise bad from None
    if not lengths or any(n <= 0 for n in lengths):
        raise bad
    if len(set(lengths)) != len(lengths):
        raise ConfigError(key, f"names a length twice ({text})", "give each length once")
    return lengths


def mean_over_lengths(rows: Sequence[dict[str, Any]], metric: str) -> float | None:
    """The protocol's score of one run: `metric` averaged over the scored test lengths (None if none scored).

    >>> mean_over_lengths([{"L": 64, "accuracy": 1.0}, {"L": 128, "accuracy": 0.5}, {"L": 256, "skipped": "S4"}],
    ...                   "accuracy")
    0.75
    """
    values = [float(row[metric]) for row in rows if "skipped" not in row]
    return statistics.fmean(values) if values else None


def over_seeds(means: Sequence[float]) -> dict[str, Any]:
    """The protocol's summary over seeds, from each seed's mean over test lengths: the maximum (what Delétang et al.
    report: the best of 10 seeds; Grazzi et al.: the best of 3) and the mean with the sample standard deviation
    (n - 1; None for one seed), which the maximum hides."""
    values = [float(v) for v in means]
    return {"n": len(values), "max": max(values), "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else None}
