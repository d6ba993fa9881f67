"""Pathfinder-Segmentation (data_cards/pathfinder.md): the Numba generator against an independent whole-image
implementation, structural oracles on generated images, determinism, golden class fractions and the reference."""

from __future__ import annotations

import dataclasses
import doctest
import json
import math

import numba
import numpy as np
import pytest

from ssmbench.config import canonical_json
from ssmbench.errors import ConfigError
from ssmbench.generators import _pathfinder_geom, _pathfinder_lanczos, _pathfinder_stats, pathfinder
from ssmbench.generators._pathfinder_slow import SlowPathfinder, _Geometry
from ssmbench.generators._pathfinder_stats import GOLDEN, GOLDEN_TOLERANCE, statistics_markdown
from ssmbench.generators.pathfinder import PRESETS, Pathfinder, PathfinderConfig, generate_with_geometry
from ssmbench.seeding import keys_for
from ssmbench.task_config import from_plain
from support import REFERENCE, require_reference

TASK = Pathfinder()
# the presets (the paper's settings, as the card's Parameters table lists them), transcribed independently of the module: (size, aa, seed_distance, marker_radius, contour_length,
# dash_length, dash_thickness, margin_list, continuity, distractor_length, num_distractors, snake_contrast)
TABLE = {"128": (128, 2, 22, 2.1, 14, 5, 1.5, (2, 3), 1.8, 4, 16, 0.9),
         "256": (256, 2, 27, 4.2, 16, 8, 2, (4,), 2.2, 5, 16, 1.0),
         "512": (512, 3, 40, 9, 12, 22, 6, (7,), 2.5, 4, 18, 1.0)}
TABLE_KEYS = ("size", "aa", "seed_distance", "marker_radius", "contour_length", "dash_length", "dash_thickness",
              "margin_list", "continuity", "distractor_length", "num_distractors", "snake_contrast")
# supersampling 3, two margins, marker intensity < 1 (normalised image), a crowded image that empties the tail set
SMALL = PathfinderConfig(size=96, aa=3, seed_distance=12, marker_radius=3.0, contour_length=6, dash_length=7,
                         dash_thickness=2.5, margin_list=(2, 3), continuity=2.5, distractor_length=3,
                         num_distractors=14, snake_contrast=1.0)
CROWDED = PathfinderConfig(size=64, aa=3, seed_distance=8, marker_radius=1.5, contour_length=4, dash_length=5,
                           dash_thickness=1.5, margin_list=(2, 3), continuity=1.5, distractor_length=2,
                           num_distractors=120, snake_contrast=0.8, marker_intensity=0.9)
TINY = PathfinderConfig(size=32, seed_distance=6, marker_radius=1.5, contour_length=4, dash_length=4.0,
                        dash_thickness=1.5, margin_list=(1,), distractor_length=2, num_distractors=2)
FIELDS = ("inputs", "targets", "label", "origin_index", "terminal_index", "tips", "marker_centres", "margin",
          "n_distractors", "n_pair_attempts")


def keys(config, n, split="train", start=0, seed=0):
    return keys_for("pathfinder", TASK.version, config.to_dict(), seed, split, start, start + n, TASK.stream_exempt)


def test_presets_are_the_papers_settings():
    for name, row in TABLE.items():
        cfg = PRESETS[name]
        assert tuple(getattr(cfg, k) for k in TABLE_KEYS) == row, name
        assert (cfg.padding, cfg.seed_trials, cfg.dash_trials, cfg.distractor_attempts) == (1, 3, 3, 5)
        assert (cfg.occupied_threshold, cfg.overlap_threshold, cfg.min_free_fraction) == (0.3, 1.8, 0.01)
        assert cfg.max_pair_attempts == 10000 and cfg.mark_distractors and not cfg.commit_last_dash_of_path0
        assert cfg.label_min_coverage is None and cfg.marker_intensity == 1.0 and cfg.label_rule == "coverage"
    assert PathfinderConfig() == PRESETS["128"] and TASK.default_preset == "128" and TASK.default_n == 100_000
    assert dict(TASK.default_split) == {"train": 0.8, "val": 0.1, "test": 0.1} and TASK.preset_option == "size"
    from ssmbench.task_config import nearest_size_preset

    assert nearest_size_preset(TASK, 300) == "256" and PRESETS["256"].seed_distance != 22
    assert nearest_size_preset(TASK, 192) == "128" and PRESETS["128"].seed_distance == 22  # a tie: the smaller


def test_config_round_trips_and_validation():
    for cfg in PRESETS.values():  # JSON (manifest) and CLI strings give back an equal config, so names stay stable
        assert from_plain("pathfinder", json.loads(canonical_json(cfg.to_dict()))) == cfg
    assert PathfinderConfig(margin_list=[3, 2], dash_length=5).margin_list == (3, 2)
    bad = {"size": 90, "aa": 0, "margin_list": (), "contour_length": 0, "occupied_threshold": 1.0,
           "snake_contrast": 1.5, "label_min_coverage": 0.0, "max_pair_attempts": 70000, "dash_thickness": -1.0,
           "mark_distractors": 1, "label_rule": "halo"}
    for field, value in bad.items():
        with pytest.raises(ConfigError) as err:
            dataclasses.replace(PRESETS["128"], **{field: value})
        assert err.value.field in (field, "seed_distance"), field


def test_spec_matches_generated_fields():
    out = TASK.generate(TINY, keys(TINY, 3))
    spec = TASK.spec(TINY)
    assert set(out) == set(spec.fields) == set(FIELDS)
    for name, f in spec.fields.items():
        assert out[name].dtype == np.dtype(f.dtype) and out[name].shape == (3, *f.shape), name
    assert (spec.seq_len, spec.l_output, spec.d_output, spec.d_input) == (1024, 1024, 3, 1)
    assert spec.input_kind == "pixels" and not spec.causal and spec.input_scale == (1 / 127.5, -1.0)


def _assert_same(fast: dict, i: int, img: np.ndarray, mask: np.ndarray, meta: dict) -> None:
    np.testing.assert_array_equal(fast["inputs"][i], img)
    np.testing.assert_array_equal(fast["targets"][i], mask)
    for name in ("label", "origin_index", "terminal_index", "tips", "marker_centres", "margin", "n_distractors",
                 "n_pair_attempts"):
        assert np.asarray(fast[name][i]).tolist() == meta[name], name


@pytest.mark.parametrize("config, n, max_attempts", [(PRESETS["128"], 3, 120), (PRESETS["256"], 1, 40),
                                                     (SMALL, 4, 10**4), (CROWDED, 16, 10**4)],
                         ids=["128", "256", "small-aa3", "crowded"])
def test_kernel_equals_whole_image_implementation(config, n, max_attempts):
    """Byte equality with the plain NumPy implementation (full dilations, image copies, set-wide erosion)."""
    fast = TASK.generate(config, keys(config, 24 if max_attempts < 10**4 else n))
    chosen = [i for i in range(len(fast["label"])) if fast["n_pair_attempts"][i] <= max_attempts][:n]
    assert len(chosen) == n  # (a few cheap images keep the slow implementation's time in check)
    slow = SlowPathfinder(config)
    all_keys = keys(config, len(fast["label"]))
    for i in chosen:
        _assert_same(fast, i, *slow.render(int(all_keys[i])))
    if config is CROWDED:  # the exact-enumeration fallback and the empty available set were both exercised
        assert slow.counters["tail_enumerations"] > 0 and slow.counters["empty_tail_sets"] > 0


def _path_cover(geo: _Geometry, dashes: np.ndarray, ell: float, ht: float) -> np.ndarray:
    """Max sub-sample count over a list of dash records, by the plain NumPy coverage test."""
    out = np.zeros((geo.size, geo.size), dtype=np.int64)
    for y, x, ang, _, _ in dashes:
        out = np.maximum(out, geo.counts(int(y), int(x), float(ang), ell, ht, 0.0))
    return out


def _turn(a: float, b: float) -> float:
    d = abs(a - b) % (2 * math.pi)
    return min(d, 2 * math.pi - d)


@pytest.mark.parametrize("size, n", [("128", 12, ), ("256", 6), ("512", 4)])
def test_structural_oracles(size, n):
    """The card's label rule and class statistics on generated images, with each image's dash geometry."""
    cfg = PRESETS[size]
    out = generate_with_geometry(cfg, keys(cfg, n, split="val"))
    geo = _Geometry(cfg.size, cfg.aa)
    ell, ht, cl = cfg.dash_length, cfg.dash_thickness / 2, cfg.contour_length
    for i in range(n):
        img, mask, label = out["inputs"][i], out["targets"][i], int(out["label"][i])
        m, o, t = int(out["margin"][i]), int(out["origin_index"][i]), int(out["terminal_index"][i])
        dashes = out["main_dashes"][i]  # (2, contour_length, 5)
        assert dashes.shape == (2, cl, 5) and np.all(np.abs(dashes[:, :, :2]).sum(-1) > 0)  # cl dashes each
        # circles: on the free end of one path's first dash and the tip of a path's last dash
        first_tail, last_tip = dashes[:, 0, :2].astype(int), dashes[:, -1, :2].astype(int)
        assert out["tips"][i].tolist() == [[first_tail[s].tolist(), last_tip[s].tolist()] for s in range(2)]
        assert out["marker_centres"][i].tolist() == [first_tail[o].tolist(), last_tip[t].tolist()]
        assert (t == o) == (label == 1)  # connected: both circles on one path; otherwise on different paths
        for cy, cx in out["marker_centres"][i]:
            yy, xx = np.mgrid[:cfg.size, :cfg.size]
            core = (yy - cy) ** 2 + (xx - cx) ** 2 <= (cfg.marker_radius - 0.75) ** 2
            assert core[cy, cx] and np.all(img[core] == 255)  # a full-intensity disk sits there
        assert img.max() == 255
        # labels by the paper's definition, recomputed from the geometry
        cover = [_path_cover(geo, dashes[s], ell, ht) for s in range(2)]
        want = np.zeros_like(mask)
        for s in range(2):
            want = np.maximum(want, np.where(cover[s] > 0, 2 if (label and s == o) else 1, 0).astype(np.uint8))
        np.testing.assert_array_equal(mask, want)
        assert ((mask == 2).any()) == (label == 1)
        if label:  # exactly one path is class 2: every pixel of path o is 2, none of the other path's own pixels
            assert np.all(mask[cover[o] > 0] == 2) and np.all(mask[(cover[1 - o] > 0) & (cover[o] == 0)] == 1)
        assert np.all(img[mask > 0] > 0)  # class 1/2 pixels are bright
        # distractors: never labelled, each with the preset number of dashes and one circle
        nd = int(out["n_distractors"][i])
        dist = out["distractor_dashes"][i, :nd]
        assert np.all(np.abs(dist[:, :, :2]).sum(-1) > 0) and dist.shape[1] == cfg.distractor_length
        d_cover = _path_cover(geo, dist.reshape(-1, 5), ell, ht)
        assert np.all(mask[(d_cover > 0) & (cover[0] == 0) & (cover[1] == 0)] == 0)
        assert np.all(d_cover[img == 0] == 0)
        assert out["distractor_markers"][i, :nd].tolist() == dist[:, 0, 3:].astype(int).tolist()
        # geometry: pivots l + 2m apart, turns within 90 deg / continuity, first tails seed_distance apart
        for s in range(2):
            piv = dashes[s, :, 3:]
            gaps = np.hypot(*np.diff(piv, axis=0).T)
            assert np.all(np.abs(gaps - (ell + 2 * m)) <= math.sqrt(2) + 1e-9)
            heading = [dashes[s, 0, 2]] + [d[2] + math.pi for d in dashes[s, 1:]]  # orientation = flip(dash)
            assert max(_turn(a, b) for a, b in zip(heading, heading[1:], strict=False)) <= math.pi / 2 / cfg.continuity + 1e-9
        assert abs(np.hypot(*(first_tail[0] - first_tail[1])) - cfg.seed_distance) <= 1.0
        lo, hi = 2 * cfg.seed_distance, cfg.size - 2 * cfg.seed_distance
        assert lo <= first_tail[0].min() and first_tail[0].max() < hi


def test_connected_is_about_half():
    out = TASK.generate(TINY, keys(TINY, 240))
    assert 0.4 <= out["label"].mean() <= 0.6
    assert set(np.unique(out["margin"])) == {1}


def test_determinism_and_worker_invariance():
    cfg = PRESETS["128"]
    ks = keys(cfg, 10)
    whole = TASK.generate(cfg, ks)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        pieces = [TASK.generate(cfg, ks[a:b]) for a, b in ((0, 3), (3, 4), (4, 10))]
    finally:
        numba.set_num_threads(threads)
    for name in FIELDS:
        np.testing.assert_array_equal(whole[name], np.concatenate([p[name] for p in pieces]), err_msg=name)
    again = TASK.generate(cfg, ks[::-1])  # each row depends only on its key
    for name in FIELDS:
        np.testing.assert_array_equal(whole[name], again[name][::-1], err_msg=name)
    other = TASK.generate(cfg, keys(cfg, 2, split="test"))
    assert not np.array_equal(other["inputs"][0], whole["inputs"][0])


def _fractions(size: str, n: int) -> np.ndarray:
    cfg = PRESETS[size]
    counts = np.zeros(3, dtype=np.int64)
    for start in range(0, n, 100):
        block = TASK.generate(cfg, keys(cfg, min(100, n - start), start=start))
        counts += TASK.statistics(cfg, block)["class_pixels"]
    return counts / counts.sum()


@pytest.mark.parametrize("size, n", [("128", 100), ("256", 100), ("512", 50)])
def test_class_fractions_near_golden(size, n):
    """The first n train images of seed 0 (a prefix of the golden sample) stay within +-20 % of the goldens.

    Class 2 alone varies with the share of connected images; the labelled fraction (1 + 2) is tight (+-5 %).
    """
    frac = _fractions(size, n)
    np.testing.assert_allclose(frac, GOLDEN[size], rtol=GOLDEN_TOLERANCE)
    np.testing.assert_allclose(frac[1] + frac[2], GOLDEN[size][1] + GOLDEN[size][2], rtol=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["128", "256", "512"])
def test_golden_class_fractions_full_sample(size):
    """The class-fraction goldens: the fractions of the first 1,000 images of seed 0, frozen in _pathfinder_stats.GOLDEN."""
    np.testing.assert_allclose(_fractions(size, 1000), GOLDEN[size], rtol=GOLDEN_TOLERANCE)


@pytest.mark.parametrize("size", ["128", "256", "512"])
def test_resembles_the_reference_fixtures(size):
    """Same label rule as the reference's samples; comparable brightness; the labels lack only its dim halo."""
    path = require_reference(REFERENCE / "pathfinder" / f"reference_{size}.npz")
    ref = np.load(path)
    for x, y, lab in zip(ref["inputs"], ref["targets"], ref["label"], strict=True):
        assert int(TASK.oracle(PRESETS[size], {"inputs": x, "targets": y, "origin_index": 0,
                                                "tips": np.zeros((2, 2, 2))})["label"]) == int(lab)
    cfg = PRESETS[size]
    ours = TASK.generate(cfg, keys(cfg, 8))
    x, y, rx, ry = ours["inputs"], ours["targets"], ref["inputs"], ref["targets"]
    assert abs(x.mean() / rx.mean() - 1) < 0.3 and abs((x >= 128).mean() / (rx >= 128).mean() - 1) < 0.35
    assert (y > 0).mean() < (ry > 0).mean() and (y > 0).mean() > 0.6 * ((ry > 0) & (rx >= 10)).mean()


def test_oracle_agrees_and_catches_corruption():
    cfg = PRESETS["128"]
    out = TASK.generate(cfg, keys(cfg, 6))
    for i in range(6):
        row = {k: v[i] for k, v in out.items()}
        for name, want in TASK.oracle(cfg, row).items():
            np.testing.assert_array_equal(np.asarray(row[name]), want, err_msg=name)
    i = int(np.flatnonzero(out["label"] == 1)[0])
    row = {k: v[i].copy() for k, v in out.items()}
    row["targets"][row["targets"] == 2] = 1  # class 2 lost
    assert TASK.oracle(cfg, row)["label"] != row["label"]
    row = {k: v[i].copy() for k, v in out.items()}
    dark = np.argwhere(row["inputs"] == 0)[0]
    row["targets"][tuple(dark)] = 1  # a label on a black pixel
    assert not np.array_equal(TASK.oracle(cfg, row)["targets"], row["targets"])


def test_statistics_and_card_markdown():
    cfg = PRESETS["128"]
    out = TASK.generate(cfg, keys(cfg, 4))
    stats = TASK.statistics(cfg, out)
    assert stats["class_pixels"].sum() == 4 * 128 * 128 and stats["connected"].sum() == 4
    want = np.bincount(out["targets"].reshape(-1).astype(np.int64), minlength=3)[:3]  # the widening oracle
    np.testing.assert_array_equal(stats["class_pixels"], want)
    assert want.min() > 0 and stats["class_pixels"].dtype == np.int64
    strided = {**out, "targets": out["targets"][:, ::2, ::3]}  # any layout counts the same
    np.testing.assert_array_equal(TASK.statistics(cfg, strided)["class_pixels"],
                                  np.bincount(strided["targets"].reshape(-1), minlength=3)[:3])
    assert stats["n_distractors"].sum() == 4 and stats["margin"].sum() == 4
    assert stats["pair_attempts"][0] == out["n_pair_attempts"].astype(int).sum()
    md = TASK.statistics_markdown(cfg, {"val": {k: np.asarray(v).tolist() for k, v in stats.items()}})
    assert "| val | 4 |" in md and "golden" in md
    assert statistics_markdown(TINY, {"val": {k: np.asarray(v).tolist() for k, v in stats.items()}}).count("golden") == 0


def test_worked_examples_run():
    for module in (pathfinder, _pathfinder_stats, _pathfinder_geom, _pathfinder_lanczos):
        result = doctest.testmod(module, raise_on_error=False, verbose=False)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_end_to_end_dataset_folder(tmp_path):
    """generate -> manifest, card with preview, verify --deep (needs the registry row for pathfinder)."""
    from ssmbench.registry import tasks

    if "pathfinder" not in tasks:
        pytest.skip("pathfinder is not registered in ssmbench.generators.BUILTIN yet")
    from ssmbench.data.hub.verify import verify_dataset
    from ssmbench.data.make.generate import generate_dataset

    res = generate_dataset("pathfinder", TINY, out=tmp_path, n=20, workers=1)
    man = res.manifest
    assert man["spec"]["fields"]["inputs"]["shape"] == [32, 32]
    assert {s: man["splits"][s]["num_samples"] for s in ("train", "val", "test")} == {"train": 16, "val": 2, "test": 2}
    assert (res.path / "preview.png").is_file() and "preview.png" in (res.path / "README.md").read_text()
    assert sum(man["statistics"]["train"]["connected"]) == 16
    report = verify_dataset(res.path, deep=True)
    assert not report.problems, report.problems
