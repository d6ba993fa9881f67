"""The run folder: config.json, metrics.jsonl, metrics.json, checkpoints/{last,best}.pt, plots/.

Every JSON file and checkpoint is written to a temporary name, fsynced and renamed, so a crash never leaves a
half-written file under the final name. `metrics.json` appears only when a run has finished. Checkpoints hold
only tensors and plain Python values, so they load with `torch.load(..., weights_only=True)`.

Example:
    >>> import tempfile, pathlib
    >>> run = RunFolder(pathlib.Path(tempfile.mkdtemp()) / "cumsum-dlr")
    >>> run.write_config({"task": "cumsum"}); run.log({"step": 10, "split": "val", "r2": 0.5})
    >>> run.read_config(), [r["step"] for r in run.read_log()], run.finished
    ({'task': 'cumsum'}, [10], False)
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..data.shards import atomic_write_json
from ..errors import ConfigError
from ..plain import json_plain


def default_run_dir(root: str | Path, task: str, model: str) -> Path:
    """runs/<task>-<model>-<UTC timestamp> (a suffix keeps two runs started in the same second apart)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    safe_model = model.replace(":", "-").replace("/", "-").replace(".", "-")
    base = Path(root) / f"{task}-{safe_model}-{stamp}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


class RunFolder:
    """Paths and atomic writers of one run folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    config_path = property(lambda self: self.path / "config.json")
    log_path = property(lambda self: self.path / "metrics.jsonl")
    metrics_path = property(lambda self: self.path / "metrics.json")
    last = property(lambda self: self.path / "checkpoints" / "last.pt")
    best = property(lambda self: self.path / "checkpoints" / "best.pt")
    plots = property(lambda self: self.path / "plots")

    @property
    def finished(self) -> bool:
        return self.metrics_path.exists()

    def create(self) -> None:
        try:
            (self.path / "checkpoints").mkdir(parents=True, exist_ok=True)
            self.plots.mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError("--out", f"cannot create the run folder {self.path}: {exc.strerror}") from None

    def write_config(self, config: dict[str, Any]) -> None:
        atomic_write_json(self.config_path, config)

    def read_config(self) -> dict[str, Any]:
        return json.loads(self.config_path.read_text())

    def log(self, record: dict[str, Any]) -> None:
        """Append one line to metrics.jsonl (flushed and fsynced: a preempted run keeps its history)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(json.dumps(json_plain(record), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read_log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]

    def truncate_log(self, step: int) -> None:
        """Drop log lines after `step` (a resumed run repeats the steps after its last checkpoint)."""
        keep = [r for r in self.read_log() if r.get("step", 0) <= step]
        tmp = self.log_path.with_name(f"metrics.jsonl.tmp.{uuid.uuid4().hex}")
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in keep))
        os.replace(tmp, self.log_path)

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, json_plain(metrics))


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temporary name in the same folder, fsync, rename."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path, option: str = "--checkpoint") -> dict[str, Any]:
    """A checkpoint written by `save_checkpoint`, loaded with weights_only=True; ConfigError naming `option` (the
    command-line option that led to it) if it is missing or unreadable (truncated, not a checkpoint)."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ConfigError(option, f"{path} does not exist") from None
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not an ssmbench checkpoint"
        hint = ("the run cannot continue from it: start the run again (or restore the file from a backup)"
                if option == "--resume" else "pass a checkpoint that `ssmbench eval` wrote")
        raise ConfigError(option, f"{path} is not a readable ssmbench checkpoint (truncated or damaged: "
                                  f"{type(exc).__name__})", hint) from None
