"""Optional experiment loggers beside metrics.jsonl (which is always written): TensorBoard or Weights & Biases.

`--logger tensorboard` needs the `tensorboard` package, `--logger wandb` needs `wandb` (set WANDB_MODE=offline to
log without an account). Each record of metrics.jsonl becomes scalars `<split>/<key>` at its step.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ...errors import ConfigError

KINDS = ("tensorboard", "wandb")


class _TensorBoard:
    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def log(self, record: dict[str, Any]) -> None:
        for key, value in _scalars(record):
            self.writer.add_scalar(key, value, record["step"])

    def close(self) -> None:
        self.writer.close()


class _Wandb:
    def __init__(self, run_dir: Path, config: Any) -> None:
        import wandb

        self.run = wandb.init(project="ssmbench", dir=str(run_dir), name=run_dir.name, config=config.to_json())

    def log(self, record: dict[str, Any]) -> None:
        self.run.log(dict(_scalars(record)), step=record["step"])

    def close(self) -> None:
        self.run.finish()


def _scalars(record: dict[str, Any]) -> list[tuple[str, float]]:
    split = record.get("split", "train")
    return [(f"{split}/{k}", float(v)) for k, v in record.items()
            if k not in ("step", "split", "best") and isinstance(v, int | float)]


def check_logger(kind: str | None) -> None:
    """Refuse an unknown logger or one whose package is missing (a ConfigError naming the install), before a run
    folder exists."""
    if kind is None:
        return
    if kind not in KINDS:
        raise ConfigError("--logger", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if importlib.util.find_spec(kind) is None:
        raise ConfigError("--logger", f"{kind} is not installed", f"pip install {kind}")


def make_logger(kind: str | None, run_dir: Path, config: Any) -> Any:
    """None, or a logger with log(record) and close(); see `check_logger`."""
    check_logger(kind)
    if kind is None:
        return None
    return _TensorBoard(run_dir) if kind == "tensorboard" else _Wandb(run_dir, config)
