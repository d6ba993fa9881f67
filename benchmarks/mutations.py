"""Re-apply the hand mutations of issue 26 one at a time and check that a test fails on each ("killed").

    PYTHONSAFEPATH=1 python benchmarks/mutations.py [--only SUBSTRING] [--list] [--allow-dirty] [--no-baseline]

Each entry of MUTATIONS names a file, the exact text to replace (it must occur exactly once), the mutated text and
the pytest node ids that must catch it. For each selected entry the script

1. runs the named tests on the unmutated code (the baseline: they must pass, else a failure proves nothing);
2. writes the mutated text into the file in place, runs the same tests (`pytest -x`, no bytecode written), and
3. restores the file's exact original bytes in a `finally` (also on Ctrl-C and SIGTERM).

It prints one line per entry -- killed (a test failed), SURVIVED (every test passed), stale, needs update (the
original text is no longer in the file, or occurs more than once: the code moved on and the entry must be
rewritten), baseline failed, error -- and exits 0 only when every selected entry was killed (1 otherwise).

Safety: the script refuses to start (exit 2) when a selected file has uncommitted changes, unless --allow-dirty:
it edits files in place, and a file someone is editing at the same time could be clobbered. It also refuses a file
that already holds an entry's mutated text instead of its original (a run killed with SIGKILL, which no `finally`
survives, left it mutated: `git diff` shows it). After every write the file's modification time is moved on by
at least a second, so that no cached bytecode of the other version can be taken for the file's current text.

`--only SUBSTRING` selects the entries whose key (`file:line`), file or description contains it, e.g.
`--only threads.py` or `--only ssmbench/harness`. Line numbers in the keys are those of commit b1fffb6, where the
mutations were first tried.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    key: str
    """`file:line` at commit b1fffb6 (how issue 26 names it)."""
    file: str
    """Path from the repository root."""
    original: str
    """Exact text of the file that the mutation replaces; must occur exactly once."""
    mutated: str
    tests: tuple[str, ...]
    """pytest node ids (from the repository root) that must fail on the mutated code."""
    what: str


M = "tests/test_mutations.py::"
MUTATIONS: list[Mutation] = [
    # ------------------------------------------------------------------------------------------------ data, configs
    Mutation("chunk_rows.py:156", "ssmbench/data/chunk_rows.py",
             "plist.get_chunk() != (1, *shape[1:])", "plist.get_chunk()[0] != 1",
             (M + "test_rows_of_a_dataset_chunked_across_the_row_are_read_whole",),
             "chunk-shape check weakened to chunk[0] == 1"),
    Mutation("task_config.py:64", "ssmbench/task_config.py",
             "if given[task.preset_option] is not None and given[task.preset_option] != value:", "if False:",
             (M + "test_a_selector_option_that_disagrees_with_its_config_value_is_refused",),
             "no error when --size/--length disagree with -o size=/L="),
    Mutation("task_config.py:130", "ssmbench/task_config.py",
             "if base.get(k) != v or k == key}", "if base.get(k) != v}",
             (M + "test_explicit_values_keep_the_selector_field",),
             "explicit_values drops the selector field"),
    Mutation("config.py:92", "ssmbench/config.py",
             "if number != int(number):", "if False:",
             (M + "test_a_fractional_value_of_an_integer_key_is_refused",),
             "'2.5' read as int 2"),
    Mutation("config.py:74", "ssmbench/config.py",
             'if text.lower() in ("none", "null"):', 'if text.lower() in ("none",):',
             (M + "test_null_and_none_both_mean_none_for_an_optional_key",),
             "'null' no longer None"),
    # ------------------------------------------------------------------------------------------------ harness
    Mutation("memory.py:77", "ssmbench/harness/memory.py",
             "local_batch = max(1, s.cfg.train.batch_size // s.env.world_size)",
             "local_batch = max(1, s.cfg.train.batch_size)",
             (M + "test_the_memory_estimate_counts_the_samples_of_one_rank",),
             "batch per rank ignores the world size"),
    Mutation("memory.py:66", "ssmbench/harness/memory.py",
             'if line.startswith("MemAvailable:"):', 'if line.startswith("MemFree:"):',
             (M + "test_free_cpu_memory_is_memavailable_not_memfree",),
             "MemFree instead of MemAvailable"),
    Mutation("threads.py:72", "ssmbench/harness/threads.py",
             "return max(1, cpus - workers), ", "return max(1, cpus - workers - 1), ",
             (M + "test_threads_are_usable_cpus_minus_data_workers",),
             "workers off by one"),
    Mutation("threads.py:38", "ssmbench/harness/threads.py",
             'None if quota == "max" else int(quota) / int(period)',
             'None if quota == "max" else int(period) / int(quota)',
             (M + "test_cgroup_quota_is_quota_over_period",),
             "cgroup quota inverted"),
    Mutation("threads.py:80", "ssmbench/harness/threads.py",
             "if torch.get_num_threads() != n:\n        torch.set_num_threads(n)",
             "if torch.get_num_threads() != n:\n        pass",
             (M + "test_apply_threads_sets_torchs_thread_count",),
             "thread count never applied"),
    Mutation("suites.py:117", "ssmbench/harness/suites.py",
             '"preset": preset,\n' + " " * 75 + '"seeds": list(seeds or []),\n',
             '"preset": preset,\n',
             (M + "test_the_seeds_are_part_of_the_suite_folder",),
             "seeds left out of the suite folder digest"),
    Mutation("pathfinder_lra.py:230", "generators/pathfinder_lra.py",
             "drawn = all(image[int(y), int(x)] > 0 for y, x in centres)",
             "drawn = any(image[int(y), int(x)] > 0 for y, x in centres)",
             (M + "test_pathfinder_lra_oracle_requires_both_circles_drawn",),
             "oracle no longer requires both circles drawn"),
    # ------------------------------------------------------------------- compare, get, catalog, verify, transfer
]


class Refused(Exception):
    """A reason not to start at all (exit 2)."""


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every `finally` restores its file."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def select(only: str | None) -> list[Mutation]:
    if not only:
        return list(MUTATIONS)
    return [m for m in MUTATIONS if only in m.key or only in m.file or only in m.what]


def git_dirty(files: list[str]) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--", *files], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return sorted({line[3:].strip() for line in out.splitlines() if line.strip()})


def state(m: Mutation, text: str) -> str:
    """'ok' (the original occurs exactly once), 'stale' or 'mutated' (the mutated text is there instead)."""
    n = text.count(m.original)
    if n == 1:
        return "ok"
    if n == 0 and m.mutated and text.count(m.mutated) == 1 and m.mutated not in m.original:
        return "mutated"
    return "stale"


def run_tests(tests: tuple[str, ...], timeout: float) -> tuple[int, str]:
    """(pytest exit status, last lines of its output); no bytecode written, so no mutated .pyc is ever cached."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONSAFEPATH": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *tests]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    first_error = next((line[1:].strip() for line in lines if line.startswith("E ")), None)
    return proc.returncode, " | ".join(([first_error[:160]] if first_error else []) + lines[-1:])


def _write(path: Path, data: bytes, after_ns: int) -> int:
    """Write `data` and set its mtime at least one second past `after_ns`; returns the new mtime (ns)."""
    path.write_bytes(data)
    mtime = max(time.time_ns(), after_ns + 1_000_000_000)
    os.utime(path, ns=(mtime, mtime))
    return mtime


def try_one(m: Mutation, timeout: float, baseline: bool) -> tuple[str, str]:
    """(result, detail) of one entry; the file holds its original bytes again when this returns or raises."""
    path = ROOT / m.file
    original = path.read_bytes()
    s = state(m, original.decode())
    if s != "ok":
        return "stale, needs update", ("the original text occurs " f"{original.decode().count(m.original)} times"
                                       if s == "stale" else "the mutated text is in the file already")
    if baseline:
        code, tail = run_tests(m.tests, timeout)
        if code != 0:
            return "baseline failed", tail
    mutated = original.decode().replace(m.original, m.mutated, 1).encode()
    mtime = _write(path, mutated, path.stat().st_mtime_ns)
    try:
        code, tail = run_tests(m.tests, timeout)
    finally:
        now = path.read_bytes()
        if now == mutated:
            _write(path, original, mtime)
        else:  # someone changed the file meanwhile: undo only our replacement
            text = now.decode()
            if text.count(m.mutated) == 1:
                _write(path, text.replace(m.mutated, m.original, 1).encode(), mtime)
            print(f"warning: {m.file} changed while mutated; restored the original text of {m.key} only -- check "
                  "`git diff`", file=sys.stderr)
    if code == 1:
        return "killed", tail
    if code == 0:
        return "SURVIVED", tail
    return "error", f"pytest exit status {code}: {tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="Entries whose key, file or description contains this text.")
    parser.add_argument("--list", action="store_true", help="Print the entries and exit.")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="Mutate files that have uncommitted changes (their bytes are still restored exactly).")
    parser.add_argument("--no-baseline", action="store_true", help="Skip the run of the tests on unmutated code.")
    parser.add_argument("--timeout", type=float, default=900.0, help="Seconds per pytest run.")
    args = parser.parse_args(argv)
    chosen = select(args.only)
    if not chosen:
        print(f"no mutation matches {args.only!r}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.key:<24} {m.file}: {m.what}\n{'':<24} tests: {', '.join(m.tests) or '(none)'}")
        return 0
    files = sorted({m.file for m in chosen})
    try:
        dirty = git_dirty(files)
        if dirty and not args.allow_dirty:
            raise Refused(f"uncommitted changes in {', '.join(dirty)}: commit them first (this script edits files "
                          "in place), or pass --allow-dirty")
        leftovers = [m.key for m in chosen if state(m, (ROOT / m.file).read_text()) == "mutated"]
        if leftovers:
            raise Refused(f"{', '.join(leftovers)}: the file holds the mutated text (left by a killed run?); "
                          "restore it (git diff) first")
    except Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm)
    rows: list[tuple[Mutation, str, str]] = []
    try:
        for m in chosen:
            if not m.tests:
                rows.append((m, "no test named", ""))
                continue
            start = time.time()
            result, detail = try_one(m, args.timeout, not args.no_baseline)
            rows.append((m, result, detail))
            print(f"{m.key:<24} {result:<20} {time.time() - start:5.1f} s  {m.what}", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, _Terminated):
        print("interrupted: every file restored", file=sys.stderr)
        return 130
    width = max(len(m.key) for m, _, _ in rows)
    print(f"{'mutation':<{width}}  {'result':<20}  what  [tests]")
    for m, result, detail in rows:
        print(f"{m.key:<{width}}  {result:<20}  {m.what}  [{', '.join(t.split('::')[-1] for t in m.tests)}]")
        if result not in ("killed",) and detail:
            print(f"{'':<{width}}    {detail}")
    killed = sum(r == "killed" for _, r, _ in rows)
    print(f"{killed}/{len(rows)} killed")
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
