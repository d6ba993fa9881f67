"""LRA Pathfinder (`pathfinder_lra`): LRA's settings, the kernels against the plain NumPy implementation, the
reference's seeding rule against a brute-force dilation, the label and its balance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ssmbench.generators._pathfinder_slow import SlowPathfinder
from ssmbench.generators._pathfinder_tables import reference_seed_struct, seedable_orientations
from ssmbench.generators.pathfinder import generate_with_geometry, kernel_params
from ssmbench.generators.pathfinder_lra import PRESETS, PathfinderLRA, intensities, pathfinder_config
from ssmbench.seeding import keys_for

TASK = PathfinderLRA()
# LRA's settings (lra_benchmarks/data/pathfinder.py, Python 2 division), transcribed independently of the module:
# size: (padding, seed_distance, marker_radius, paddle_length, paddle_thickness, margins, continuity,
#        distractor_length, num_distractor_snakes, snake_contrast, paddle_contrast)
LRA = {32: (1, 7, 1.5, 2, 0.5, (1,), 1.0, 4, 5, 2.0, 0.75),
       64: (1, 12, 2.5, 5, 1, (1,), 1.8, 4, 5, 0.8, 1.0),
       128: (1, 20, 3, 5, 1.5, (2, 3), 1.8, 4, 8, 0.9, 1.0),
       256: (22, 27, 5, 5, 2, (3,), 1.8, 4, 7, 1.0, 1.0)}


def keys(config, n, split="train", start=0):
    return keys_for(TASK.name, TASK.version, config.to_dict(), 0, split, start, start + n)


@pytest.mark.parametrize("size", sorted(LRA))
def test_presets_are_lras_settings(size):
    c = PRESETS[str(size)]
    got = (c.padding, c.seed_distance, c.marker_radius, c.dash_length, c.dash_thickness, c.margin_list,
           c.continuity, c.distractor_length, c.num_distractors, c.snake_contrast, c.paddle_contrast)
    assert got == LRA[size]
    assert (c.size, c.aa, c.contour_length, c.marker_intensity) == (size, 2, 14, 1.0)
    assert (c.seed_trials, c.dash_trials, c.distractor_attempts) == (3, 3, 5)  # max_paddle_retrial 2, ..._contour 4


def test_pathfinder_32_draws_distractors_brighter_than_main_paths():
    """snake_contrast 2 x paddle_contrast 0.75 on main paths, 2 on distractors, circles at 1: ratios 0.75 / 1 / 0.5."""
    assert intensities(PRESETS["32"]) == (0.75, 1.0, 0.5)
    _, fp, _, _, _ = kernel_params(pathfinder_config(PRESETS["32"]), 1.0, True)
    assert (fp[4], fp[8], fp[5]) == (0.75, 1.0, 0.5)  # CONTRAST, DIST_CONTRAST, MARKER_I


def _dilation_has_no_sample(offsets: list[tuple[int, int]], size: int) -> bool:
    """Brute force: is there a pixel p of a size x size image with every p + d outside the image?"""
    for y in range(size):
        for x in range(size):
            if all(not (0 <= y + dy < size and 0 <= x + dx < size) for dy, dx in offsets):
                return True
    return False


@pytest.mark.parametrize("length, thickness, margin, alive", [(2, 0.5, 1, 30), (5, 1.0, 1, 95), (5, 1.5, 2, 354)])
def test_seedable_orientations_equal_a_brute_force_dilation(length, thickness, margin, alive):
    """The quadrant shortcut equals scanning every pixel of a small image for a structuring element with no
    in-image sample (cv2.dilate's -DBL_MAX, which makes the reference give up on that orientation). The counts
    are the reference's own, measured by benchmarks/fidelity/pathfinder_lra_reference.py (32 / 64 / 128 at m = 2)."""
    got = seedable_orientations(length, thickness, margin, 2)
    w = length + margin
    for i in range(0, 360, 3):
        ys, xs = np.nonzero(reference_seed_struct((i - 180) * math.pi / 180, length, thickness, margin, 2))
        offsets = list(zip((ys - w).tolist(), (xs - w).tolist(), strict=True))
        assert got[i] == (not _dilation_has_no_sample(offsets, 2 * w + 8)), i - 180
    assert got.sum() == alive


@pytest.mark.parametrize("size, n", [("32", 6), ("64", 2)])
def test_kernel_equals_whole_image_implementation(size, n):
    """Byte equality with the plain NumPy implementation, with LRA's contrasts and seeding rule."""
    config = PRESETS[size]
    pf = pathfinder_config(config)
    _, dist, _ = intensities(config)
    seedable = kernel_params(pf, dist, True)[4][19]
    ks = keys(config, 24)
    fast = TASK.generate(config, ks)
    chosen = np.argsort(fast["n_pair_attempts"], kind="stable")[:n]  # cheap images keep the slow side quick
    slow = SlowPathfinder(pf, distractor_contrast=dist, seedable=seedable)
    for i in chosen:
        img, _, meta = slow.render(int(ks[i]))
        np.testing.assert_array_equal(fast["inputs"][i], img)
        assert int(fast["targets"][i]) == meta["label"]
        for name in ("tips", "marker_centres", "margin", "n_distractors", "n_pair_attempts"):
            assert np.asarray(fast[name][i]).tolist() == meta[name], name


def test_first_dashes_only_take_seedable_orientations():
    """Every main path's and distractor's first dash has an orientation the rule allows (32: 30 of 360)."""
    config = PRESETS["32"]
    pf = pathfinder_config(config)
    out = generate_with_geometry(pf, keys(config, 60, split="val"), distractor_contrast=1.0, seed_rule=True)
    allowed = seedable_orientations(2, 0.5, 1, 2)
    firsts = [out["main_dashes"][i, 0, 0, 2] for i in range(60)]
    firsts += [out["distractor_dashes"][i, d, 0, 2] for i in range(60) for d in range(int(out["n_distractors"][i]))]
    degs = np.rint(np.degrees(np.array(firsts))).astype(int)
    assert len(degs) > 60 and all(allowed[d + 180] for d in degs)


def test_labels_are_balanced_and_match_the_circles():
    """Bernoulli(1/2) labels (400 images: within 4 standard deviations), both circles drawn, on the right ends."""
    config = PRESETS["32"]
    out = TASK.generate(config, keys(config, 400, split="test"))
    labels = out["targets"].astype(int)
    assert abs(labels.mean() - 0.5) < 4 * 0.5 / math.sqrt(400)
    for i in range(400):
        tips, centres = out["tips"][i], out["marker_centres"][i]
        same = any((tips[p, 0] == centres[0]).all() and (tips[p, 1] == centres[1]).all() for p in range(2))
        assert same == bool(labels[i])
        assert all(out["inputs"][i][y, x] > 0 for y, x in centres)
