"""Re-apply the hand mutations of issue 26 one at a time and check that a test fails on each ("killed").

    PYTHONSAFEPATH=1 python tests/mutations.py [--only SUBSTRING] [--list] [--allow-dirty] [--no-baseline]

Each entry of MUTATIONS names a file, the exact text to replace (it must occur exactly once), the mutated text and
the pytest node ids that must catch it. For each selected entry the script

1. runs the named tests on the unmutated code (the baseline: they must pass, else a failure proves nothing);
2. writes the mutated text into the file in place, runs the same tests (`pytest -x`, no bytecode written), and
3. restores the file's exact original bytes in a `finally` (also on Ctrl-C and SIGTERM).

It prints one line per entry -- killed (a test failed), SURVIVED (every test passed), stale, needs update (the
original text is no longer in the file, or occurs more than once: the code moved on and the entry must be
rewritten), baseline failed, error -- and exits 0 only when every selected entry was killed (1 otherwise).

Safety: the script refuses to start (exit 2) when a selected file has uncommitted changes, unless --allow-dirty:
it edits files in place, and a file someone is editing at the same time could be clobbered (if it changes while
mutated, only the mutated text is put back, with a warning). A journal in the temporary folder names the file while
it is mutated; a run killed with SIGKILL, which no `finally` survives, leaves it behind, and the next run refuses
to start until `--restore` has written the original bytes back. After every write the file's modification time
moves on by at least a second, so that no cached bytecode of the other version can be taken for the current text.
`--list` prints the entries and whether each original text is still in its file, changing nothing.

`--only SUBSTRING` selects the entries whose key (`file:line`) or file path contains it, e.g.
`--only threads.py`, `--only ssmbench/harness` or, comma-separated, `--only get.py,catalog.py`. Line numbers in the keys are those of commit b1fffb6, where the
mutations were first tried.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
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
IH = "tests/generators/test_induction_heads.py::"
MQ = "tests/generators/test_mqar.py::"
MUTATIONS: list[Mutation] = [
    # ------------------------------------------------------------------------------------------------ data, configs
    Mutation("chunk_rows.py:156", "ssmbench/data/read/chunk_rows.py",
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
    Mutation("memory.py:77", "ssmbench/harness/training/memory.py",
             "local_batch = max(1, s.cfg.train.batch_size // s.env.world_size)",
             "local_batch = max(1, s.cfg.train.batch_size)",
             (M + "test_the_memory_estimate_counts_the_samples_of_one_rank",),
             "batch per rank ignores the world size"),
    Mutation("memory.py:66", "ssmbench/harness/training/memory.py",
             'if line.startswith("MemAvailable:"):', 'if line.startswith("MemFree:"):',
             (M + "test_free_cpu_memory_is_memavailable_not_memfree",),
             "MemFree instead of MemAvailable"),
    Mutation("threads.py:72", "ssmbench/harness/runtime/threads.py",
             "return max(1, cpus - workers), ", "return max(1, cpus - workers - 1), ",
             (M + "test_threads_are_usable_cpus_minus_data_workers",),
             "workers off by one"),
    Mutation("threads.py:38", "ssmbench/harness/runtime/threads.py",
             'None if quota == "max" else int(quota) / int(period)',
             'None if quota == "max" else int(period) / int(quota)',
             (M + "test_cgroup_quota_is_quota_over_period",),
             "cgroup quota inverted"),
    Mutation("threads.py:80", "ssmbench/harness/runtime/threads.py",
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
    # -------------------------------------------------------------------- compare, get, catalog, verify, transfer
    # Killed by another engineer's tests. get.py was rewritten since b1fffb6 (check_against_entry reads the shard
    # files): each get.py entry applies the b1fffb6 defect to the new code.
    Mutation("compare.py:43", "ssmbench/harness/results/compare.py",
             '"cuda_graph", "threads"),', '"cuda_graph"),',
             ("tests/harness/results/test_compare.py::test_a_short_run_never_replaces_a_long_one_and_seeds_are_averaged",),
             "hardware.threads enters the config digest (splits columns)"),
    Mutation("compare.py:150", "ssmbench/harness/results/compare.py",
             "out[key] = statistics.fmean(finite) if finite else None", "out[key] = finite[-1] if finite else None",
             ("tests/harness/results/test_compare.py::test_a_short_run_never_replaces_a_long_one_and_seeds_are_averaged",),
             "mean replaced by the last seed's value"),
    Mutation("get.py:99", "ssmbench/data/hub/get.py",
             'if not want.get("content"):\n            raise', 'if False:\n            raise',
             ("tests/data/hub/test_get.py::test_other_bytes_without_content_hashes_are_refused",),
             "sha256 mismatch accepted without content hashes"),
    Mutation("get.py:106", "ssmbench/data/hub/get.py",
             "if entry.content_digest and manifest.content_digest != entry.content_digest:", "if False:",
             ("tests/data/hub/test_get.py::test_a_content_digest_other_than_the_entrys_is_refused",),
             "content digest check skipped"),
    Mutation("get.py:138", "ssmbench/data/hub/get.py",
             "checked, notes = _check_present(dest, entry, workers)",
             "checked, notes = [], []",
             ("tests/data/hub/test_get.py::test_get_on_a_present_folder_reads_its_shard_files",),
             "present folder not checked"),
    Mutation("get.py:87", "ssmbench/data/hub/get.py",
             'unlisted = sorted((set(_shard_paths(manifest)) | on_disk) - {sh["path"] for sh in entry.shards})',
             "unlisted = []",
             ("tests/data/hub/test_get.py::test_a_shard_the_entry_does_not_list_is_refused",),
             "extra shards ignored"),
    Mutation("catalog.py:133", "ssmbench/data/hub/catalog.py",
             'isinstance(sh.get("path"), str) and _SHA256.match(str(sh.get("sha256")))):',
             'isinstance(sh.get("path"), str)):',
             ("tests/data/hub/test_get.py::test_catalogue_shards_need_a_path_and_a_64_hex_sha256",),
             "shard entries without a valid sha256 accepted"),
    Mutation("verify.py:157", "ssmbench/data/hub/verify.py",
             "results[index] = result", "results[results.index({})] = result",
             ("tests/data/hub/test_download_integrity.py::test_deep_verify_joins_its_workers_results_in_manifest_order",),
             "deep-verify results in completion order"),
    Mutation("transfer.py:167", "ssmbench/data/hub/transfer.py",
             "if expected is not None and have == expected and have > 0:", "if False:",
             ("tests/data/hub/test_download_integrity.py::test_a_complete_part_is_hashed_and_kept_not_fetched_again",),
             "a complete .part fetched again"),
    # ------------------------------------------------ issue 37: data edges (get, catalog, checks, download)
    Mutation("get.py:181", "ssmbench/data/hub/get.py",
             'unlisted = sorted((set(_shard_paths(manifest)) | on_disk) - {sh["path"] for sh in entry.shards})',
             'unlisted = sorted(on_disk - {sh["path"] for sh in entry.shards})',
             ("tests/data/hub/test_get.py::test_a_shard_the_manifest_lists_but_neither_disk_nor_entry_has_is_refused",),
             "shards listed in the manifest, missing from disk and catalogue, ignored"),
    Mutation("get.py:222", "ssmbench/data/hub/get.py",
             "if entry.content_digest and manifest.content_digest != entry.content_digest:",
             "if entry.content_digest and str(manifest.content_digest)[:8] != entry.content_digest[:8]:",
             ("tests/data/hub/test_get.py::test_a_content_digest_differing_only_after_its_first_hex_digits_is_refused",),
             "content digest compared on 8 hex digits"),
    Mutation("get.py:412", "ssmbench/data/hub/get.py",
             "if Path(folder).name in cat and cat[Path(folder).name].dataset_id in (None, manifest.dataset_id):",
             "if Path(folder).name in cat:",
             ("tests/data/hub/test_get.py::test_verify_catalog_finds_the_entry_by_dataset_id_not_by_folder_name_alone",),
             "folder matched to an entry by name alone, dataset id ignored"),
    Mutation("catalog.py:126", "ssmbench/data/hub/catalog.py",
             'isinstance(argv, list) and argv[:1] == ["generate"] and all(', "isinstance(argv, list) and all(",
             ("tests/data/hub/test_get.py::test_a_build_command_must_be_a_generate_command",),
             "build.argv need not start with generate"),
    Mutation("catalog.py:219", "ssmbench/data/hub/catalog.py",
             "            if name in merged.entries:",
             "            if name in merged.entries and merged.entries[name].catalog != BUILTIN:",
             ("tests/data/hub/test_get.py::test_a_user_catalogue_cannot_shadow_a_built_in_name",),
             "a user catalogue silently shadows a built-in name"),
    Mutation("checks.py:84", "ssmbench/data/folder/checks.py",
             "if shard.sample_start != start:", "if shard.sample_start < start:",
             ("tests/data/read/test_loader.py::test_check_folder_refuses_shards_that_are_not_contiguous_or_do_not_cover_the_split",),
             "non-contiguous sample_start (a gap) accepted"),
    Mutation("checks.py:100", "ssmbench/data/folder/checks.py",
             "if start != info.num_samples:", "if start > info.num_samples:",
             ("tests/data/read/test_loader.py::test_check_folder_refuses_shards_that_are_not_contiguous_or_do_not_cover_the_split",),
             "shards covering fewer samples than the split accepted"),
    Mutation("download.py:187", "ssmbench/data/hub/download.py",
             'check_name(name, "the dataset name")',
             'check_name(str(name).replace("/", "-").lstrip(".") or "x", "the dataset name")',
             ("tests/data/folder/test_safe_paths.py::test_a_manifest_whose_name_is_not_a_folder_name_is_refused",),
             "a manifest name with / or a leading . accepted"),
    # ------------------------------------------------ issue 37: runs (run_folder, time_limit, run_request, resolver)
    # Killed by tests/harness/results/test_run_recovery.py, test_time_limit.py, test_run_request.py (H2). Keys: lines at
    # 05f0d96 (the lock and weights_only were in run_folder.py then; folder_lock.py and checkpoints.py since); "+"
    # keys guard issue 37's new code.
    Mutation("run_folder.py:97", "ssmbench/harness/results/run_folder.py",
             'keep = [r for r in self.read_log() if r.get("step", 0) <= step]',
             'keep = [r for r in self.read_log() if r.get("step", 0) < step]',
             ("tests/harness/results/test_run_recovery.py::test_truncate_log_keeps_the_checkpoint_steps_own_lines",),
             "truncate_log drops the checkpoint step's own lines"),
    Mutation("run_folder.py:176", "ssmbench/harness/results/folder_lock.py",
             "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", "pass",
             ("tests/harness/results/test_run_recovery.py::test_a_held_flock_is_refused_even_when_the_file_names_no_live_process",),
             "the flock never taken (only the recorded pid refuses)"),
    Mutation("time_limit.py:95", "ssmbench/harness/runtime/time_limit.py",
             "if any(p >= 60 for p in parts[1:]):", "if any(p > 60 for p in parts[1:]):",
             ("tests/harness/runtime/test_time_limit.py::test_bad_durations_are_config_errors_naming_the_option",),
             "1:60 accepted as a duration"),
    Mutation("time_limit.py:126", "ssmbench/harness/runtime/time_limit.py",
             "return now - age if 0 <= age < 7 * 86400 else now", "return now",
             ("tests/harness/runtime/test_time_limit.py::test_the_deadline_counts_the_start_up_from_the_process_start",),
             "the process's start-up not counted"),
    Mutation("time_limit.py:154", "ssmbench/harness/runtime/time_limit.py",
             "return max(MIN_SLACK, min(MAX_SLACK, SLACK_SHARE * self.seconds))",
             "return max(MIN_SLACK, SLACK_SHARE * self.seconds)",
             ("tests/harness/runtime/test_time_limit.py::test_the_slack_is_two_percent_of_the_limit_between_5_and_30_seconds",),
             "slack not capped at 30 s"),
    Mutation("time_limit.py:247", "ssmbench/harness/runtime/time_limit.py",
             "return max(self.steps)", "return self.steps[-1]",
             ("tests/harness/runtime/test_time_limit.py::test_the_step_estimate_is_the_largest_recent_step_and_the_last_evaluation_is_budgeted",),
             "latest instead of largest step time"),
    Mutation("time_limit.py:270", "ssmbench/harness/runtime/time_limit.py",
             "if nxt % t.eval_every == 0 or done:", "if nxt % t.eval_every == 0:",
             ("tests/harness/runtime/test_time_limit.py::test_the_step_estimate_is_the_largest_recent_step_and_the_last_evaluation_is_budgeted",),
             "the last step's evaluation not budgeted"),
    Mutation("run_request.py:106", "ssmbench/harness/config/run_request.py",
             "options = dataclasses.replace(self.options, out=out, time_limit=time_limit)",
             "options = dataclasses.replace(self.options, out=out)",
             ("tests/harness/config/test_run_request.py::test_a_suite_member_is_a_single_run_with_the_tasks_own_time_limit",),
             "member() drops the per-task time limit"),
    Mutation("run_folder.py:291", "ssmbench/harness/results/checkpoints.py",
             'torch.load(path, map_location="cpu", weights_only=True)',
             'torch.load(path, map_location="cpu", weights_only=False)',
             ("tests/harness/results/test_run_recovery.py::test_a_checkpoint_carrying_a_pickled_object_is_refused",),
             "checkpoints unpickled with weights_only=False"),
    Mutation("run_folder.py:46", "ssmbench/harness/results/run_folder.py",
             "while path.exists():", "while False:",
             ("tests/harness/results/test_run_recovery.py::test_default_run_dirs_started_in_the_same_second_are_kept_apart",),
             "default_run_dir without its suffix"),
    Mutation("run_folder.py:+fork", "ssmbench/harness/results/folder_lock.py",
             "os.register_at_fork(after_in_child=_forget_locks_in_child)", "pass",
             ("tests/harness/results/test_run_recovery.py::test_forked_children_do_not_keep_the_run_lock",),
             "forked data workers keep the run lock"),
    Mutation("run_folder.py:+zombie", "ssmbench/harness/results/folder_lock.py",
             'in ("Z", "X"):', "in ():",
             ("tests/harness/results/test_run_recovery.py::test_a_killed_holder_not_yet_reaped_no_longer_runs",),
             "a zombie holder counts as running"),
    Mutation("run_folder.py:+tmp", "ssmbench/harness/results/folder_lock.py",
             "remove_temporaries(Path(folder))  #", "pass  #",
             ("tests/harness/results/test_run_recovery.py::test_taking_the_lock_removes_a_killed_writers_temporaries",),
             "a killed writer's temporaries stay"),
    Mutation("run_folder.py:+vanished", "ssmbench/harness/results/run_folder.py",
             "if self._logged and not self.log_path.exists():", "if False:",
             ("tests/harness/results/test_run_recovery.py::test_a_metrics_log_that_vanished_is_a_warning_and_is_written_again",),
             "a vanished metrics.jsonl silently recreated"),
    Mutation("run_folder.py:+torn", "ssmbench/harness/results/run_folder.py",
             "if i < len(lines) - 1:", "if True:",
             ("tests/harness/results/test_run_recovery.py::"
              "test_a_torn_last_log_line_is_left_out_and_a_full_disk_while_logging_is_one_line",),
             "a torn last line of metrics.jsonl breaks the resume"),
    Mutation("run_folder.py:+logfull", "ssmbench/harness/results/run_folder.py",
             "raise disk_full(self.log_path, code, max(len(text), _size(self.last))) from None", "raise",
             ("tests/harness/results/test_run_recovery.py::"
              "test_a_torn_last_log_line_is_left_out_and_a_full_disk_while_logging_is_one_line",),
             "a full disk while logging is a traceback"),
    Mutation("trainer.py:+spent", "ssmbench/harness/training/trainer.py",
             "if D.any_rank(not budget.fits(step), env.device):", "if False:",
             ("tests/harness/runtime/test_time_limit.py::"
              "test_a_limit_spent_before_training_stops_before_the_optimiser_and_keeps_the_folder",),
             "a spent time limit stops only after the optimiser and the validation set"),
    Mutation("protocol.py:+kept", "ssmbench/harness/training/protocol.py",
             "fresh and env.is_main and not isinstance(exc, TL.TimeLimitReached)", "fresh and env.is_main",
             ("tests/harness/runtime/test_time_limit.py::"
              "test_a_limit_spent_before_training_stops_before_the_optimiser_and_keeps_the_folder",),
             "a run stopped by its limit before any step loses the folder its --resume line names"),
    Mutation("checkpoints.py:+prev", "ssmbench/harness/results/checkpoints.py",
             "if keep_previous and path.exists():", "if False:",
             ("tests/harness/results/test_run_recovery.py::test_the_previous_last_checkpoint_is_kept_and_used_when_last_is_damaged",),
             "the previous last.pt not kept"),
    Mutation("checkpoints.py:+fallback", "ssmbench/harness/results/checkpoints.py",
             "if not prev.exists():", "if True:",
             ("tests/harness/results/test_run_recovery.py::test_the_previous_last_checkpoint_is_kept_and_used_when_last_is_damaged",),
             "a damaged last.pt does not fall back"),
    Mutation("checkpoints.py:+enospc", "ssmbench/harness/results/checkpoints.py",
             "cause = recorder.error if recorder is not None and recorder.error is not None else exc",
             "cause = exc",
             ("tests/harness/results/test_run_recovery.py::test_a_full_disk_while_checkpointing_is_one_line_and_loses_nothing",),
             "torch's 'unexpected pos' on a full disk stays a traceback"),
    Mutation("time_limit.py:+continue", "ssmbench/harness/runtime/time_limit.py",
             "limit = self.next_limit or self.limit", "limit = self.limit",
             ("tests/harness/runtime/test_time_limit.py::test_a_limit_that_let_no_step_run_suggests_one_that_can",),
             "the continue line repeats a limit in which no step fitted"),
    Mutation("resolver.py:86", "ssmbench/harness/config/resolver.py",
             '{k: (T if v == "${T}" else v) for k, v in keys.items() if not _is_task_key(k)}',
             '{k: v for k, v in keys.items() if not _is_task_key(k)}',
             ("tests/harness/config/test_one_resolver.py::test_a_presets_t_placeholder_becomes_the_tasks_input_length",),
             "${T} in a preset no longer substituted (H3)"),
    # ------------------------------------------------ issue 37: generators (induction heads, MQAR, MAD)
    # Each is killed by a plain-Python oracle of the sample's meaning or a law written out in the test, not by a
    # digest: the old power-law test took its weights from the generator's own `query_weights`.
    Mutation("induction_heads.py:70", "generators/induction_heads.py",
             "targets[i, L - 1] = x[s + 1]", "targets[i, L - 1] = x[s]",
             (IH + "test_every_sample_labels_the_token_after_the_first_special_token",),
             "target is the special token itself, not the token after it"),
    Mutation("mqar.py:125", "generators/mqar.py",
             "_ordered_sample(state, half, vocab_size, k, pool, value_ids)",
             "_ordered_sample(state, half - 1, vocab_size - 1, k, pool, value_ids)",
             (MQ + "test_every_sample_binds_distinct_keys_below_half_to_distinct_values_above_it",),
             "values drawn from [V/2 - 1, V - 1): they overlap the key range"),
    Mutation("mqar.py:84", "generators/mqar.py",
             "** (float(config.power_a) - 1.0)", "** float(config.power_a)",
             (MQ + "test_first_query_offset_follows_zoologys_power_law_written_out_here",),
             "power-law exponent a instead of a - 1"),
    Mutation("_mad.py:249", "generators/_mad.py",
             "value_of[k] if seen and multi_query else IGNORE", "value_of[k] if multi_query else IGNORE",
             ("tests/generators/test_mad.py::test_recall_scores_a_key_only_after_its_first_sight",),
             "multi-query recall also labels a key's first value"),
]


class Refused(Exception):
    """A reason not to start at all (exit 2)."""


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every `finally` restores its file."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def select(only: str | None) -> list[Mutation]:
    """The entries whose key or file contains one of the comma-separated substrings of `only`."""
    if not only:
        return list(MUTATIONS)
    parts = [p.strip() for p in only.split(",") if p.strip()]
    return [m for m in MUTATIONS if any(p in m.key or p in m.file for p in parts)]


def git_dirty(files: list[str]) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--", *files], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return sorted({line[3:].strip() for line in out.splitlines() if line.strip()})


def present(m: Mutation, text: str) -> bool:
    """Whether the entry's original text occurs exactly once in `text` (else the entry is stale)."""
    return text.count(m.original) == 1


JOURNAL = Path(tempfile.gettempdir()) / f"ssmbench-mutations-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}.json"
"""Written while a file holds a mutation, removed once it is restored: a run killed with SIGKILL (which no `finally`
survives) leaves it behind, and the next run refuses to start until `--restore` has put the original back."""


def restore_from_journal() -> str:
    """Put back the original bytes a killed run recorded; returns what was done."""
    record = json.loads(JOURNAL.read_text())
    path = ROOT / record["file"]
    if hashlib.sha256(path.read_bytes()).hexdigest() == record["mutated_sha256"]:
        _write(path, base64.b64decode(record["original"]), path.stat().st_mtime_ns)
        done = f"restored {record['file']} (mutation {record['key']} undone)"
    elif hashlib.sha256(path.read_bytes()).hexdigest() == record["original_sha256"]:
        done = f"{record['file']} already holds its original bytes"
    else:
        raise Refused(f"{record['file']} changed since the killed run mutated it ({record['key']}): restore its "
                      f"original text by hand (see `git diff`), then delete {JOURNAL}")
    JOURNAL.unlink()
    return done


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
    if not present(m, original.decode()):
        return "stale, needs update", f"the original text occurs {original.decode().count(m.original)} times"
    if baseline:
        code, tail = run_tests(m.tests, timeout)
        if code != 0:
            return "baseline failed", tail
    mutated = original.decode().replace(m.original, m.mutated, 1).encode()
    JOURNAL.write_text(json.dumps({"key": m.key, "file": m.file, "original": base64.b64encode(original).decode(),
                                   "original_sha256": hashlib.sha256(original).hexdigest(),
                                   "mutated_sha256": hashlib.sha256(mutated).hexdigest()}))
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
        JOURNAL.unlink(missing_ok=True)
    if code == 1:
        return "killed", tail
    if code == 0:
        return "SURVIVED", tail
    return "error", f"pytest exit status {code}: {tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="Entries whose key (file:line) or file contains this text (several: "
                                       "separated by commas).")
    parser.add_argument("--list", action="store_true", help="Print the entries and exit.")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="Mutate files that have uncommitted changes (their bytes are still restored exactly).")
    parser.add_argument("--no-baseline", action="store_true", help="Skip the run of the tests on unmutated code.")
    parser.add_argument("--timeout", type=float, default=900.0, help="Seconds per pytest run.")
    parser.add_argument("--restore", action="store_true",
                        help="Undo the mutation a killed run left in place (from its journal) and exit.")
    args = parser.parse_args(argv)
    if args.restore:
        if not JOURNAL.exists():
            print("nothing to restore: no run was killed mid-mutation")
            return 0
        try:
            print(restore_from_journal())
        except Refused as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    chosen = select(args.only)
    if not chosen:
        print(f"no mutation matches {args.only!r}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:  # reads the files, changes nothing
            found = "original text present" if present(m, (ROOT / m.file).read_text()) else "stale, needs update"
            print(f"{m.key:<24} {found:<22} {m.file}: {m.what}\n{'':<47} tests: {', '.join(m.tests) or '(none)'}")
        return 0
    files = sorted({m.file for m in chosen})
    try:
        if JOURNAL.exists():
            record = json.loads(JOURNAL.read_text())
            raise Refused(f"a killed run left {record['file']} mutated ({record['key']}): run `python "
                          "tests/mutations.py --restore` first")
        dirty = git_dirty(files)
        if dirty and not args.allow_dirty:
            raise Refused(f"uncommitted changes in {', '.join(dirty)}: commit them first (this script edits files "
                          "in place), or pass --allow-dirty")
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
