"""Checkpoint files: written atomically, the previous `last.pt` kept, read with `weights_only=True`.

`save_checkpoint` writes `torch.save` output to a temporary name in the same folder (`NAME.tmp.<hex>`), fsyncs it
and renames it over the final name, so a crash never leaves a half-written file under that name. With
`keep_previous` (the trainer's `last.pt`), the file it replaces stays as `last.prev.pt` (a hard link made only once
the new file is complete), so a `last.pt` damaged later (truncated by a copy, a failing disk) loses one checkpoint
interval, not the run: `load_last` falls back to it with one line on stderr and puts it back in place.

A disk that fills while a checkpoint is written (torch reports it as `RuntimeError: ... unexpected pos`; the OS as
ENOSPC / EDQUOT / EROFS) becomes `DiskFullError` (exit 1) in one line naming the folder and about how much more it
needs; the temporary file is removed and the checkpoint it would have replaced stays as it was.

Checkpoints hold only tensors and plain Python values; one holding anything else (a pickled object, which could
run code while loading) is refused as "not a readable ssmbench checkpoint".

Example:
    >>> import tempfile, pathlib, torch
    >>> last = pathlib.Path(tempfile.mkdtemp()) / "last.pt"
    >>> save_checkpoint(last, {"step": 1}, keep_previous=True); save_checkpoint(last, {"step": 2}, keep_previous=True)
    >>> load_checkpoint(last)["step"], load_checkpoint(previous_of(last))["step"]
    (2, 1)
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any, BinaryIO, cast

from ...errors import ConfigError


def previous_of(path: Path) -> Path:
    """Where `save_checkpoint(path, keep_previous=True)` keeps the file it replaced: `last.pt` -> `last.prev.pt`."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


class _Recorder:
    """A file wrapper that remembers the OSError a write raised: torch.save reports a failed write only as
    `RuntimeError: ... unexpected pos`, without its cause."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.f.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.f.flush()


def save_checkpoint(path: Path, state: dict[str, Any], keep_previous: bool = False) -> None:
    """torch.save to a temporary name in the same folder, fsync, rename; with `keep_previous`, the file it replaces
    becomes `previous_of(path)` once the new one is complete. A full disk is a one-line `DiskFullError`."""
    import torch

    from ...data.make.space import disk_errno

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp.{uuid.uuid4().hex}")
    recorder = None
    try:
        with open(tmp, "wb") as f:
            recorder = _Recorder(f)
            torch.save(state, cast(BinaryIO, recorder))
            f.flush()
            os.fsync(f.fileno())
        if keep_previous and path.exists():
            _link_or_copy(path, previous_of(path))
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        cause = recorder.error if recorder is not None and recorder.error is not None else exc
        code = disk_errno(cause)
        if code is None:
            raise
        raise disk_full(path, code, _state_bytes(state)) from None
    finally:
        tmp.unlink(missing_ok=True)


def _link_or_copy(source: Path, dest: Path) -> None:
    """`dest` becomes a hard link to `source` (no bytes written), or a copy where the file system has no links;
    replaced atomically either way."""
    tmp = dest.with_name(f"{dest.name}.tmp.{uuid.uuid4().hex}")
    try:
        try:
            os.link(source, tmp)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
                raise
            shutil.copyfile(source, tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _state_bytes(state: Any) -> int:
    """Bytes of the tensors in a checkpoint's state (what its file needs, within a few kB)."""
    import torch

    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(_state_bytes(v) for v in state.values())
    if isinstance(state, list | tuple):
        return sum(_state_bytes(v) for v in state)
    return 0


def disk_full(path: Path, code: int, needed: int) -> Exception:
    """The one line (`DiskFullError`, exit 1) of a checkpoint that did not fit: the dataset builds' message
    (`space.disk_full_message`), with what was kept and how to continue the run instead of re-running the command."""
    from ...data.make.space import DiskFullError, disk_full_message

    run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    kept = f"the {path.name} saved before is intact" if path.exists() else f"no {path.name} was saved yet"
    return DiskFullError(disk_full_message(path, code, needed, kept=kept,
                                           writable=f"make {run} writable", space="free some space",
                                           then=f"continue with `ssmbench eval --resume {run}`"), code)


def load_checkpoint(path: str | Path, option: str = "--checkpoint") -> dict[str, Any]:
    """A checkpoint written by `save_checkpoint`, loaded with weights_only=True; ConfigError naming `option` (the
    command-line option that led to it) if it is missing or unreadable (truncated, not a checkpoint, or holding
    objects other than tensors and plain values)."""
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


def load_last(last: Path) -> dict[str, Any]:
    """`last.pt` (`--resume`); when it is damaged or missing and `last.prev.pt` is readable, that one, with one line
    on stderr saying so, and put back as `last.pt` (so the next save keeps it as the previous one)."""
    try:
        return load_checkpoint(last, option="--resume")
    except ConfigError as exc:
        prev = previous_of(last)
        if not prev.exists():
            raise
        try:
            ckpt = load_checkpoint(prev, option="--resume")
        except ConfigError:
            raise exc from None
        state = ckpt.get("state")
        step = state.get("step", "?") if isinstance(state, dict) else "?"
        why = "is missing" if not last.exists() else "is damaged (truncated or overwritten)"
        if os.environ.get("RANK", "0") == "0":  # under torchrun every rank loads it: one line
            print(f"warning: {last} {why}; continuing from the previous checkpoint {prev.name} (step {step}): "
                  "the steps after it are trained again", file=sys.stderr, flush=True)
        _link_or_copy(prev, last)
        return ckpt
