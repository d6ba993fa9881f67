"""`--time-limit DURATION`: stop a run (or a suite) cleanly before a wall-clock limit, resumable with `--resume`.

Clusters give jobs a wall-clock limit (Slurm `--time`, preemptible instances, GPU queues of minutes). With a limit,
the trainer checks at every step boundary whether the next step (with the evaluation and checkpoints it is due to
run, and the final scoring after the last step) still fits before the deadline, with a margin; when it does not, it
writes `checkpoints/last.pt` (atomically, as always) and raises `TimeLimitReached` (exit status 75, EX_TEMPFAIL:
"retry later"; 130 stays Ctrl-C / SIGTERM, 0 a finished run). `metrics.json` is not written: the run is unfinished.

* The deadline counts from the start of the process (`ssmbench eval` on the command line: importing torch and
  building the data count) or, for Python callers of `ssmbench.evaluate`, from the call, unless they pass their own
  `Deadline`.
* The estimates come from what this process has measured so far, conservatively: the largest recent step time, the
  largest evaluation (+ `best.pt`) and checkpoint times; before anything is measured, a prior from the validation
  size and the checkpoint's bytes. Every decision also keeps `slack` seconds in hand: 2 % of the limit, at least
  5 s and at most 30 s.
* A limit that let the process train no step (spent by the start-up: imports, model, data) stops before the
  optimiser and the data are built, and the command it prints to continue gives a limit that can make progress
  (`progress_limit`: twice the start-up and the step's need, in minutes) instead of repeating one that never would.
* The limit is a setting of the command, not of the run: it is never stored in config.json or a checkpoint, so it
  never changes the run's digest, and `--resume` may give another one (or none).

Example:
    >>> parse_duration("1h30m"), parse_duration("1:30:00"), parse_duration("90s"), parse_duration("45m")
    (5400.0, 5400.0, 90.0, 2700.0)
    >>> format_duration(5400), format_duration(90), format_duration(2.5)
    ('1h30m', '1m30s', '2.5s')
    >>> ticks = iter(range(1000)).__next__             # a fake clock: 0, 1, 2, ... seconds
    >>> d = Deadline(60, clock=ticks)                   # starts at 0
    >>> d.left(), d.left(), d.slack
    (59.0, 58.0, 5.0)
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import ConfigError, SsmbenchError

EXIT_TIME_LIMIT = 75
"""EX_TEMPFAIL (sysexits.h): the run stopped at its time limit and continues with `--resume`."""

MIN_SLACK, MAX_SLACK, SLACK_SHARE = 5.0, 30.0, 0.02
"""Seconds every decision keeps in hand: SLACK_SHARE of the limit, clipped to [MIN_SLACK, MAX_SLACK]."""

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_FORMAT = "90s, 45m, 4h, 1h30m, 1:30:00 (h:mm:ss), 30:00 (mm:ss) or plain seconds"


class TimeLimitReached(SsmbenchError):
    """A run or suite stopped before its time limit; `last.pt` holds the state to continue from."""

    exit_code = EXIT_TIME_LIMIT

    def __init__(self, message: str, hint: str | None = None, *, run_dir: Any = None, step: int | None = None,
                 steps: int | None = None, suite: Any = None, limit: float | None = None,
                 summary: str | None = None) -> None:
        super().__init__(message, hint)
        self.run_dir, self.step, self.steps, self.suite = run_dir, step, steps, suite
        self.limit: float | None = limit
        self.summary = summary or message
        """What happened, without where to continue ("time limit reached after step 40 of 100")."""
        self.next_limit: float | None = None
        """The limit the continue command gives when this one let the process train no step (`reached`)."""

    def resume_command(self) -> str:
        """The command that continues a single run (a suite continues with its own command): with the same limit
        when it let this process make progress, else with one that can (`next_limit`)."""
        limit = self.next_limit or self.limit
        extra = f" --time-limit {format_duration(limit)}" if limit else ""
        return f"ssmbench eval --resume {self.run_dir}{extra}"


def parse_duration(text: Any, option: str = "--time-limit") -> float:
    """Seconds in a DURATION: `90s`, `45m`, `4h`, `2d`, `1h30m`, `1:30:00` (h:mm:ss), `30:00` (mm:ss) or plain
    seconds (`5400`, `90.5`); a number passes through. A value that is none of these, or not > 0, is a ConfigError
    naming `option`."""
    if isinstance(text, bool):
        raise ConfigError(option, f"cannot read {text!r} as a duration (use {_FORMAT})")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        parsed = _parse(str(text).strip().lower())
        if parsed is None:
            raise ConfigError(option, f"cannot read {str(text)!r} as a duration (use {_FORMAT})")
        seconds = parsed
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(option, f"must be a duration > 0, got {text!r}")
    return seconds


def _parse(raw: str) -> float | None:
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    if re.fullmatch(r"\d+(:\d{1,2}){1,2}(\.\d+)?", raw):  # h:mm:ss or mm:ss
        parts = [float(p) for p in raw.split(":")]
        if any(p >= 60 for p in parts[1:]):
            return None
        return sum(p * 60.0 ** k for k, p in enumerate(reversed(parts)))
    pieces = re.findall(r"(\d+(?:\.\d+)?)([dhms])", raw)
    if not pieces or "".join(a + u for a, u in pieces) != raw:
        return None
    units = [u for _, u in pieces]
    if len(set(units)) != len(units) or units != sorted(units, key="dhms".index):
        return None  # each unit once, largest first
    return sum(float(a) * _UNITS[u] for a, u in pieces)


def format_duration(seconds: float) -> str:
    """The shortest DURATION that reads back as `seconds` (`5400` -> `1h30m`)."""
    if seconds != int(seconds) or seconds < 1:
        return f"{seconds:g}s"
    s = int(seconds)
    out = "".join(f"{v}{u}" for v, u in ((s // 3600, "h"), (s // 60 % 60, "m"), (s % 60, "s")) if v)
    return out


def process_start(clock: Callable[[], float] = time.monotonic) -> float:
    """`time.monotonic()` at the start of this process (Linux: /proc/self/stat against CLOCK_BOOTTIME), else now."""
    now = clock()
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time after boot, in clock ticks
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - age if 0 <= age < 7 * 86400 else now


_anchor_at_process_start = False


def anchor_at_process_start() -> None:
    """From now on, deadlines made from a number of seconds count from this process's start (the CLI calls this:
    `ssmbench eval --time-limit 4h` counts its imports and data building); Python callers' count from the call."""
    global _anchor_at_process_start
    _anchor_at_process_start = True


class Deadline:
    """`seconds` after `start` on `clock` (a monotonic clock: inject a fake one in tests). `start` defaults to the
    process start after `anchor_at_process_start()` (the CLI), else to the clock's present value."""

    def __init__(self, seconds: float | str, *, start: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = parse_duration(seconds)
        self.clock = clock
        if start is None:
            start = process_start(clock) if (_anchor_at_process_start and clock is time.monotonic) else clock()
        self.start = float(start)

    @property
    def slack(self) -> float:
        """Seconds kept in hand at every decision: 2 % of the limit, at least 5 s and at most 30 s."""
        return max(MIN_SLACK, min(MAX_SLACK, SLACK_SHARE * self.seconds))

    def left(self) -> float:
        """Seconds left before the limit (negative once past it)."""
        return self.start + self.seconds - self.clock()

    def room_to_start(self) -> bool:
        """Enough time left to start a task (a suite asks before each one): two slacks, so that the task can at
        least be set up and write its first checkpoint."""
        return self.left() >= 2 * self.slack

    def __repr__(self) -> str:
        return f"Deadline({format_duration(self.seconds)}, {self.left():.1f} s left)"


def as_deadline(value: Deadline | float | str | None) -> Deadline | None:
    """A Deadline from `time_limit=` (a Deadline, seconds, a DURATION string or None)."""
    if value is None or isinstance(value, Deadline):
        return value
    return Deadline(value)


_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("ssmbench_deadline", default=None)


@contextlib.contextmanager
def scope(deadline: Deadline | None) -> Iterator[None]:
    """The deadline the trainer of a run started inside this block obeys (`ssmbench.evaluate(time_limit=...)`)."""
    token = _current.set(deadline)
    try:
        yield
    finally:
        _current.reset(token)


def current(cfg: Any = None) -> Deadline | None:
    """The deadline in scope, else one of `cfg.train.time_limit` seconds counted from now, else None."""
    deadline = _current.get()
    if deadline is None and cfg is not None and getattr(cfg.train, "time_limit", None):
        deadline = Deadline(cfg.train.time_limit)
    return deadline


class Budget:
    """What one run has measured on the deadline's clock, and whether its next step still fits.

    The trainer calls `boundary()` after each step (with `timed("eval")` / `timed("save")` around evaluations and
    checkpoints inside it); `fits(step)` says whether step `step` + 1 (or, after the last step, the final scoring)
    can run and a checkpoint still be written before the deadline.
    """

    RECENT = 20
    """Step times remembered: the estimate is the largest of these (the first step of a process, which pays for
    start-up, only until a second one is measured)."""
    EXTRA_STEPS = 2
    """Step times kept in hand besides the next step (noise, a GPU's queued work)."""

    def __init__(self, deadline: Deadline, cfg: Any, state_bytes: int) -> None:
        self.deadline, self.cfg = deadline, cfg
        self.clock = deadline.clock
        self.steps: deque[float] = deque(maxlen=self.RECENT)
        self.first_step: float | None = None
        self.measured: dict[str, float] = {}
        self.save_prior = 1.0 + 3 * state_bytes / 50e6  # model + AdamW moments at 50 MB/s, plus a second
        self._inside = 0.0
        self._last = self.clock()
        self.steps_done = 0

    @contextlib.contextmanager
    def timed(self, what: str) -> Iterator[None]:
        """Time an evaluation ("eval") or a checkpoint ("save"); the largest so far is the estimate."""
        t0 = self.clock()
        try:
            yield
        finally:
            took = self.clock() - t0
            self._inside += took
            self.measured[what] = max(self.measured.get(what, 0.0), took)

    def boundary(self) -> None:
        """A step ended (after its evaluation and checkpoint, which are timed apart)."""
        now = self.clock()
        took = max(0.0, now - self._last - self._inside)
        self._last, self._inside = now, 0.0
        if self.first_step is None:
            self.first_step = took
        else:
            self.steps.append(took)
        self.steps_done += 1

    @property
    def step(self) -> float:
        if self.steps:
            return max(self.steps)
        return self.first_step or 0.0

    @property
    def eval(self) -> float:
        if "eval" in self.measured:
            return self.measured["eval"]
        # a prior: evaluating a sample costs at most what training on it costs, plus a possible best.pt
        return self.cfg.eval.val_samples / self.cfg.train.batch_size * self.step + self.save

    @property
    def save(self) -> float:
        return self.measured.get("save", self.save_prior)

    def need(self, step: int) -> float:
        """Seconds needed from the boundary after `step` to be safely stopped after the next piece of work."""
        t = self.cfg.train
        if step >= t.steps:  # the final scoring: val and test at the best checkpoint, the figures
            test_share = self.cfg.eval.test_samples / max(1, self.cfg.eval.val_samples)
            return self.eval * (1 + test_share) + self.save + self.deadline.slack
        nxt = step + 1
        done = nxt == t.steps
        need = self.step * (1 + self.EXTRA_STEPS) + self.save  # the step, and last.pt when we stop after it
        if nxt % t.eval_every == 0 or done:
            need += self.eval
        if nxt % (t.checkpoint_every or t.eval_every) == 0 or done:
            need += self.save
        return need + self.deadline.slack

    def fits(self, step: int) -> bool:
        return self.deadline.left() >= self.need(step)


def state_bytes(model: Any) -> int:
    """Bytes of a model's parameters and buffers (what its checkpoint holds once, AdamW's moments twice more)."""
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        total += t.numel() * t.element_size()
    return total


def reached(deadline: Deadline, run: Any, step: int, steps: int, budget: Budget | None) -> TimeLimitReached:
    """The exception a run stopped at `step` raises. When this process trained no step (the limit was spent, or
    nearly, by the start-up: imports, model, data), repeating the limit would never make progress: the continue
    command then gives `progress_limit` instead, and the hint says why."""
    summary = f"time limit reached after step {step} of {steps}" + (" (the final scoring is left)"
                                                                     if step >= steps else "")
    saved = "the run is saved in" if run.last.exists() else "no step is saved yet (--resume starts it) in"
    exc = TimeLimitReached(f"{summary}; {saved} {run.path}", run_dir=run.path, step=step, steps=steps,
                           limit=deadline.seconds, summary=summary)
    if budget is not None and budget.steps_done == 0:
        used, need = deadline.seconds - deadline.left(), budget.need(step)
        exc.next_limit = progress_limit(used, need)
        exc.hint = (f"no step fitted in the {format_duration(deadline.seconds)} limit: the start-up took {used:.0f} s "
                    f"and the next step needs about {need:.0f} s with the margin; --time-limit "
                    f"{format_duration(exc.next_limit)} leaves room for both")
    else:
        exc.hint = f"continue with `{exc.resume_command()}`"
    return exc


def progress_limit(startup: float, need: float) -> float:
    """A limit in which a process that spends `startup` seconds before its first step and needs `need` for the next
    one can train: twice their sum (room for more than one step), in whole minutes."""
    return 60.0 * math.ceil(2 * (max(0.0, startup) + need) / 60.0)
