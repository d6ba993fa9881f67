"""What the recall tasks (`mqar`, `induction_heads`) share: the token-classification Spec and config checks.

Both store `inputs` (L,) vocabulary ids and `targets` (L,) with the id to predict at the scored positions and
`IGNORE_INDEX` everywhere else; the output space is the whole vocabulary (as a language-model head has it), scored
by token accuracy over the scored positions.

>>> spec = token_spec(L=8, vocab_size=16, input_dtype="uint8", target_dtype="int16", input_doc="ids",
...                   target_doc="answer at the last position")
>>> spec.d_input, spec.d_output, spec.l_output, spec.ignore_index, spec.metrics
(16, 16, 8, -100, ('token_accuracy',))
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ssmbench.api import Field, Spec
from ssmbench.errors import ConfigError

IGNORE_INDEX = -100
MAX_LENGTH = 2**20


def check_int(field: str, value: object, minimum: int, maximum: int | None = None) -> int:
    """Raise ConfigError naming `field` unless `value` is an int in [minimum, maximum]."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(field, f"must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(field, f"must be at most {maximum}, got {value!r}")
    return value


def check_positive_float(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(field, f"must be a finite number > 0, got {value!r}")
    return float(value)


def check_bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field, f"must be true or false, got {value!r}")
    return value


def token_spec(L: int, vocab_size: int, input_dtype: str, target_dtype: str, input_doc: str, target_doc: str,
               extra: Mapping[str, Field] | None = None) -> Spec:
    """The Spec of a causal token task with per-position labels over the whole vocabulary."""
    fields = {
        "inputs": Field(input_dtype, (L,), input_doc, attrs={"vocab_size": vocab_size}),
        "targets": Field(target_dtype, (L,), target_doc,
                         attrs={"ignore_index": IGNORE_INDEX, "num_classes": vocab_size}),
    }
    fields.update(extra or {})
    return Spec(fields=fields, input_kind="tokens", d_input=vocab_size, seq_len=L, target_kind="classify",
                d_output=vocab_size, l_output=L, ignore_index=IGNORE_INDEX, causal=True, input_scale=None,
                metrics=("token_accuracy",))
