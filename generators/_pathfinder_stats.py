"""Pathfinder statistics for the data card: class fractions per split, against the frozen goldens and the reference.

GOLDEN holds the class pixel fractions (0 / 1 / 2) of the first 1,000 train images of root seed 0 for each preset
(task version 2, label_rule coverage), GOLDEN_REFERENCE_RULE those of the same images under label_rule=reference;
builds must stay within +-20 % of them (a check on the generator, not a property of the paper). REFERENCE holds the
reference generator's fractions (measured on its own images), which include its resampling halo.

>>> from ssmbench.generators.pathfinder import PRESETS
>>> md = statistics_markdown(PRESETS["128"], {"val": {"class_pixels": [9000, 700, 300], "connected": [4, 6],
...                                                   "n_distractors": [0] * 16 + [10], "margin": [5, 5],
...                                                   "pair_attempts": [4000]}}, preset="128")
>>> "| val | 10 | 90.000 % | 7.000 % | 3.000 % | 60.0 % | 400.0 | 16.00 |" in md
True
>>> "Frozen golden fractions for preset 128" in md
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

GOLDEN: dict[str, tuple[float, float, float]] = {
    "128": (0.979297, 0.015721, 0.004982),
    "256": (0.988855, 0.008327, 0.002817),
    "512": (0.985739, 0.010896, 0.003365),
}
"""Class pixel fractions of the first 1,000 train images (root seed 0, version 2, label_rule coverage) per preset."""
GOLDEN_REFERENCE_RULE: dict[str, tuple[float, float, float]] = {
    "128": (0.946529, 0.040562, 0.012909),
    "256": (0.975431, 0.018346, 0.006223),
    "512": (0.979870, 0.015379, 0.004751),
}
"""The same images' fractions under label_rule=reference (only the masks differ)."""
GOLDEN_TOLERANCE = 0.20
"""Relative tolerance of every class fraction against the goldens."""
REFERENCE: dict[str, tuple[float, float, float]] = {
    "128": (0.940, 0.044, 0.015),
    "256": (0.973, 0.020, 0.007),
    "512": (0.980, 0.016, 0.004),
}
"""The reference generator's class fractions (with its Lanczos halo ring labelled as path): see the card's discrepancies."""


def goldens(rule: str) -> dict[str, tuple[float, float, float]]:
    """The frozen golden fractions for a label rule."""
    return GOLDEN_REFERENCE_RULE if rule == "reference" else GOLDEN


RULE_TEXT = {
    "coverage": "a pixel is on a main path where one of its dashes covers a sub-sample",
    "reference": "a pixel is on a main path where the path's Lanczos-resized rendering is at least 0.5/255 of its "
                 "maximum, the reference's faint halo ring included",
}


def _pct(x: float) -> str:
    return f"{100.0 * x:.3f} %"


def statistics_markdown(config: Any, stats: Mapping[str, Mapping[str, Any]], preset: str | None = None) -> str:
    """Markdown table of the per-split statistics stored in manifest.json.

    `preset` names the preset `config` equals, if any: its frozen golden fractions are then compared too.
    """
    lines = ["| split | images | class 0 | class 1 | class 2 | connected | mean main-pair attempts | "
             "mean distractors |", "|---|---|---|---|---|---|---|---|"]
    total = np.zeros(3, dtype=np.float64)
    for split in ("train", "val", "test"):
        s = stats.get(split) or {}
        if "class_pixels" not in s:
            continue
        pix = np.asarray(s["class_pixels"], dtype=np.float64)
        conn = np.asarray(s["connected"], dtype=np.float64)
        n = int(conn.sum())
        if n == 0:
            continue
        total += pix
        frac = pix / pix.sum()
        hist = np.asarray(s["n_distractors"], dtype=np.float64)
        mean_nd = float((hist * np.arange(hist.size)).sum() / max(hist.sum(), 1))
        attempts = float(np.asarray(s["pair_attempts"]).sum()) / n
        lines.append(f"| {split} | {n} | {_pct(frac[0])} | {_pct(frac[1])} | {_pct(frac[2])} | "
                     f"{100.0 * conn[1] / n:.1f} % | {attempts:.1f} | {mean_nd:.2f} |")
    if total.sum() == 0:
        return ""
    rule = getattr(config, "label_rule", "coverage")
    out = ["Class pixel fractions over all pixels of each split (class 0: background, distractors and circles; "
           "1: main path; 2: the main path with circles at both ends).", "", *lines, "",
           f"Masks: `label_rule` = `{rule}` ({RULE_TEXT[rule]}).", ""]
    name = preset
    if name is not None:
        frac = total / total.sum()
        gold = goldens(rule)[name]
        inside = all(abs(f - g) <= GOLDEN_TOLERANCE * g for f, g in zip(frac, gold, strict=True))
        ref = REFERENCE[name]
        out += [f"Frozen golden fractions for preset {name} under this rule (first 1,000 train images of seed 0): "
                f"{' / '.join(_pct(g) for g in gold)}; this dataset is "
                f"{'within' if inside else 'OUTSIDE'} +-{GOLDEN_TOLERANCE:.0%} of them.", ""]
        if rule == "reference":
            out += [f"The reference generator gives {' / '.join(_pct(r) for r in ref)} with the same rule; "
                    f"ssmbench's dashes carry less ink per unit length than its PIL lines (see Known "
                    f"discrepancies), so expect slightly fewer class-1/2 pixels at 128 and 256.", ""]
        else:
            out += [f"The reference generator gives {' / '.join(_pct(r) for r in ref)}: its masks also label a faint "
                    f"resampling halo around every dash, so expect fewer class-1/2 pixels here. Scores on these "
                    f"masks are not comparable with the paper's Table 3; for masks like the reference's, generate "
                    f"with `-o label_rule=reference` (images drawn the same way).", ""]
    return "\n".join(out)
