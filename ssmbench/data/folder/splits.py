"""The three splits of a dataset folder, in their stored order, and the names a command or function accepts."""

from __future__ import annotations

from ...errors import ConfigError

__all__ = ["SPLIT_ORDER", "SPLIT_ALIASES", "canonical_split"]

SPLIT_ORDER = ("train", "val", "test")
SPLIT_ALIASES = {"train": "train", "val": "val", "validation": "val", "valid": "val", "test": "test"}
"""Every split name a command or function accepts, and the stored split it means."""


def canonical_split(split: str, option: str = "--split") -> str:
    """The stored split a name means (`validation` -> `val`); an unknown name is a ConfigError with a did-you-mean.

    >>> canonical_split("validation"), canonical_split("test")
    ('val', 'test')
    >>> canonical_split("tain")
    Traceback (most recent call last):
    ...
    ssmbench.errors.ConfigError: --split: unknown split 'tain'; did you mean 'train'? (train, val or test)
    """
    if split in SPLIT_ALIASES:
        return SPLIT_ALIASES[split]
    from ...plain import did_you_mean

    guess = did_you_mean(split, list(SPLIT_ALIASES), cutoff=0.5)
    raise ConfigError(option, f"unknown split {split!r}{guess} (train, val or test)")
