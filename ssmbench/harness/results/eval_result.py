"""What a finished (or scored) run returns: its folder, its config and its metrics (`ssmbench.evaluate`'s result)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config.run_config import RunConfig


@dataclass
class EvalResult:
    run_dir: Path
    config: RunConfig
    metrics: dict[str, Any]
