"""Pathfinder rasteriser and tables: the shortcuts and precomputed templates agree with the defining point test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ssmbench.generators import _pathfinder_geom as geom
from ssmbench.generators._pathfinder_slow import SlowPathfinder, _Geometry
from ssmbench.generators.pathfinder import PRESETS, kernel_params


@pytest.mark.parametrize("aa", [2, 3])
def test_pixel_count_shortcuts_and_spans_are_exact(aa):
    """`draw_max` (row spans, far/deep shortcuts) equals the aa x aa point test on every pixel of a wide box."""
    rng = np.random.default_rng(aa)
    sub, rho = geom.subsample_offsets(aa), geom.max_subsample_distance(aa)
    for _ in range(60):
        theta = float(rng.choice([0.0, math.pi / 2, -math.pi, math.pi / 4, rng.uniform(-math.pi, math.pi)]))
        length, ht = float(rng.choice([0.0, 5.0, 22.0, rng.uniform(1, 12)])), float(rng.choice([0.0, 0.75, 3.0]))
        rad = float(rng.choice([0.0, 2.0, 7.0, rng.uniform(0.5, 9)]))
        if length == 0.0 and ht == 0.0 and rad == 0.0:
            continue
        img = np.zeros((80, 80), dtype=np.uint8)
        geom.draw_max(img, 40, 40, theta, length, ht, rad, sub, aa, rho)
        s, c = math.sin(theta), math.cos(theta)
        want = np.array([[geom.shape_count(float(y - 40), float(x - 40), s, c, length, ht, rad, sub, aa)
                          for x in range(80)] for y in range(80)])
        np.testing.assert_array_equal(img, want)
        area = want.sum() / aa**2  # coverage integrates to the shape's area
        exact = 2 * ht * length + 2 * rad * (length + 2 * ht) + math.pi * rad**2
        assert abs(area - exact) <= 2 * (length + 2 * ht + 2 * math.pi * rad) / aa + 1.0


def test_disk_covers_its_centre_and_has_the_right_area():
    sub, rho = geom.subsample_offsets(3), geom.max_subsample_distance(3)
    img = np.zeros((40, 40), dtype=np.uint8)
    assert geom.draw_max(img, 20, 20, 0.0, 0.0, 0.0, 9.0, sub, 3, rho) == 9 and img[20, 20] == 9
    assert abs(img.sum() / 9 - math.pi * 81) < 4
    assert np.array_equal(img, img.T) and np.array_equal(img[1:], img[1:][::-1])  # symmetric about (20, 20)


@pytest.mark.parametrize("size", ["128", "256", "512"])
def test_templates_and_footprints_match_the_plain_rasteriser(size):
    """Every precomputed halo template equals the whole-image implementation's coverage at that angle, and every
    free zone its free zone."""
    cfg = PRESETS[size]
    _, _, margins, _, tables = kernel_params(cfg)
    pool, meta, ring_tpl, seed_tpl, runs, nruns = tables[7], tables[8], tables[9], tables[10], tables[11], tables[12]
    slow = SlowPathfinder(cfg)
    g = _Geometry(2 * 60 + 1, cfg.aa)
    rng = np.random.default_rng(0)
    for mi, m in enumerate(margins):
        slow.m = int(m)
        r1 = int(tables[4][mi])
        ring_ids = [(a - r1, b - r1, t) for (a, b), t in np.ndenumerate(ring_tpl[mi]) if t >= 0]
        picks = [ring_ids[i] for i in rng.choice(len(ring_ids), 12, replace=False)]
        degs = rng.choice(360, 12, replace=False) - 180
        cases = [(math.atan2(dy, dx), t) for dy, dx, t in picks] + [(d * math.pi / 180, seed_tpl[mi, d + 180])
                                                                    for d in degs]
        for k, (angle, tid) in enumerate(cases):
            theta = angle if k >= len(picks) else (angle + math.pi if angle < 0 else angle - math.pi)
            want = g.counts(60, 60, theta, cfg.dash_length, cfg.dash_thickness / 2, float(m))
            pos, y0, x0, h, w = meta[tid][:5]
            got = np.zeros_like(want)
            got[60 + y0:60 + y0 + h, 60 + x0:60 + x0 + w] = pool[pos:pos + h * w].reshape(h, w)
            np.testing.assert_array_equal(got, want)
        for d in degs[:4]:  # free-zone runs = the whole-image implementation's free zone (PIL matrices)
            foot = set(slow.footprint(d * math.pi / 180))
            zone = runs[mi, d + 180, :nruns[mi, d + 180]]
            ours = {(int(dy), x) for dy, lo, hi in zone for x in range(lo, hi + 1)}
            assert ours == foot and (0, 0) in ours and len(ours) == sum(hi - lo + 1 for _, lo, hi in zone)


def _fill(cfg, tables, n=6):
    """Images, masks and metadata of the first n train keys of seed 0, from the kernel with the given tables."""
    from ssmbench.generators._pathfinder_kernel import META, fill_batch
    from ssmbench.generators.pathfinder import Pathfinder
    from ssmbench.seeding import keys_for

    keys = keys_for("pathfinder", Pathfinder.version, cfg.to_dict(), 0, "train", 0, n, Pathfinder.stream_exempt)
    ip, fp, margins, sub, _ = kernel_params(cfg)
    s, nd = cfg.size, cfg.num_distractors
    out = (np.zeros((n, s, s), np.uint8), np.zeros((n, s, s), np.uint8), np.zeros((n, META), np.int64))
    geo = (np.zeros((0, 2, cfg.contour_length, 5)), np.zeros((0, nd, cfg.distractor_length, 5)),
           np.zeros((0, nd), np.int64), np.zeros((0, nd, 2), np.int64))
    fill_batch(keys, ip, fp, margins, sub, tables, *out, *geo)
    return out


@pytest.mark.parametrize("size", ["128", "512"])
def test_candidate_tables_give_the_ring_path_bytes(size):
    """Scoring from the per-heading candidate tables (non-zero turn weights only) draws exactly what scoring every
    ring point does: the same images, masks and metadata (attempt counts included)."""
    cfg = PRESETS[size]
    tables = kernel_params(cfg)[4]
    start, offsets, weights = tables[15:18]
    assert len(start) == tables[8].shape[0] + 1 and (weights > 0).all() and len(offsets) == len(weights)
    ring = (*tables[:15], np.zeros(0, np.int64), np.zeros((0, 2), np.int64), np.zeros(0), *tables[18:])  # ring path
    fast, slow = _fill(cfg, tables), _fill(cfg, ring)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a, b)
    assert fast[2][:, 17].sum() > len(fast[2])  # main-pair retries happened, so many extensions were scored


def test_ring_offsets_refuse_points_next_to_a_pixel_edge():
    """Truncated candidates equal pivot + floor(offset) only away from integers (or exactly on them)."""
    from ssmbench.generators._pathfinder_tables import ring_offsets

    got = ring_offsets([0.0, 2.5, 2.7, -0.2], [3.0, 1.5, 1.9, -4.5])
    assert got.tolist() == [[-1, -5], [0, 3], [2, 1]]  # floor, de-duplicated, (y, x) order
    assert ring_offsets([1e-12], [0.0]) is None and ring_offsets([0.0], [3.0 - 1e-11]) is None
