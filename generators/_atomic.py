"""What the atomic tasks share: `AtomicTask`, their base, and plain helpers (length checks, the Spec, positional
channels).

Every atomic task stores `inputs` (T, d_in) float32 with cos and sin of 2*pi*t/T as the last two channels and
`targets` (l_output, d_output) float32; metrics are R^2 and MSE; all are causal except MIPS with causal=false.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from ssmbench.api import Field, Spec, Task, TaskConfig, TrainingPolicy
from ssmbench.errors import ConfigError

C = TypeVar("C", bound=TaskConfig)

MAX_LENGTH = 2**20
PAPER_LENGTHS = (4096, 512)


def check_length(task: str, L: int, minimum: int, need: str = "") -> None:
    """Raise ConfigError naming the task and the bound when L is outside [minimum, 2^20]."""
    if not isinstance(L, int) or isinstance(L, bool):
        raise ConfigError("L", f"must be an integer, got {L!r}")
    if L < minimum:
        extra = f" ({need})" if need else ""
        raise ConfigError("L", f"L={L} is too small for {task}: need L >= {minimum}{extra}",
                          f"pass --length {minimum} or more")
    if L > MAX_LENGTH:
        raise ConfigError("L", f"L={L} is too large for {task}: at most 2^20 = {MAX_LENGTH}")


def check_positive(field: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(field, f"must be an integer >= {minimum}, got {value!r}")


def check_bool(field: str, value: bool) -> None:
    if not isinstance(value, bool):
        raise ConfigError(field, f"must be true or false, got {value!r}")


def length_presets(config_cls: type, lengths: tuple[int, ...] = PAPER_LENGTHS) -> dict[str, Any]:
    """One preset per paper length, every other field at its default: {"4096": Config(L=4096), ...}."""
    return {str(L): config_cls(L=L) for L in lengths}


@functools.lru_cache(maxsize=16)
def positional_channels(T: int) -> np.ndarray:
    """(T, 2) float32: cos and sin of 2*pi*t/T, angle in float64, cached per T (read-only)."""
    angle = 2.0 * np.pi * np.arange(T, dtype=np.float64) / T
    out = np.stack([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32)
    out.setflags(write=False)
    return out


def atomic_spec(T: int, d_input: int, l_output: int, d_output: int, causal: bool = True,
                extra: Mapping[str, Field] | None = None, input_doc: str = "", target_doc: str = "",
                shuffled: tuple[str, ...] = ()) -> Spec:
    """The Spec of an atomic regression task.

    Storage: gzip level 1, byte shuffle only for the fields in `shuffled`; chosen per field by
    `benchmarks/data/codecs.py` (benchmarks/results/codecs_cpu_atomic.txt): on the noisy inputs and sparse targets
    shuffle makes files bigger and writes slower, on smooth single-channel targets (cumsum, sort, reverse,
    context_shift) and MIPS's 14-channel inputs it wins; levels above 1 cost up to 2x the write time for under
    2 % of size.
    """
    codec = "gzip:1"
    fields = {
        "inputs": Field("float32", (T, d_input),
                        input_doc or "data channels, then cos and sin of 2*pi*t/T", codec=codec, shuffle="inputs" in shuffled),
        "targets": Field("float32", (l_output, d_output),
                         target_doc or "regression targets, aligned with the last l_output positions", codec=codec,
                         shuffle="targets" in shuffled),
    }
    fields.update(extra or {})
    return Spec(fields=fields, input_kind="real", d_input=d_input, seq_len=T, target_kind="regress",
                d_output=d_output, l_output=l_output, ignore_index=None, causal=causal, input_scale=None,
                metrics=("r2", "mse"))


def table5_family(config: Any) -> str:
    """The DLR paper's Table 5 rows for an atomic config: "atomic512" at L = 512, else "atomic" (L = 4096, and any
    other length, which keeps the 4096 rows' settings at that L)."""
    return "atomic512" if config.L == 512 else "atomic"


def atomic_policy(position: int, **changes: Any) -> TrainingPolicy:
    """The atomic tasks' training policy: a fresh stream every step, the quick preset's "atomic" section, Table 5's
    paper rows, and `position` in the groups "atomic" and "table1" (the paper's Table 1 order); `changes` replace
    other fields (SHIFT's `paper_family`).

    >>> atomic_policy(2).groups == {"atomic": 2, "table1": 2}, atomic_policy(2).quick_section("cummax")
    (True, 'atomic')
    """
    return TrainingPolicy(**{"preset_family": "atomic", "paper_family": table5_family,
                             "groups": {"atomic": position, "table1": position}, **changes})


class AtomicTask(Task[C]):
    """The base of the atomic tasks: the class attributes they share and `generate`.

    A task file declares its identity (`name`, `version`, `Config`), its `policy` (`atomic_policy(position)`, its
    place in Table 1), `spec` (through `atomic_spec`), `oracle`, and `_fill`, which runs its kernel into the
    preallocated outputs. From here come `presets` (one per paper length, every other field at its default, made
    from `Config` when the subclass is defined), `default_preset` "4096" and `default_n`; a task overrides any of
    them by declaring it. This is the one abstract level that `ssmbench.api` allows between `Task` and a task,
    which stays `@typing.final`.
    """

    default_preset = "4096"
    default_n = 16000

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Config" in vars(cls) and "presets" not in vars(cls):
            cls.presets = length_presets(cls.Config)

    def generate(self, config: C, keys: np.ndarray) -> dict[str, np.ndarray]:
        keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
        spec = self.spec(config)
        out = {name: np.empty((keys.shape[0], *f.shape), dtype=f.dtype) for name, f in spec.fields.items()}
        self._fill(config, keys, positional_channels(spec.seq_len), out)
        return out

    @abc.abstractmethod
    def _fill(self, config: C, keys: np.ndarray, pos: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """Write row i of every field of `out` (uninitialised, one array per Spec field) from `keys[i]` (uint64,
        contiguous); `pos` is `positional_channels(T)` for the Spec's sequence length T."""
