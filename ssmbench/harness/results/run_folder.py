"""The run folder: config.json, metrics.jsonl, metrics.json, checkpoints/{last,best}.pt, plots/.

Every JSON file and checkpoint is written to a temporary name, fsynced and renamed, so a crash never leaves a
half-written file under the final name; the temporaries a killed writer leaves are removed by the next one to take
the lock. `metrics.json` appears only when a run has finished. Checkpoints (`checkpoints.py`) hold only tensors and
plain Python values, so they load with `torch.load(..., weights_only=True)`; the previous `last.pt` is kept as
`last.prev.pt`, and a resume falls back to it (with a line saying so) when `last.pt` is damaged. A `metrics.jsonl`
that vanishes during a run is written again from the run's own records, with a warning.

One process writes a run folder at a time: `run_lock` (`folder_lock.py`, re-exported here) holds `RUN/.lock`.

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
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...data.folder.atomic import atomic_write_json
from ...errors import ConfigError
from ...plain import json_plain
from .checkpoints import load_checkpoint, previous_of, save_checkpoint
from .folder_lock import LOCK_NAME, RunFolderBusy, _process_start, holds_lock, remove_temporaries, run_lock

__all__ = ["LOCK_NAME", "RunFolder", "RunFolderBusy", "_process_start", "default_run_dir", "holds_lock",
           "load_checkpoint", "run_lock", "save_checkpoint"]


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
        self._logged = False  # this object has written metrics.jsonl (so a missing one has vanished)

    config_path = property(lambda self: self.path / "config.json")
    log_path = property(lambda self: self.path / "metrics.jsonl")
    metrics_path = property(lambda self: self.path / "metrics.json")
    last = property(lambda self: self.path / "checkpoints" / "last.pt")
    best = property(lambda self: self.path / "checkpoints" / "best.pt")
    previous = property(lambda self: previous_of(self.last))
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

    def log(self, record: dict[str, Any], history: list[dict[str, Any]] | None = None) -> None:
        """Append one line to metrics.jsonl (flushed and fsynced: a preempted run keeps its history). If the file
        vanished after this object wrote it, a warning, and it is written again from `history` (the run's records
        so far, `record` last) when given."""
        self.path.mkdir(parents=True, exist_ok=True)
        records = [record]
        if self._logged and not self.log_path.exists():
            records = list(history) if history else records
            self._vanished(len(records), lost=not history)
        self._append(records)

    def _append(self, records: list[dict[str, Any]]) -> None:
        from ...data.make.space import disk_errno
        from .checkpoints import disk_full

        text = "".join(json.dumps(json_plain(r), sort_keys=True) + "\n" for r in records)
        try:
            with open(self.log_path, "a") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # a full disk: one line (the next checkpoint needs about what the last one took)
            code = disk_errno(exc)
            if code is None:
                raise
            raise disk_full(self.log_path, code, max(len(text), _size(self.last))) from None
        self._logged = True

    def _vanished(self, lines: int, lost: bool) -> None:
        what = "the lines before this one are lost" if lost else f"written again from the run's own records " \
                                                                 f"({lines} lines)"
        print(f"warning: {self.log_path} vanished during the run (deleted?); {what}", file=sys.stderr, flush=True)

    def read_log(self) -> list[dict[str, Any]]:
        """The log's records; a torn last line (the process killed, or the disk full, while writing it) is left
        out, and a resume rewrites the file without it."""
        if not self.log_path.exists():
            return []
        lines = [line for line in self.log_path.read_text().splitlines() if line.strip()]
        records = []
        for i, line in enumerate(lines):
            try:
                records.append(json.loads(line))
            except ValueError:
                if i < len(lines) - 1:
                    raise
        return records

    def truncate_log(self, step: int, history: list[dict[str, Any]] | None = None) -> None:
        """Drop log lines after `step` (a resumed run repeats the steps after its last checkpoint). A missing
        metrics.jsonl is written again from `history` (the checkpoint's records), with a warning."""
        keep = [r for r in self.read_log() if r.get("step", 0) <= step]
        if not self.log_path.exists() and history:
            keep = [r for r in history if r.get("step", 0) <= step]
            self._vanished(len(keep), lost=False)
        tmp = self.log_path.with_name(f"metrics.jsonl.tmp.{uuid.uuid4().hex}")
        tmp.write_text("".join(json.dumps(json_plain(r), sort_keys=True) + "\n" for r in keep))
        os.replace(tmp, self.log_path)
        self._logged = True

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        atomic_write_json(self.metrics_path, json_plain(metrics))

    def clear_unsaved(self) -> None:
        """Before a run that saved no step starts again from step 0: drop what its first attempt wrote after
        config.json (log lines, a best.pt written before the first last.pt, plots, predictions, temporary files)."""
        import shutil

        for path in (self.log_path, self.best, self.previous, self.path / "metrics.previous.json"):
            path.unlink(missing_ok=True)
        for folder in (self.plots, self.path / "predictions"):
            shutil.rmtree(folder, ignore_errors=True)
        self.remove_temporaries()

    def remove_temporaries(self) -> list[Path]:
        """Remove the temporary files a killed writer left (`folder_lock.remove_temporaries`)."""
        return remove_temporaries(self.path)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
