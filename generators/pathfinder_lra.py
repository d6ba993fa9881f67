"""LRA Pathfinder and Path-X (data_cards/pathfinder_lra.md): is there a path between the two circles? One 0/1 label.

Long Range Arena's Pathfinder (32 x 32), Path-X (128 x 128) and their 64 and 256 siblings (Path-256 in the S4 paper),
drawn with the settings LRA states for each size (its `lra_benchmarks/data/pathfinder.py`, "hard" = contour length
14): two dashed main paths, short dashed distractor paths without circles, and two circles on main-path ends, both
on one path when the label is 1. The drawing is the `pathfinder` task's (the same Numba kernels, called through
`pathfinder.generate_with_geometry`); only the settings, the distractors' brightness and the stored fields differ.
Models see the image flattened row-major (length size**2) and predict one class per image.

Worked example, the 32 preset (' ' black, '.' dim, '+' mid, '#' bright; LRA's Pathfinder-32 draws distractors at
snake_contrast 2, main paths at 2 x 0.75 and circles at 1, so the circles (the 3 x 3 blobs) are mid-grey, main paths
dimmer than distractors):

>>> import numpy as np
>>> from ssmbench.generators.pathfinder_lra import PathfinderLRA, PRESETS
>>> out = PathfinderLRA().generate(PRESETS["32"], np.array([2], dtype=np.uint64))
>>> int(out["targets"][0]), out["marker_centres"][0].tolist(), int(out["n_distractors"][0])
(1, [[17, 16], [28, 2]], 2)
>>> out["tips"][0].tolist()          # [path][origin, terminal][y, x]: both circles on path 0's two ends
[[[17, 16], [28, 2]], [[24, 18], [29, 9]]]
>>> for row in out["inputs"][0][2:31]:
...     print("|" + "".join(" .+#"[min(3, (int(v) + 63) // 64)] for v in row) + "|")
|         ..                     |
|       +  +                     |
|      ..    .                   |
|            +             ..    |
|     +       .          ...     |
|    .        ..         +       |
|              +        .        |
|   +                  .         |
|  .             +     +         |
|  .   .+#+..    +   +.          |
|  +  ..    ++   .    .          |
|  +  .       .                  |
|                +               |
|   .            +               |
|   +           +++              |
|   +           +++      ...     |
|               +++    .+  +     |
|    .                           |
|    +                +      +   |
|    +        .+     .       +   |
|            +  . +#+        .   |
|           .                .   |
|   +              .         .+  |
|  .       +       +             |
|  .      .         .         .  |
| +++     .                   +  |
| +++     +          ..      .   |
| +++     +           ..  ..     |
|                        ..      |
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ssmbench.api import Field, Spec, Task, TaskConfig, TrainingPolicy
from ssmbench.errors import ConfigError

from .pathfinder import PathfinderConfig, generate_with_geometry, scale_lengths


@dataclass(frozen=True)
class PathfinderLRAConfig(TaskConfig):
    """Parameters of LRA Pathfinder (the card's Parameters table; names as in `pathfinder`, the reference's in the
    card). The defaults are the 32 preset."""

    size: int = 32
    """Image side S (`window_size`); sequences have length S**2."""
    aa: int = 2
    """Super-sampling factor per axis (`antialias_scale`)."""
    padding: int = 1
    """Width of the image border marked occupied (`padding`)."""
    seed_distance: int = 7
    """Distance between the two main paths' first tails (`seed_distance`)."""
    marker_radius: float = 1.5
    """Radius of the two circles (`marker_radius`)."""
    contour_length: int = 14
    """Dashes per main path (`contour_length`; LRA's "hard" split: 14, "intermediate" 9, "easy" 6)."""
    dash_length: float = 2.0
    """Dash length, pixels (`paddle_length`)."""
    dash_thickness: float = 0.5
    """Dash width, pixels (`paddle_thickness`)."""
    margin_list: tuple[int, ...] = (1,)
    """Margins m, one drawn per image (`paddle_margin_list`); consecutive dashes are about 2m apart."""
    continuity: float = 1.0
    """Turning penalty; the largest turn per dash is 90 degrees / continuity (`continuity`)."""
    distractor_length: int = 4
    """Dashes per distractor path (`distractor_length`)."""
    num_distractors: int = 5
    """Distractor paths attempted (`num_distractor_snakes`)."""
    snake_contrast: float = 2.0
    """Intensity of distractor dashes (`snake_contrast_list`, one value)."""
    paddle_contrast: float = 0.75
    """Main-path dashes are drawn at snake_contrast * paddle_contrast (`paddle_contrast_list`, one value)."""
    marker_intensity: float = 1.0
    """Intensity of the circles (the reference's circles are 0..1 images)."""
    seed_trials: int = 3
    """Placement trials for a path's first dash (`max_paddle_retrial` + 1)."""
    dash_trials: int = 3
    """Draws per extension step (`max_paddle_retrial` + 1)."""
    distractor_attempts: int = 5
    """Attempts per distractor path before it is skipped (`max_distractor_contour_retrial` + 1)."""
    max_pair_attempts: int = 65535
    """Safety cap on main-pair retries; reaching it is an error (the reference retries forever; at 32 and 64 most
    first-dash orientations cannot seed there, so pairs take thousands of attempts)."""

    def __post_init__(self) -> None:
        for name in ("snake_contrast", "paddle_contrast", "marker_intensity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < 1e6:
                raise ConfigError(name, f"must be a positive number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if isinstance(self.margin_list, int) and not isinstance(self.margin_list, bool):
            object.__setattr__(self, "margin_list", (self.margin_list,))  # `-o margin_list=3`
        pathfinder_config(self)  # every geometric check is the pathfinder task's


def intensities(config: PathfinderLRAConfig) -> tuple[float, float, float]:
    """(main-path dash, distractor dash, circle) intensities divided by their maximum.

    Both generators divide the finished image by its maximum, so only the ratios matter.

    >>> intensities(PRESETS["32"]), intensities(PRESETS["128"])
    ((0.75, 1.0, 0.5), (0.9, 0.9, 1.0))
    """
    main = config.snake_contrast * config.paddle_contrast
    dist, marker = config.snake_contrast, config.marker_intensity
    top = max(main, dist, marker)
    return main / top, dist / top, marker / top


def pathfinder_config(config: PathfinderLRAConfig) -> PathfinderConfig:
    """The `pathfinder` kernel's config for these settings: no circles on distractors, coverage labels."""
    main, _, marker = intensities(config)
    return PathfinderConfig(
        size=config.size, aa=config.aa, padding=config.padding, seed_distance=config.seed_distance,
        marker_radius=config.marker_radius, contour_length=config.contour_length, dash_length=config.dash_length,
        dash_thickness=config.dash_thickness, margin_list=config.margin_list, continuity=config.continuity,
        distractor_length=config.distractor_length, num_distractors=config.num_distractors, snake_contrast=main,
        marker_intensity=marker, mark_distractors=False, seed_trials=config.seed_trials,
        dash_trials=config.dash_trials, distractor_attempts=config.distractor_attempts,
        max_pair_attempts=config.max_pair_attempts)


PRESETS: dict[str, PathfinderLRAConfig] = {
    "32": PathfinderLRAConfig(),
    "64": PathfinderLRAConfig(size=64, seed_distance=12, marker_radius=2.5, dash_length=5.0, dash_thickness=1.0,
                              margin_list=(1,), continuity=1.8, num_distractors=5, snake_contrast=0.8,
                              paddle_contrast=1.0),
    "128": PathfinderLRAConfig(size=128, seed_distance=20, marker_radius=3.0, dash_length=5.0, dash_thickness=1.5,
                               margin_list=(2, 3), continuity=1.8, num_distractors=8, snake_contrast=0.9,
                               paddle_contrast=1.0),
    "256": PathfinderLRAConfig(size=256, padding=22, seed_distance=27, marker_radius=5.0, dash_length=5.0,
                               dash_thickness=2.0, margin_list=(3,), continuity=1.8, num_distractors=7,
                               snake_contrast=1.0, paddle_contrast=1.0),
}


@typing.final
class PathfinderLRA(Task[PathfinderLRAConfig]):
    """Say whether the two circles sit on the two ends of one dashed path (1) or not (0): LRA Pathfinder / Path-X"""

    name: ClassVar[str] = "pathfinder_lra"
    version: ClassVar[str] = "1"
    Config: ClassVar[type] = PathfinderLRAConfig
    presets: ClassVar[Mapping[str, PathfinderLRAConfig]] = PRESETS
    default_preset: ClassVar[str] = "32"
    default_n: ClassVar[int] = 200_000
    default_split: ClassVar[Mapping[str, float]] = {"train": 0.8, "val": 0.1, "test": 0.1}
    preset_option: ClassVar[str] = "size"  # type: ignore[assignment]
    hf_task_category: ClassVar[str] = "image-classification"
    policy: ClassVar[TrainingPolicy] = TrainingPolicy(
        training_data="folder",
        paper_family=lambda config: f"lra_pathfinder{config.size}")  # LRU / LaS / S4 rows per side (no DLR row)

    def spec(self, config: PathfinderLRAConfig) -> Spec:
        s = config.size
        raw = {"codec": "none", "shuffle": False}
        fields = {
            "inputs": Field("uint8", (s, s), "image, bright strokes and circles on black (0..255)"),
            "targets": Field("uint8", (), "1 if both circles sit on one path (connected), else 0", **raw,
                             attrs={"classes": ["disconnected", "connected"]}),
            "tips": Field("int16", (2, 2, 2), "main-path end points [path][origin, terminal][y, x]", **raw),
            "marker_centres": Field("int16", (2, 2), "centres of the two circles [first, second][y, x]", **raw),
            "margin": Field("uint8", (), "margin m drawn for this image", **raw),
            "n_distractors": Field("uint8", (), "distractor paths placed", **raw),
            "n_pair_attempts": Field("uint16", (), "main-pair attempts needed (diagnostic)", **raw),
        }
        return Spec(fields=fields, input_kind="pixels", d_input=1, seq_len=s * s, target_kind="classify",
                    d_output=2, l_output=1, ignore_index=None, causal=False, input_scale=(1 / 127.5, -1.0),
                    metrics=("accuracy",))

    def generate(self, config: PathfinderLRAConfig, keys: np.ndarray) -> dict[str, np.ndarray]:
        _, dist, _ = intensities(config)
        out = generate_with_geometry(pathfinder_config(config), keys, geometry=False, distractor_contrast=dist,
                                     seed_rule=True)
        return {"inputs": out["inputs"], "targets": out["label"], "tips": out["tips"],
                "marker_centres": out["marker_centres"], "margin": out["margin"],
                "n_distractors": out["n_distractors"], "n_pair_attempts": out["n_pair_attempts"]}

    def resize_config(self, config: PathfinderLRAConfig, size: int) -> PathfinderLRAConfig:
        """`config` (the preset of the nearest size) drawn at image side `size`, every length scaled with it
        (`pathfinder.scale_lengths`, as `pathfinder` does), the border padding too.

        >>> c = PathfinderLRA().resize_config(PRESETS["128"], 100)
        >>> c.seed_distance, c.marker_radius, c.dash_length, c.dash_thickness, c.margin_list
        (16, 2.344, 3.906, 1.172, (1, 2))
        """
        padding = max(1, round(config.padding * size / config.size)) if config.padding else 0
        return scale_lengths(config, size, padding=padding)

    def oracle(self, config: PathfinderLRAConfig, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Recompute the label from the stored geometry, in plain NumPy.

        The label is 1 iff the two circle centres are the origin and terminal ends of one main path in `tips`;
        both circles must also be drawn: the image is non-zero at each centre.
        """
        tips = np.asarray(sample["tips"]).astype(np.int64)
        centres = np.asarray(sample["marker_centres"]).astype(np.int64)
        image = np.asarray(sample["inputs"])
        same = any(bool((tips[p, 0] == centres[0]).all() and (tips[p, 1] == centres[1]).all()) for p in range(2))
        drawn = all(image[int(y), int(x)] > 0 for y, x in centres)
        return {"targets": np.uint8(same and drawn)}

    def statistics(self, config: PathfinderLRAConfig, block: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Summable counts: labels, distractors placed, margins, main-pair attempts, ink (sum of pixel values)."""
        nd = np.asarray(block["n_distractors"]).astype(np.int64)
        margins = np.asarray(block["margin"]).astype(np.int64)
        return {
            "label": np.bincount(np.asarray(block["targets"]).astype(np.int64), minlength=2)[:2],
            "n_distractors": np.bincount(nd, minlength=config.num_distractors + 1)[:config.num_distractors + 1],
            "margin": np.array([(margins == m).sum() for m in config.margin_list], dtype=np.int64),
            "pair_attempts": np.array([np.asarray(block["n_pair_attempts"]).astype(np.int64).sum()]),
            "ink": np.array([np.asarray(block["inputs"]).astype(np.int64).sum()]),
        }
