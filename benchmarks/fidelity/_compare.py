"""What the same-run fidelity scripts of issue 40 share (flipflop.py, jelassi_copying.py): the statistic table with
its verdicts, the control's lines and the command line. The distances are zoology_mqar.py's (total variation, a
two-sample chi-square after merging sparse bins), loaded from beside this file, so every script keeps one tolerance:
TV(ssmbench, theirs) <= 2 x TV(ssmbench, ssmbench with another seed) + 0.005 and chi-square p >= 0.001.

>>> import numpy as np
>>> lines, off = table({"x": np.array([50, 50])}, {"x": np.array([49, 51])}, {"x": np.array([51, 49])}, "th")
>>> off, lines[1].split()[-1]
(0, 'ok')
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("zoology_mqar", Path(__file__).with_name("zoology_mqar.py"))
_zoology = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_zoology)
total_variation, chi_square_p = _zoology.total_variation, _zoology.chi_square_p


def within(ours: np.ndarray, theirs: np.ndarray, again: np.ndarray) -> tuple[float, float, float, bool]:
    """(TV to theirs, TV to ssmbench's second seed, chi-square p, inside the tolerance)."""
    tv, noise, p = total_variation(ours, theirs), total_variation(ours, again), chi_square_p(ours, theirs)
    return tv, noise, p, tv <= 2 * noise + 0.005 and p >= 1e-3


def table(ours: Mapping[str, np.ndarray], theirs: Mapping[str, np.ndarray], again: Mapping[str, np.ndarray],
          short: str) -> tuple[list[str], int]:
    """The lines of one setting's statistics (`short` names their side) and how many fall outside the tolerance."""
    lines = [f"   {'statistic':24s} {'TV(ssm,' + short + ')':>11s} {'TV(ssm,ssm)':>11s} {'chi2 p':>8s}  "
             f"{'mean ssm':>9s} {'mean ' + short:>9s}  verdict"]
    off = 0
    for name in ours:
        tv, noise, p, ok = within(ours[name], theirs[name], again[name])
        off += not ok
        grid = np.arange(len(ours[name]))
        means = [float((grid * h).sum() / max(h.sum(), 1)) for h in (ours[name], theirs[name])]
        lines.append(f"   {name:24s} {tv:11.4f} {noise:11.4f} {p:8.3f}  {means[0]:9.3f} {means[1]:9.3f}  "
                     f"{'ok' if ok else 'DIFFERS'}")
    return lines, off


def control(title: str, ours: Mapping[str, np.ndarray], theirs: Mapping[str, np.ndarray],
            same: Mapping[str, np.ndarray], names: tuple[str, ...]) -> list[str]:
    """The control's lines: a deliberately different ssmbench config, which must come out DIFFERS."""
    lines = [f"control (must differ): {title}"]
    for name in names:
        tv, noise, p, ok = within(ours[name], theirs[name], same[name])
        lines.append(f"   {name:24s} TV {tv:.4f}, noise {noise:.4f}, chi2 p {p:.2g}: "
                     f"{'ok' if ok else 'DIFFERS (as it must)'}")
    return lines


def main(doc: str, run: Callable[[argparse.Namespace], list[str]], default_n: int,
         extra: Callable[[argparse.ArgumentParser], None] | None = None, argv: list[str] | None = None) -> int:
    """Parse `--n` and `--out` (and `extra`'s options), print the report of `run(args)`, write it to `--out`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=default_n, help="samples per side and setting")
    parser.add_argument("--out", type=Path, help="also write the report here")
    if extra:
        extra(parser)
    args = parser.parse_args(argv)
    text = "\n".join(run(args)) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0
