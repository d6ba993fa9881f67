"""Follow one value of a real `ssmbench eval` through the code and count where it stops on its way: the selector
`--size` of Pathfinder from argv to the RunConfig the evaluator receives, or the task itself (`--task`) from argv to
the reader that makes the first training batch.

The command is run in this process under `sys.settrace`. Every call of a function defined in `ssmbench/` whose
arguments carry the value is one *call*. For `--size`: an argument named `size` equal to it, a mapping or dataclass
holding it under `size` / `task.size` (the task config, the `-o` keys, the run config, a run request), or an `-o`
string `size=N`; tracing ends when the evaluator starts (`train_and_score` or `score`). For `--task`: a string equal
to the task's name, the task object, or a mapping, dataclass or object holding either (the run request, the run
config, a resolved task, a feed; `self` counts); tracing ends at the reader, the first call into
`ssmbench/data/read/` (`TaskStream` of a streamed task, the loader of a dataset folder).
Consecutive calls in the same file are one *stop*; a stop in a file the walk had left before is a *return*; a file
entered again from the same calling function is a *re-entry* (the count by calling file is shown too).

    python benchmarks/harness/config_walk.py                          # --size 32, data made under a temporary folder
    python benchmarks/harness/config_walk.py --follow task --task cumsum       # a streamed task: TaskStream reads
    python benchmarks/harness/config_walk.py --follow task --task pathfinder   # a folder task: its loader reads
    python benchmarks/harness/config_walk.py --out benchmarks/results/config_walk_cpu.txt

A Pathfinder dataset folder (`ssmbench generate pathfinder --size N`, a few samples) is made before tracing starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[2]))  # the checkout: `benchmarks` (benchmarks/README.md)
from benchmarks.common import REPO  # noqa: E402

PACKAGE = REPO / "ssmbench"
SETTLED = {"size": ("train_and_score", "score"), "task": ()}
READER = str(PACKAGE / "data" / "read")
"""`--task` ends at the first call into the readers (`TaskStream`, a dataset folder's loader): that stop is the last."""
NAMES = ("size", "task.size")


def carries(name: str | None, obj: Any, value: int, depth: int = 0) -> bool:
    """Whether `obj` (bound to `name`) holds the `--size` value."""
    if name in NAMES and not isinstance(obj, bool) and obj in (value, str(value)):
        return True
    if isinstance(obj, str):
        return obj.replace(" ", "") in (f"size={value}", f"task.size={value}")
    if depth >= 3:
        return False
    if isinstance(obj, Mapping):
        return any(carries(str(k), v, value, depth + 1) for k, v in list(obj.items())[:64])
    if isinstance(obj, (list, tuple)):
        return any(carries(None, v, value, depth + 1) for v in obj[:64])
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return any(carries(f.name, getattr(obj, f.name, None), value, depth + 1) for f in dataclasses.fields(obj))
    return False


def carries_task(obj: Any, name: str, depth: int = 0) -> bool:
    """Whether `obj` holds the task: its name, the task object (`.name`, `.generate`), or a container, dataclass or
    plain object holding either within three levels."""
    if isinstance(obj, str):
        return obj == name
    if obj is None or isinstance(obj, (int, float, bool, bytes, type)) or type(obj).__module__.startswith(
            ("torch", "numpy", "builtins", "pathlib", "logging", "threading")) and not isinstance(
            obj, (Mapping, list, tuple)):
        return False
    if getattr(obj, "name", None) == name and hasattr(obj, "generate"):
        return True
    if depth >= 3:
        return False
    if isinstance(obj, Mapping):
        return any(carries_task(v, name, depth + 1) for v in list(obj.values())[:64])
    if isinstance(obj, (list, tuple)):
        return any(carries_task(v, name, depth + 1) for v in obj[:64])
    try:
        fields = vars(obj)
    except TypeError:
        return False
    return any(carries_task(v, name, depth + 1) for v in list(fields.values())[:64])


class Walk:
    def __init__(self, value: int | str, follow: str = "size") -> None:
        self.value = value
        self.follow = follow
        self.calls: list[tuple[str, str, str, str, list[str]]] = []  # file, function, caller file and function, args

    def trace(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return None
        code = frame.f_code
        path = code.co_filename
        if not path.startswith(str(PACKAGE)):
            return None
        if code.co_name in SETTLED[self.follow]:
            sys.settrace(None)
            return None
        n = code.co_argcount + code.co_kwonlyargcount
        if self.follow == "task":
            names = [v for v in code.co_varnames[:n] if carries_task(frame.f_locals.get(v), str(self.value))]
        else:
            names = [v for v in code.co_varnames[:n] if carries(v, frame.f_locals.get(v), int(self.value))]
        if names:
            back = frame.f_back.f_code if frame.f_back else code
            self.calls.append((_short(path), code.co_qualname, _short(back.co_filename), back.co_qualname, names))
            if self.follow == "task" and path.startswith(READER):
                sys.settrace(None)  # the reader has the task: the walk is over
        return None

    def report(self) -> str:
        stops: list[tuple[str, list[str], str, str]] = []  # (file, functions, caller file, caller function)
        for file, func, caller_file, caller, _ in self.calls:
            if stops and stops[-1][0] == file:
                stops[-1][1].append(func)
            else:
                stops.append((file, [func], caller_file, caller))
        seen: set[str] = set()
        by_function: set[tuple[str, str, str]] = set()
        by_file: set[tuple[str, str]] = set()
        returns = reentries = file_reentries = 0
        lines = []
        for i, (file, funcs, caller_file, caller) in enumerate(stops, 1):
            mark = ""
            if file in seen:
                returns += 1
                mark = " (return)"
            if (caller_file, caller, file) in by_function:
                reentries += 1
                mark += f" (re-entered from {caller})"
            elif (caller_file, file) in by_file:
                file_reentries += 1
                mark += f" (re-entered from {caller_file})"
            seen.add(file)
            by_function.add((caller_file, caller, file))
            by_file.add((caller_file, file))
            lines.append(f"{i:3d}. {file}: {', '.join(dict.fromkeys(funcs))}  <- {caller}{mark}")
        head = (f"--{self.follow} {self.value}: {len(self.calls)} calls carrying it, {len(stops)} stops in {len(seen)} files, "
                f"{returns} returns to a file already left, {reentries} re-entries from the same calling function "
                f"(+{file_reentries} from another function of the same calling file)")
        return "\n".join([head, *lines])


def _short(path: str) -> str:
    return os.path.relpath(path, PACKAGE.parent) if path.startswith(str(PACKAGE)) else "(outside ssmbench)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--follow", choices=("size", "task"), default="size", help="the value followed [size]")
    ap.add_argument("--task", default="pathfinder", help="the task trained [pathfinder]")
    ap.add_argument("--size", type=int, default=32, help="Pathfinder's image side [32]")
    ap.add_argument("--work", type=Path, help="folder for the data and the run [default: a temporary one]")
    ap.add_argument("--out", type=Path, help="also write the report here")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="config_walk-"))
    data = work / "data"
    exe = Path(sys.executable).with_name("ssmbench")
    if args.task == "pathfinder" and not list(data.glob(f"pathfinder-{args.size}-*/manifest.json")):
        subprocess.run([str(exe), "generate", "pathfinder", "--size", str(args.size), "--n", "12", "--split",
                        "train=8,val=2,test=2", "--out", str(data), "-q"], check=True)
    os.environ["SSMBENCH_DATA"] = str(data)
    selector = ["--size", str(args.size)] if args.task == "pathfinder" else ["-o", "L=32"]
    argv = ["eval", "--model", "dlr", "--task", args.task, *selector, "-o", "train.steps=1",
            "-o", "train.warmup_steps=0", "-o", "model.d_model=4", "-o", "model.n_layers=1",
            "-o", "eval.val_samples=2", "-o", "eval.test_samples=2", "-o", "eval.metric_batch_size=1",
            "-o", "data.workers=0", "--out", tempfile.mkdtemp(dir=work) + "/run", "-q"]
    import ssmbench.harness.training.trainer  # noqa: F401  (imported untraced: torch's import is no part of the walk)
    import ssmbench.registry
    from ssmbench.cli.app import main as cli_main

    ssmbench.registry.get_task(args.task)
    walk = Walk(args.task if args.follow == "task" else args.size, args.follow)
    sys.settrace(walk.trace)
    try:
        cli_main(argv)
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        sys.settrace(None)
    text = walk.report()
    print(text)
    if args.out:
        args.out.write_text(f"$ ssmbench {' '.join(argv)}\n{text}\n")


if __name__ == "__main__":
    main()
