"""The MAD tasks against mad-lab's own generators, run in this process: distributions and speed.

    PYTHONSAFEPATH=1 python benchmarks/fidelity/mad_lab.py --mad-lab PATH [--n 3000] [--out FILE]

PATH is a checkout or a bare git directory of athms/mad-lab (the `fetch` tool's mirror works); its
`mad/data/instances.py` at HEAD is written unchanged into a temporary folder and imported from there (it needs only
NumPy; nothing of mad-lab is vendored into ssmbench). Their instance functions are called as `mad.configs.MADConfig`
calls them: MADConfig's defaults updated with the baseline of the task's `configs/tasks/*.yml`, one
`np.random.default_rng(seed)` for the whole set, the memorization map made once with `generate_kv_map`, and
`is_training=False` for the recall tasks (their test split, the labels ssmbench stores; the fuzzy rows say which
split's key lengths they use). Selective copying draws its blank positions from NumPy's global state, which is
seeded here.

For every setting, the same statistics of n samples from each side (histograms, normalised): input ids, scored
label ids, positions of scored labels, scored positions per sample, plus a per-task one (distinct keys, noise
pairs, key-run lengths, pad length, positions of the tokens to copy). Each is compared by total-variation distance
(TV = half the L1 distance of the two histograms). Tolerance: a statistic passes when TV(ours, theirs) <= 3 x
TV(theirs, theirs'), the distance between two independent mad-lab draws of the same size (the sampling noise
floor), plus 0.01. Speed: samples per second on one thread each (NUMBA_NUM_THREADS=1), ours a batched `generate`
after a warm-up, theirs a Python loop of instance calls; the ratio is ours / theirs.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.util  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

TOLERANCE_FACTOR, TOLERANCE_FLOOR = 3.0, 0.01
MAD_CONFIG_DEFAULTS = {"vocab_size": 16, "seq_len": 128, "frac_noise": 0.0, "noise_vocab_size": 0,
                       "num_tokens_to_copy": 0, "k_motif_size": 1, "v_motif_size": 1, "multi_query": True}
"""`mad.configs.MADConfig`'s task fields at their defaults (what a YAML baseline does not set)."""


@dataclasses.dataclass
class Setting:
    """One comparison: our task and config changes, their function name, YAML baseline and extra arguments."""

    label: str
    task: str
    ours: dict[str, Any]
    theirs_fn: str
    theirs: dict[str, Any]
    extra: str  # the per-task statistic (a key of EXTRA)
    is_training: bool = False


SETTINGS = [
    Setting("in-context recall, baseline", "mad_in_context_recall", {}, "generate_in_context_recall_instance",
            {"vocab_size": 16, "seq_len": 128, "multi_query": True}, "distinct_keys"),
    Setting("in-context recall, vocab 64 seq 512", "mad_in_context_recall", {"vocab_size": 64, "seq_len": 512},
            "generate_in_context_recall_instance", {"vocab_size": 64, "seq_len": 512, "multi_query": True},
            "distinct_keys"),
    Setting("in-context recall, one query (multi_query false)", "mad_in_context_recall", {"multi_query": False},
            "generate_in_context_recall_instance", {"vocab_size": 16, "seq_len": 128, "multi_query": False},
            "distinct_keys"),
    Setting("fuzzy recall, baseline (train split: keys of 1-3 ids)", "mad_fuzzy_recall", {},
            "generate_fuzzy_in_context_recall_instance",
            {"vocab_size": 16, "seq_len": 128, "multi_query": True, "k_motif_size": 3, "v_motif_size": 3},
            "key_run_lengths", is_training=True),
    Setting("fuzzy recall, baseline (test split: keys of 3 ids)", "mad_fuzzy_recall", {"variable_key_size": False},
            "generate_fuzzy_in_context_recall_instance",
            {"vocab_size": 16, "seq_len": 128, "multi_query": True, "k_motif_size": 3, "v_motif_size": 3},
            "pad_length"),
    Setting("noisy recall, baseline", "mad_noisy_recall", {}, "generate_noisy_in_context_recall_instance",
            {"vocab_size": 32, "noise_vocab_size": 16, "seq_len": 128, "multi_query": True, "frac_noise": 0.2},
            "noise_pairs"),
    Setting("noisy recall, frac_noise 0.8", "mad_noisy_recall", {"frac_noise": 0.8},
            "generate_noisy_in_context_recall_instance",
            {"vocab_size": 32, "noise_vocab_size": 16, "seq_len": 128, "multi_query": True, "frac_noise": 0.8},
            "noise_pairs"),
    Setting("selective copying, baseline", "mad_selective_copying", {}, "generate_selective_copying_instance",
            {"vocab_size": 16, "seq_len": 256, "num_tokens_to_copy": 16}, "copied_positions"),
    Setting("compression, baseline", "mad_compression", {}, "generate_compression_instance",
            {"vocab_size": 16, "seq_len": 32}, "none"),
    Setting("memorization, baseline", "mad_memorization", {}, "generate_memorization_instance",
            {"vocab_size": 256, "seq_len": 32}, "none"),
]


def _distinct_keys(x: np.ndarray, y: np.ndarray, vocab: int) -> np.ndarray:
    return np.array([len(set(row[0::2].tolist())) for row in x])


def _noise_pairs(x: np.ndarray, y: np.ndarray, vocab: int) -> np.ndarray:
    return (x[:, 0:-1:2] >= 16).sum(axis=1)  # noisy recall: keys 0-7, values 8-15, noise 16..


def _runs(x: np.ndarray, below: int) -> list[int]:
    out = []
    for row in x:
        is_key = row < below
        starts = np.flatnonzero(is_key & ~np.r_[False, is_key[:-1]])
        ends = np.flatnonzero(is_key & ~np.r_[is_key[1:], False])
        out += (ends - starts + 1).tolist()
    return out


def _key_run_lengths(x: np.ndarray, y: np.ndarray, vocab: int) -> np.ndarray:
    return np.array(_runs(x, (vocab - 1) // 2))


def _pad_length(x: np.ndarray, y: np.ndarray, vocab: int) -> np.ndarray:
    return np.argmax(x != vocab - 1, axis=1)


def _copied_positions(x: np.ndarray, y: np.ndarray, vocab: int) -> np.ndarray:
    before_marker = np.cumsum(x == vocab - 1, axis=1) == 0
    return np.flatnonzero(((x < vocab - 2) & before_marker).ravel()) % x.shape[1]


EXTRA: dict[str, Callable[[np.ndarray, np.ndarray, int], np.ndarray]] = {
    "distinct_keys": _distinct_keys, "noise_pairs": _noise_pairs, "key_run_lengths": _key_run_lengths,
    "pad_length": _pad_length, "copied_positions": _copied_positions}


def statistics(x: np.ndarray, y: np.ndarray, vocab: int, extra: str, labels: bool = True) -> dict[str, np.ndarray]:
    """Named histograms (counts) of one side's samples; `labels=False` leaves out the label statistics."""
    scored = y != -100
    length = x.shape[1]
    out = {"input ids": np.bincount(x.ravel(), minlength=vocab)}
    if labels:
        out.update({
            "scored label ids": np.bincount(y[scored], minlength=vocab),
            "scored positions": np.bincount(np.flatnonzero(scored.ravel()) % length, minlength=length),
            "scored per sample": np.bincount(scored.sum(axis=1), minlength=length + 1)})
    if extra != "none":
        out[extra] = np.bincount(EXTRA[extra](x, y, vocab))
    return out


def tv(a: np.ndarray, b: np.ndarray) -> float:
    n = max(len(a), len(b))
    pa, pb = (np.pad(h, (0, n - len(h))).astype(np.float64) for h in (a, b))
    return 0.5 * float(np.abs(pa / max(pa.sum(), 1) - pb / max(pb.sum(), 1)).sum())


def load_instances(mad_lab: Path, folder: Path) -> tuple[Any, str]:
    """Import mad-lab's `mad/data/instances.py` at HEAD from a copy in `folder`; returns (module, commit)."""
    git_dir = mad_lab if (mad_lab / "HEAD").is_file() and not (mad_lab / ".git").exists() else mad_lab / ".git"
    commit = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    source = subprocess.run(["git", f"--git-dir={git_dir}", "show", "HEAD:mad/data/instances.py"], check=True,
                            capture_output=True, text=True).stdout
    path = folder / "mad_instances.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("mad_instances", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, commit


def theirs(mad: Any, setting: Setting, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """n samples from mad-lab's function as MADConfig calls it; returns (inputs, targets, seconds)."""
    kwargs = {**MAD_CONFIG_DEFAULTS, **setting.theirs}
    kwargs["rng"] = np.random.default_rng(seed)
    np.random.seed(seed)  # selective copying's blank positions come from NumPy's global state
    if setting.task == "mad_memorization":
        kwargs["kv_map"] = mad.generate_kv_map(vocab_size=kwargs["vocab_size"] - 1, seed=12345)
    fn = getattr(mad, setting.theirs_fn)
    start = time.perf_counter()
    pairs = [fn(is_training=setting.is_training, **kwargs) for _ in range(n)]
    seconds = time.perf_counter() - start
    return np.stack([p[0] for p in pairs]).astype(np.int64), np.stack([p[1] for p in pairs]).astype(np.int64), seconds


def ours(setting: Setting, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    from ssmbench.registry import get_task
    from ssmbench.seeding import keys_for

    task = get_task(setting.task)
    config = dataclasses.replace(task.presets["mad"], **setting.ours)
    task.generate(config, keys_for(task.name, task.version, config.to_dict(), seed + 1, "train", 0, 8))  # compile
    keys = keys_for(task.name, task.version, config.to_dict(), seed, "train", 0, n)
    start = time.perf_counter()
    out = task.generate(config, keys)
    seconds = time.perf_counter() - start
    return out["inputs"].astype(np.int64), out["targets"].astype(np.int64), seconds


def compare(mad: Any, setting: Setting, n: int) -> tuple[list[str], bool]:
    vocab = int(setting.theirs["vocab_size"])
    tx, ty, t_seconds = theirs(mad, setting, n, seed=0)
    tx2, ty2, _ = theirs(mad, setting, n, seed=1)
    ox, oy, o_seconds = ours(setting, n, seed=0)
    lines = [f"## {setting.label}: ssmbench {setting.task} {setting.ours or '(preset mad)'} vs mad-lab "
             f"{setting.theirs_fn}(is_training={setting.is_training}, {setting.theirs})"]
    ok = tx.shape == ox.shape
    lines.append(f"  shape ours {ox.shape[1:]} theirs {tx.shape[1:]}  {'same' if ok else 'DIFFERENT'}")
    lines.append(f"  fraction of positions scored: ours {np.mean(oy != -100):.4f}  theirs {np.mean(ty != -100):.4f}"
                 f"  theirs' {np.mean(ty2 != -100):.4f}")
    if setting.is_training:
        lines.append("  (mad-lab's training split labels every next token, ssmbench stores the test split's labels in "
                     "every split: inputs only)")
    so, st, st2 = (statistics(a, b, vocab, setting.extra, not setting.is_training)
                   for a, b in ((ox, oy), (tx, ty), (tx2, ty2)))
    lines.append(f"  {'statistic':<20} {'TV(ours,theirs)':>16} {'noise TV':>9} {'tolerance':>9}  verdict")
    for name in st:
        d, floor = tv(so[name], st[name]), tv(st[name], st2[name])
        tolerance = TOLERANCE_FACTOR * floor + TOLERANCE_FLOOR
        ok &= d <= tolerance
        lines.append(f"  {name:<20} {d:16.4f} {floor:9.4f} {tolerance:9.4f}  {'ok' if d <= tolerance else 'FAIL'}")
    ours_rate, theirs_rate = n / o_seconds, n / t_seconds
    lines.append(f"  speed (one thread): ours {ours_rate:,.0f} samples/s, theirs {theirs_rate:,.0f} samples/s, "
                 f"ratio {ours_rate / theirs_rate:,.0f}x")
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mad-lab", type=Path, required=True, help="checkout or bare git dir of athms/mad-lab")
    parser.add_argument("--n", type=int, default=3000, help="samples per side and setting")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        mad, commit = load_instances(args.mad_lab, Path(tmp))
        report = [f"# MAD fidelity: ssmbench vs athms/mad-lab@{commit} mad/data/instances.py, n = {args.n} per side",
                  f"# tolerance per statistic: TV <= {TOLERANCE_FACTOR:g} x noise TV + {TOLERANCE_FLOOR:g} "
                  "(noise TV: two independent mad-lab draws)",
                  f"# machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start (speeds on a "
                  "shared machine are indicative)", ""]
        failures = 0
        for setting in SETTINGS:
            lines, ok = compare(mad, setting, args.n)
            failures += not ok
            report += lines + [""]
            print("\n".join(lines), flush=True)
    report.append(f"{len(SETTINGS) - failures} of {len(SETTINGS)} settings within tolerance")
    print(report[-1])
    if args.out:
        args.out.write_text("\n".join(report) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
