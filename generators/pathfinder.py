"""Pathfinder-Segmentation (data_cards/pathfinder.md): per-pixel labels of the main paths and of which path is connected.

Each image holds two long dashed main paths, short dashed distractor paths (each carrying one circle) and two
circles on main-path ends: both ends of one path when `label` (connected) is 1, one end of each path otherwise.
Targets: 0 background, distractors and circles; 2 on the main path whose two ends both carry circles; 1 on every
other main-path pixel. Images are flattened row-major into sequences of length size**2 for the models.

Worked example, a tiny config (image | mask | mask with label_rule=reference; image ' ' black, '.' dim, '#' bright;
masks '.' 0, '1', '2'):

>>> import dataclasses
>>> import numpy as np
>>> from ssmbench.generators.pathfinder import Pathfinder, PathfinderConfig
>>> cfg = PathfinderConfig(size=32, seed_distance=6, marker_radius=1.5, contour_length=4, dash_length=4.0,
...                        dash_thickness=1.5, margin_list=(1,), distractor_length=2, num_distractors=2)
>>> key = np.array([2], dtype=np.uint64)
>>> out = Pathfinder().generate(cfg, key)
>>> ref = Pathfinder().generate(dataclasses.replace(cfg, label_rule="reference"), key)
>>> int(out["label"][0]), out["marker_centres"][0].tolist()   # connected: both circles on path 0
(1, [[19, 12], [2, 22]])
>>> out["tips"][0].tolist()                                    # [path][origin, terminal][y, x]
[[[19, 12], [2, 22]], [[23, 8], [5, 2]]]
>>> bool((ref["inputs"] == out["inputs"]).all())              # the label rule changes the masks only
True
>>> img, lab, rlab = out["inputs"][0], out["targets"][0], ref["targets"][0]
>>> for y in range(27):
...     print("|" + "".join(" .#"[int(v > 0) + int(v >= 128)] for v in img[y]) + "|"
...           + "".join(".12"[v] for v in lab[y]) + "|" + "".join(".12"[v] for v in rlab[y]))
|                                |................................|......................2.........
|                     ###        |................................|....................22..2.......
|           ###       ###        |.....................22.........|...................2.222........
|          .###      .###        |....................222.........|.111..............2.222.........
|          .###      ##          |....................22..........|1...1............22222..2.......
| ...      .#       .#.          |.111...............222..........|.111.1..........22.222.2........
| .#.      .#     ..             |.111.............22.............|.111.1.........2.2222.2.........
|  #.      ..     .#             |..11.............22.............|..11.1.........2.222.2..........
|  #.             .#             |..11.............22.............|.111.1.........2.22222..........
|  ..       .     #.             |..11.............22.............|.11111........22222.2...........
|  ..       ##    ..             |..11.............22.............|.11111........2.222.2...........
|  #.      .#.  ..               |..11...........22...............|.111.1.......2.222.2............
|  #.      ##   ##               |..11...........22...............|.111.1.......2.22222............
|  .#      ..   #.               |..11...........22...............|1.111.1.....22222.2.............
|  ..          .#                |..11..........22................|1.1111.....22.222.2.............
|   ..       .. .                |...11.......22.2................|.1111.1...2.22222...............
|   ##       .#           ..     |...11.......22..................|..1111.1..2.222.2...............
|   .#.      ##           ##     |...111......22..................|.1.11111.2.22222................
|    .#     ###           .#     |....11......22..................|..1.111.12.222.2................
|           ###            #.    |............22..................|....1111...222.2................
|      #.   ###            .#    |......11........................|...1.111.1....2.................
|      .#.                 .##   |......111.......................|....11111.1.22..................
|       ##                  .##  |.......11.......................|....1.111.......................
|       ..                   ..  |.......11.......................|.....1.111......................
|                              ##|................................|......1.........................
|                              ##|................................|.......11.......................
|                              ##|................................|................................
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ssmbench.api import Field, Spec, Task, TaskConfig, TrainingPolicy
from ssmbench.errors import ConfigError

REJECT_TRIES = 64
"""Uniform draws of a first dash's tail before exact enumeration of the available set (part of version 1)."""

MIN_SIZE, MAX_SIZE = 32, 8192
"""Image sides `size` may take (both tasks; `pathfinder_lra` goes through this config). Below 32 the main pair of
paths does not fit reliably: with the lengths a `--size` scales from the 128 preset, main-pair attempts per image
(measured over 1,000 images each) reach 1,221-4,072 at sides 32-38 (cap: `max_pair_attempts` = 10,000), but one
image in 1,000 passes the cap at 30, 263 in 1,000 at 26, 20 at 24, and at 8-16 the first image fails."""

LABEL_RULES = ("coverage", "reference")
"""Values of `label_rule` (data_cards/pathfinder.md, Labels)."""

_FLOAT_FIELDS = ("marker_radius", "dash_length", "dash_thickness", "continuity", "snake_contrast",
                 "marker_intensity", "occupied_threshold", "overlap_threshold", "min_free_fraction")


@dataclass(frozen=True)
class PathfinderConfig(TaskConfig):
    """Parameters of Pathfinder-Segmentation (the card's Parameters table); the defaults are the 128 preset."""

    size: int = 128
    """Image side S; sequences have length S**2."""
    aa: int = 2
    """Super-sampling factor per axis (aa**2 sub-samples per pixel)."""
    padding: int = 1
    """Width of the image border marked occupied."""
    seed_distance: int = 22
    """Distance between the two main paths' first tails; the first keeps 2x this from every image edge."""
    marker_radius: float = 2.1
    """Radius of the circles (marker disks), pixels."""
    contour_length: int = 14
    """Dashes per main path."""
    dash_length: float = 5.0
    """Dash length (pixels)."""
    dash_thickness: float = 1.5
    """Dash width (pixels)."""
    margin_list: tuple[int, ...] = (2, 3)
    """Margins m to draw from, uniformly, once per image; consecutive dashes are about 2m apart."""
    continuity: float = 1.8
    """Turning penalty; the largest turn per dash is 90 degrees / continuity."""
    distractor_length: int = 4
    """Dashes per distractor path."""
    num_distractors: int = 16
    """Distractor paths attempted."""
    snake_contrast: float = 0.9
    """Dash intensity in [0, 1] (main paths and distractors alike)."""
    marker_intensity: float = 1.0
    """Circle intensity in [0, 1]."""
    mark_distractors: bool = True
    """Each distractor carries one circle."""
    seed_trials: int = 3
    """Placement trials for a path's first dash."""
    dash_trials: int = 3
    """Draws per extension step."""
    distractor_attempts: int = 5
    """Attempts per distractor before it is skipped."""
    occupied_threshold: float = 0.3
    """A pixel is free iff its occupancy is at most this (in [0, 1))."""
    overlap_threshold: float = 1.8
    """A new dash is rejected if occupancy + its halo coverage reaches this anywhere."""
    min_free_fraction: float = 0.01
    """Distractor seeding stops when fewer free pixels remain."""
    max_pair_attempts: int = 10000
    """Safety cap on main-pair retries; reaching it is an error (the reference retries forever)."""
    label_min_coverage: float | None = None
    """Path-membership threshold for the mask, as a coverage fraction; None: one sub-sample (1/aa**2)."""
    commit_last_dash_of_path0: bool = False
    """Also commit main path 0's last dash to the occupancy map (the reference does not)."""
    label_rule: str = "coverage"
    """Mask rule: "coverage" (dash pixels, see label_min_coverage) or "reference" (the reference's Lanczos halo ring
    included; the paper's Table 3 used it). Only `targets` depend on it."""

    def __post_init__(self) -> None:
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(name, f"must be a number, got {value!r}")
            object.__setattr__(self, name, float(value))
        lmc = self.label_min_coverage
        if lmc is not None:
            if isinstance(lmc, bool) or not isinstance(lmc, int | float):
                raise ConfigError("label_min_coverage", f"must be a number or null, got {lmc!r}")
            object.__setattr__(self, "label_min_coverage", float(lmc))
        margins = self.margin_list
        if isinstance(margins, int) and not isinstance(margins, bool):
            margins = (margins,)  # `-o margin_list=3`
        if isinstance(margins, str | float | bool) or not margins:
            raise ConfigError("margin_list", f"must be a non-empty list of integers, got {self.margin_list!r}")
        margins = tuple(margins)
        if any(isinstance(m, bool) or not isinstance(m, int | float) or int(m) != m or not 1 <= m <= 255
               for m in margins):
            raise ConfigError("margin_list", f"entries must be integers in [1, 255], got {list(margins)}")
        object.__setattr__(self, "margin_list", tuple(int(m) for m in margins))
        self._validate()

    def _validate(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not MIN_SIZE <= self.size <= MAX_SIZE:
            small = isinstance(self.size, int) and not isinstance(self.size, bool) and self.size < MIN_SIZE
            raise ConfigError("size", f"must be an integer in [{MIN_SIZE}, {MAX_SIZE}], got {self.size!r}"
                              + (" (smaller images cannot fit the two main paths)" if small else ""),
                              f"choose a size of {MIN_SIZE} or more" if small else None)
        ints = {"aa": (1, 15), "padding": (0, self.size // 2 - 1),
                "seed_distance": (1, 10**6), "contour_length": (1, 1000), "distractor_length": (1, 1000),
                "num_distractors": (0, 255), "seed_trials": (1, 10**6), "dash_trials": (1, 10**6),
                "distractor_attempts": (0, 10**6), "max_pair_attempts": (1, 65535)}
        for name, (lo, hi) in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(name, f"must be an integer in [{lo}, {hi}], got {v!r}")
        for name in ("mark_distractors", "commit_last_dash_of_path0"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"must be true or false, got {getattr(self, name)!r}")
        if self.size <= 4 * self.seed_distance + 2:
            raise ConfigError("seed_distance", f"{self.seed_distance} leaves no room for the first main dash: "
                              f"size must exceed 4 * seed_distance + 2, got size {self.size}")
        positive = ("marker_radius", "dash_length", "dash_thickness", "continuity", "overlap_threshold")
        for name in positive:
            if not 0.0 < getattr(self, name) < 1e6:
                raise ConfigError(name, f"must be positive, got {getattr(self, name)}")
        for name in ("snake_contrast", "marker_intensity", "min_free_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(name, f"must lie in [0, 1], got {getattr(self, name)}")
        if not 0.0 <= self.occupied_threshold < 1.0:
            raise ConfigError("occupied_threshold", f"must lie in [0, 1), got {self.occupied_threshold}")
        if self.label_min_coverage is not None and not 0.0 < self.label_min_coverage <= 1.0:
            raise ConfigError("label_min_coverage", f"must lie in (0, 1] or be null, got {self.label_min_coverage}")
        if self.label_rule not in LABEL_RULES:
            raise ConfigError("label_rule", f"must be one of {', '.join(LABEL_RULES)}, got {self.label_rule!r}")
        if self.label_rule == "reference" and self.label_min_coverage is not None:
            raise ConfigError("label_min_coverage", "applies to label_rule=coverage only, not to label_rule=reference",
                              hint="drop -o label_min_coverage=...")


PRESETS: dict[str, PathfinderConfig] = {
    "128": PathfinderConfig(),
    "256": PathfinderConfig(size=256, aa=2, seed_distance=27, marker_radius=4.2, contour_length=16, dash_length=8,
                            dash_thickness=2, margin_list=(4,), continuity=2.2, distractor_length=5,
                            num_distractors=16, snake_contrast=1.0),
    "512": PathfinderConfig(size=512, aa=3, seed_distance=40, marker_radius=9, contour_length=12, dash_length=22,
                            dash_thickness=6, margin_list=(7,), continuity=2.5, distractor_length=4,
                            num_distractors=18, snake_contrast=1.0),
}


def _count_thresholds(config: PathfinderConfig) -> tuple[int, int, int]:
    """Exact integer forms of the coverage thresholds: (kfree, kover, klab) in sub-sample counts."""
    full = config.aa * config.aa
    kfree = max(k for k in range(full + 1) if k / full <= config.occupied_threshold)
    kover = next((k for k in range(2 * full + 1) if k / full >= config.overlap_threshold), 2 * full + 1)
    lmc = config.label_min_coverage
    klab = 1 if lmc is None else next(k for k in range(1, full + 1) if k / full >= lmc - 1e-12)
    return kfree, kover, klab


@functools.lru_cache(maxsize=16)
def kernel_params(config: PathfinderConfig, distractor_contrast: float | None = None,
                  seed_rule: bool = False) -> tuple:
    """(ip, fp, margins, sub, tables) for the Numba kernels; tables: `_pathfinder_tables.build_tables` plus the
    prefix sums of the Lanczos taps (`_pathfinder_lanczos.interior_taps`), then the template row spans and the
    candidate tables (`_pathfinder_tables.candidate_tables`), the spans of the template counts that can fail the
    overlap test (>= kover - aa^2), and the orientations a first dash may take per margin (all of them; with
    `seed_rule`, `_pathfinder_tables.seedable_orientations`). Distractor dashes are drawn at `distractor_contrast`
    (None: `config.snake_contrast`). `pathfinder_lra` sets both."""
    from . import _pathfinder_geom as geom
    from . import _pathfinder_snake as sn
    from ._pathfinder_lanczos import interior_taps
    from ._pathfinder_tables import build_tables, seedable_orientations, template_spans

    kfree, kover, klab = _count_thresholds(config)
    off, taps = interior_taps(config.aa)
    ip = np.zeros(19, dtype=np.int64)
    for idx, value in ((sn.SIZE, config.size), (sn.AA, config.aa), (sn.PAD, config.padding),
                       (sn.SEED_DIST, config.seed_distance), (sn.CL, config.contour_length),
                       (sn.DL, config.distractor_length), (sn.ND, config.num_distractors),
                       (sn.SEED_TRIALS, config.seed_trials), (sn.DASH_TRIALS, config.dash_trials),
                       (sn.DIST_ATTEMPTS, config.distractor_attempts), (sn.MAX_PAIR, config.max_pair_attempts),
                       (sn.KFREE, kfree), (sn.KOVER, kover), (sn.KLAB, klab),
                       (sn.MARK_DIST, int(config.mark_distractors)),
                       (sn.COMMIT_LAST, int(config.commit_last_dash_of_path0)), (sn.REJECT_TRIES, REJECT_TRIES),
                       (sn.LABEL_REF, int(config.label_rule == "reference")), (sn.LZ_OFF, off)):
        ip[idx] = value
    fp = np.zeros(9, dtype=np.float64)
    for idx, value in ((sn.LEN, config.dash_length), (sn.HT, config.dash_thickness / 2.0),
                       (sn.CONT, config.continuity), (sn.MARKER_R, config.marker_radius),
                       (sn.CONTRAST, config.snake_contrast), (sn.MARKER_I, config.marker_intensity),
                       (sn.MIN_FREE, config.min_free_fraction), (sn.RHO, geom.max_subsample_distance(config.aa)),
                       (sn.DIST_CONTRAST, config.snake_contrast if distractor_contrast is None
                        else distractor_contrast)):
        fp[idx] = value
    margins = np.array(config.margin_list, dtype=np.int64)
    *tables, spans, cstart, coff, cw = build_tables(config.dash_length, config.dash_thickness / 2.0,
                                                    config.margin_list, config.aa, config.continuity)
    cum = np.concatenate([[0.0], np.cumsum(taps)])  # prefix sums of the Lanczos taps (tables[13])
    full = config.aa * config.aa
    rows = tables[8].copy()
    strong = template_spans(tables[7], rows, max(kover - full, 0))
    assert np.array_equal(rows, tables[8])  # the same row layout as `spans`
    seedable = np.ones((len(config.margin_list), 360), dtype=np.int64)  # tables[19]
    if seed_rule:
        seedable = np.stack([seedable_orientations(config.dash_length, config.dash_thickness, m, config.aa)
                             for m in config.margin_list])
    return (ip, fp, margins, geom.subsample_offsets(config.aa),
            (*tables, cum, spans, cstart, coff, cw, strong, seedable))


META_FIELDS = ("label", "origin_index", "terminal_index", "tips", "marker_centres", "margin", "n_distractors",
               "n_pair_attempts")


def split_meta(meta: np.ndarray) -> dict[str, np.ndarray]:
    """Metadata rows of the kernel (see `_pathfinder_kernel`) -> stored per-sample fields."""
    n = meta.shape[0]
    return {"label": meta[:, 0].astype(np.uint8), "origin_index": meta[:, 1].astype(np.uint8),
            "terminal_index": meta[:, 2].astype(np.uint8),
            "tips": meta[:, 3:11].reshape(n, 2, 2, 2).astype(np.int16),
            "marker_centres": meta[:, 11:15].reshape(n, 2, 2).astype(np.int16),
            "margin": meta[:, 15].astype(np.uint8), "n_distractors": meta[:, 16].astype(np.uint8),
            "n_pair_attempts": meta[:, 17].astype(np.uint16)}


@typing.final
class Pathfinder(Task[PathfinderConfig]):
    """Label each pixel: on the main path with circles at both ends (2), on the other main path (1), or neither (0)"""

    name: ClassVar[str] = "pathfinder"
    version: ClassVar[str] = "2"
    Config: ClassVar[type] = PathfinderConfig
    presets: ClassVar[Mapping[str, PathfinderConfig]] = PRESETS
    default_preset: ClassVar[str] = "128"
    default_n: ClassVar[int] = 100_000
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.8, "val": 0.1, "test": 0.1}
    preset_option: ClassVar[str] = "size"  # type: ignore[assignment]
    card_preview: ClassVar[bool] = True
    """finalize writes preview.png (images beside their masks) into the dataset folder and the card shows it."""
    hf_task_category: ClassVar[str] = "image-segmentation"
    stream_exempt: ClassVar[tuple[str, ...]] = ("label_rule",)
    """The label rule draws nothing: folders of either rule hold the same images."""
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(
        training_data="folder", groups={"higher_order": 1},
        paper_family=lambda config: f"pathfinder{config.size}",  # Table 6 rows per image side
        paper_data=lambda config: dataclasses.replace(config, label_rule="reference"))
    """Trains on a dataset folder; Table 3 was measured on the reference's masks, whatever the folder's rule."""

    def spec(self, config: PathfinderConfig) -> Spec:
        s = config.size
        raw = {"codec": "none", "shuffle": False}
        fields = {
            "inputs": Field("uint8", (s, s), "image, bright strokes and circles on black (0..255)"),
            "targets": Field("uint8", (s, s), "label mask: 0 background / distractor / circle, 1 main path, "
                             "2 main path with circles at both ends",
                             attrs={"classes": ["background", "main_path", "connected_main_path"]}),
            "label": Field("uint8", (), "1 if both circles sit on the same main path (Pathfinder label)", **raw),
            "origin_index": Field("uint8", (), "main path carrying the first circle", **raw),
            "terminal_index": Field("uint8", (), "main path carrying the second circle", **raw),
            "tips": Field("int16", (2, 2, 2), "main-path end points [path][origin, terminal][y, x]", **raw),
            "marker_centres": Field("int16", (2, 2), "centres of the two main-path circles [first, second][y, x]",
                                    **raw),
            "margin": Field("uint8", (), "margin m drawn for this image", **raw),
            "n_distractors": Field("uint8", (), "distractor paths placed", **raw),
            "n_pair_attempts": Field("uint16", (), "main-pair attempts needed (diagnostic)", **raw),
        }
        return Spec(fields=fields, input_kind="pixels", d_input=1, seq_len=s * s, target_kind="classify",
                    d_output=3, l_output=s * s, ignore_index=None, causal=False, input_scale=(1 / 127.5, -1.0),
                    metrics=("macro_f1", "macro_accuracy"))

    def generate(self, config: PathfinderConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        return generate_with_geometry(config, keys, geometry=False)

    def resize_config(self, config: PathfinderConfig, size: int) -> PathfinderConfig:
        """`config` (the preset of the nearest size) drawn at image side `size`: every length scales with it.

        The distance between the main paths, the circle radius, the dash length and width and the margins are
        multiplied by size / config.size, so the paths cover the same share of the image (the distance rounded,
        the margins rounded down so that small sides do not get relatively longer paths, both at least 1; lengths
        to 0.001); counts (dashes per path, distractors) and thresholds stay. Without this the 128 preset's paths
        do not fit a 100-pixel image and the 256 preset's do not fit 200 (the main-pair retry cap is reached).

        >>> p = Pathfinder().resize_config(PRESETS["256"], 200)
        >>> p.size, p.seed_distance, p.marker_radius, p.dash_length, p.dash_thickness, p.margin_list
        (200, 21, 3.281, 6.25, 1.562, (3,))
        """
        return scale_lengths(config, size)

    def oracle(self, config: PathfinderConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Recompute what the stored fields determine, in plain NumPy.

        Which dashes form the main paths is not stored, so the mask itself cannot be redrawn from the image.
        The oracle derives: `label` (1 iff class 2 occurs in the mask), `terminal_index` (from `label` and
        `origin_index`), `marker_centres` (the marked ends in `tips`) and, under the coverage label rule, `targets`
        with every label on a black pixel cleared (so it equals the stored mask iff every labelled pixel is bright
        in the image; reference-rule masks label pixels beside the dashes too, so there it is not derived).
        """
        inputs = np.asarray(sample["inputs"])
        targets = np.asarray(sample["targets"])
        tips = np.asarray(sample["tips"])
        origin = int(sample["origin_index"])
        label = int((targets == 2).any())
        terminal = origin if label else 1 - origin
        centres = np.stack([tips[origin, 0], tips[terminal, 1]]).astype(np.int16)
        out = {"label": np.uint8(label), "terminal_index": np.uint8(terminal), "marker_centres": centres}
        if config.label_rule != "reference":  # reference masks also label the faint ring the Lanczos resize
            out["targets"] = np.where(inputs > 0, targets, 0).astype(np.uint8)  # leaves around dashes, black or not
        return out

    def statistics(self, config: PathfinderConfig, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Summable counts: class pixels, connected labels, distractors placed, margins, main-pair attempts.

        Class pixels are counted in one pass over the uint8 masks, with no temporary (no widening to int64).
        """
        from ._pathfinder_kernel import value_counts

        nd = np.asarray(block["n_distractors"]).astype(np.int64)
        margins = np.asarray(block["margin"]).astype(np.int64)
        masks = np.ascontiguousarray(block["targets"], dtype=np.uint8).reshape(-1)
        return {
            "class_pixels": value_counts(masks)[:3],
            "connected": np.bincount(np.asarray(block["label"]).astype(np.int64), minlength=2)[:2],
            "n_distractors": np.bincount(nd, minlength=config.num_distractors + 1)[:config.num_distractors + 1],
            "margin": np.array([(margins == m).sum() for m in config.margin_list], dtype=np.int64),
            "pair_attempts": np.array([np.asarray(block["n_pair_attempts"]).astype(np.int64).sum()]),
        }

    def statistics_markdown(self, config: PathfinderConfig, stats: Mapping[str, Mapping[str, Any]]) -> str:
        from ._pathfinder_stats import statistics_markdown

        plain = dataclasses.replace(config, label_rule="coverage")  # the presets under either label rule
        preset = next((name for name, p in PRESETS.items() if p == plain), None)
        return statistics_markdown(config, stats, preset)


def scale_lengths(config: Any, size: int, **extra: Any) -> Any:
    """`config` (a `pathfinder` or `pathfinder_lra` config) at image side `size`, every length scaled by
    size / config.size: seed distance rounded and margins rounded down (both at least 1), circle radius, dash
    length and width to 0.001; `extra` fields replaced as given."""
    r = size / config.size
    margins = tuple(dict.fromkeys(max(1, int(m * r)) for m in config.margin_list))
    return dataclasses.replace(config, size=size, seed_distance=max(1, round(config.seed_distance * r)),
                               marker_radius=round(config.marker_radius * r, 3),
                               dash_length=round(config.dash_length * r, 3),
                               dash_thickness=round(config.dash_thickness * r, 3), margin_list=margins, **extra)


def generate_with_geometry(config: PathfinderConfig, keys: np.ndarray, geometry: bool = True,
                           distractor_contrast: float | None = None, seed_rule: bool = False
                           ) -> dict[str, np.ndarray]:
    """`Pathfinder.generate`, plus each image's dash geometry when `geometry` is true (tests, figures).

    `distractor_contrast` and `seed_rule`: see `kernel_params` (`pathfinder_lra`'s settings).
    Geometry fields: `main_dashes` (n, 2, contour_length, 5) and `distractor_dashes` (n, num_distractors,
    distractor_length, 5) as (tail y, tail x, angle, pivot y, pivot x) per dash (rows past `n_distractors` are
    unused), and `distractor_markers` (n, num_distractors, 2).
    """
    import numba

    from ._pathfinder_kernel import META, fill_batch

    keys = np.ascontiguousarray(keys, dtype=np.uint64).reshape(-1)
    n, s = keys.shape[0], config.size
    images = np.empty((n, s, s), dtype=np.uint8)
    labels = np.empty((n, s, s), dtype=np.uint8)
    meta = np.zeros((n, META), dtype=np.int64)
    nd, dl = max(config.num_distractors, 1), config.distractor_length
    rows = n if geometry else 0
    geo = (np.zeros((rows, 2, config.contour_length, 5)), np.zeros((rows, nd, dl, 5)),
           np.zeros((rows, nd), dtype=np.int64), np.zeros((rows, nd, 2), dtype=np.int64))
    ip, fp, margins, sub, tables = kernel_params(config, distractor_contrast, seed_rule)
    if n:
        with numba.parallel_chunksize(1):  # per-image cost is heavy-tailed: hand out images one at a time
            fill_batch(keys, ip, fp, margins, sub, tables, images, labels, meta, *geo)
    failed = np.flatnonzero(meta[:, 18])
    if failed.size:
        raise ConfigError("max_pair_attempts", f"no main pair fitted after {config.max_pair_attempts} attempts "
                          f"(sample {int(failed[0])} of the block); the paths are too long for size {config.size}",
                          hint="raise size or max_pair_attempts, or shorten the paths")
    out = {"inputs": images, "targets": labels, **split_meta(meta)}
    if geometry:
        out.update(main_dashes=geo[0], distractor_dashes=geo[1], distractor_markers=geo[3])
    return out
