"""Pathfinder's reference label rule and free zone (data_cards/pathfinder.md, Labels and Generation procedure).

Pillow is the oracle for the Lanczos resize (never used by the generator); the reference's seeding struct is rebuilt
here from its drawing code (PIL line on the enlarged canvas, disk dilation, 8-bit Lanczos resize, pixels == 255).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from ssmbench.config import apply_overrides
from ssmbench.errors import ConfigError, DatasetError
from ssmbench.generators import _pathfinder_lanczos as lz
from ssmbench.generators._pathfinder_slow import SlowPathfinder, _Geometry
from ssmbench.generators._pathfinder_stats import REFERENCE, statistics_markdown
from ssmbench.generators.pathfinder import PRESETS, Pathfinder, PathfinderConfig
from ssmbench.seeding import keys_for

TASK = Pathfinder()
TINY = PathfinderConfig(size=32, seed_distance=6, marker_radius=1.5, contour_length=4, dash_length=4.0,
                        dash_thickness=1.5, margin_list=(1,), distractor_length=2, num_distractors=2)
SMALL = PathfinderConfig(size=96, aa=3, seed_distance=12, marker_radius=3.0, contour_length=6, dash_length=7,
                         dash_thickness=2.5, margin_list=(2, 3), continuity=2.5, distractor_length=3,
                         num_distractors=14, snake_contrast=1.0)
OTHER_FIELDS = ("inputs", "label", "origin_index", "terminal_index", "tips", "marker_centres", "margin",
                "n_distractors", "n_pair_attempts")


def _ref(config):
    return dataclasses.replace(config, label_rule="reference")


def keys(config, n, split="train", start=0):
    return keys_for("pathfinder", TASK.version, config.to_dict(), 0, split, start, start + n, TASK.stream_exempt)


def _pil():
    return pytest.importorskip("PIL.Image")


def test_resize_matches_pillow():
    """Coefficients, float ('F') and 8-bit ('L') resizes equal Pillow's, integer and odd scales, edges included."""
    image = _pil()
    rng = np.random.default_rng(0)
    for (h, w), (oh, ow) in (((40, 40), (20, 20)), ((41, 61), (21, 20)), ((30, 33), (45, 11)), ((27, 27), (9, 9))):
        a = rng.uniform(0, 1, (h, w)) * (rng.uniform(0, 1, (h, w)) < 0.3)
        pil = np.asarray(image.fromarray(a.astype(np.float32)).resize((ow, oh), image.LANCZOS), dtype=np.float64)
        np.testing.assert_allclose(lz.resize_float(a, oh, ow), pil, atol=2e-6)
        u8 = (a * 255).astype(np.uint8)
        np.testing.assert_array_equal(lz.resize_uint8(u8, oh, ow),
                                      np.asarray(image.fromarray(u8).resize((ow, oh), image.LANCZOS)))
    # hand check, factor 3: output y is centred on input 3y + 1.5 with reach 9, so its taps start at
    # int(3y + 1.5 - 9 + 0.5) = 3y - 7 with weights lanczos3(k / 3) for k = -8 ... 9, normalised
    off, w = lz.interior_taps(3)
    k = np.arange(-8, 10) / 3
    want = np.sinc(k) * np.sinc(k / 3)
    assert off == -7 and len(w) == 18 and np.allclose(w, want / want.sum())


@pytest.mark.parametrize("aa, length, ht, rad", [(2, 5.0, 0.75, 0.0), (2, 8.0, 1.0, 4.0), (3, 22.0, 3.0, 0.0),
                                                 (3, 5.0, 0.75, 2.0)])
def test_shape_resize_kernel_matches_pillow(aa, length, ht, rad):
    """The run-based kernel (interior taps) equals Pillow on the shape's super-sampled canvas (float and 8-bit)."""
    image = _pil()
    sub = np.array([(i + 0.5) / aa - 0.5 for i in range(aa)])
    off, w = lz.interior_taps(aa)
    cum = np.concatenate([[0.0], np.cumsum(w)])
    icum = np.concatenate([[0.0], np.cumsum(lz.fixed_point(w)).astype(np.float64)])
    k = math.ceil(length + ht + rad) + 4
    n = 2 * k + 1
    rng = np.random.default_rng(aa)
    for theta in (0.0, -math.pi, math.pi / 2, *rng.uniform(-math.pi, math.pi, 6)):
        canvas = lz.halo_superres(theta, length, ht, rad, aa, -k, k)  # (n aa, n aa) 0/1, dash at pixel (0, 0)
        out = np.empty((n, n))
        lz.shape_resized(0, 0, theta, length, ht, rad, sub, aa, off, cum, False, -k, -k, out)
        pil = image.fromarray(canvas.astype(np.float32)).resize((n, n), image.LANCZOS)
        np.testing.assert_allclose(out, np.asarray(pil, dtype=np.float64), atol=2e-6)
        lz.shape_resized(0, 0, theta, length, ht, rad, sub, aa, off, icum, True, -k, -k, out)
        pil8 = image.fromarray(canvas * np.uint8(255)).resize((n, n), image.LANCZOS)
        np.testing.assert_array_equal(out, np.asarray(pil8, dtype=np.float64))


def _disk(r: int) -> np.ndarray:
    y, x = np.ogrid[-r:r + 1, -r:r + 1]
    return x * x + y * y <= r * r


def reference_struct_size(theta: float, length: int, thickness: float, margin: int, aa: int) -> int:
    """Pixels of the reference's seeding struct: its `draw_line_n_mask` halo, 8-bit Lanczos-resized, == 255."""
    image = _pil()
    from PIL import ImageDraw

    k = length + int(np.ceil(thickness)) + margin
    blown, c = 2 * k * aa + 1, k * aa
    head = (math.ceil(c + length * aa * math.sin(theta)), math.ceil(c + length * aa * math.cos(theta)))
    canvas = image.new("F", (blown, blown), "black")
    ImageDraw.Draw(canvas).line([(c, c), (head[1], head[0])], fill="white", width=int(round(thickness * aa)))
    line = np.asarray(canvas)
    r = margin * aa
    padded = np.pad(line, r)
    dilated = np.zeros_like(line)
    for dy, dx in zip(*np.nonzero(_disk(r)), strict=True):  # the reference's cv2.dilate with a disk
        dilated = np.maximum(dilated, padded[dy:dy + blown, dx:dx + blown])
    small = image.fromarray(dilated.astype(np.uint8)).resize((2 * k + 1, 2 * k + 1), image.LANCZOS)
    return int((np.asarray(small) == 255).sum())


@pytest.mark.parametrize("size", ["128", "256", "512"])
def test_free_zone_size_matches_the_reference(size):
    """Mean free-zone size over orientations within 0.9-1.15x the reference's (the full-coverage rule of version 1
    was 1.2-2.7x); the Numba tables equal the NumPy (PIL-matrix) definition."""
    cfg = PRESETS[size]
    ht = cfg.dash_thickness / 2
    degrees = np.arange(-180, 180, 20 if size == "512" else 10)
    thetas = degrees * math.pi / 180
    for m in cfg.margin_list:
        big = math.ceil(cfg.dash_length + ht + m) + 1
        zones = lz.free_zones(thetas, cfg.dash_length, ht, m, cfg.aa, big)
        for i in range(0, len(thetas), 5):
            np.testing.assert_array_equal(zones[i], lz.free_zone(thetas[i], cfg.dash_length, ht, m, cfg.aa, big))
        assert zones[:, big, big].all()  # the tail pixel itself is always in its free zone
        ref = np.mean([reference_struct_size(t, int(cfg.dash_length), cfg.dash_thickness, m, cfg.aa)
                       for t in thetas])
        ours = zones.sum() / len(thetas)
        geo = _Geometry(2 * big + 1, cfg.aa)
        old = np.mean([(geo.counts(big, big, t, cfg.dash_length, ht, m) == cfg.aa ** 2).sum() for t in thetas])
        assert 0.9 <= ours / ref <= 1.15, (m, ours, ref)
        assert old / ref >= 1.15, (m, old, ref)


def test_folders_of_the_two_rules_hold_the_same_images(tmp_path):
    """label_rule is left out of the sample keys: two built folders differ only in their masks."""
    import h5py

    from ssmbench.data.hub.verify import verify_dataset
    from ssmbench.data.make.generate import generate_dataset
    from ssmbench.task_config import resolve_config

    arrays = {}
    for rule in ("coverage", "reference"):
        _, config, _ = resolve_config("pathfinder", size=32, overrides=[f"label_rule={rule}"])
        folder = generate_dataset("pathfinder", config, out=tmp_path / rule, n=10, quiet=True).path
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["config"]["label_rule"] == rule
        report = verify_dataset(folder, deep=True)  # the oracle holds under both rules
        assert report.ok and report.oracle_rows, report.problems[:2]
        shard = manifest["splits"]["train"]["shards"][0]["path"]
        with h5py.File(folder / shard, "r") as h5:
            arrays[rule] = {name: h5[name][()] for name in ("inputs", "targets", "label")}
    cov, ref = arrays["coverage"], arrays["reference"]
    assert np.array_equal(cov["inputs"], ref["inputs"]) and np.array_equal(cov["label"], ref["label"])
    assert not np.array_equal(cov["targets"], ref["targets"])


def test_label_rule_changes_only_the_targets():
    """Same keys -> byte-identical images and metadata under both rules; the reference masks add the halo ring."""
    for cfg, n in ((PRESETS["128"], 12), (TINY, 20)):
        ks = keys(cfg, n)
        cov, ref = TASK.generate(cfg, ks), TASK.generate(_ref(cfg), ks)
        for name in OTHER_FIELDS:
            np.testing.assert_array_equal(cov[name], ref[name], err_msg=name)
        assert not np.array_equal(cov["targets"], ref["targets"])
        c, r, img = cov["targets"], ref["targets"], cov["inputs"]
        assert (r > 0).sum() > 1.5 * (c > 0).sum()
        assert ((r > 0) & (img == 0)).any()  # ring pixels on black
        assert ((c > 0) & (r > 0)).sum() >= 0.97 * (c > 0).sum()  # dash pixels stay labelled
        for i in range(n):  # class 2 iff connected, under both rules
            assert (r[i] == 2).any() == bool(cov["label"][i]) == (c[i] == 2).any()


@pytest.mark.parametrize("config, n, max_attempts", [(PRESETS["128"], 2, 120), (SMALL, 2, 10**4)],
                         ids=["128", "small-aa3"])
def test_reference_rule_equals_whole_image_implementation(config, n, max_attempts):
    """The kernel's per-dash run-based resize equals PIL's coefficient matrices on whole-image canvases."""
    cfg = _ref(config)
    ks = keys(cfg, 24 if max_attempts < 10**4 else n)
    fast = TASK.generate(cfg, ks)
    chosen = [i for i in range(len(ks)) if fast["n_pair_attempts"][i] <= max_attempts][:n]
    assert len(chosen) == n
    slow = SlowPathfinder(cfg)
    for i in chosen:
        image, mask, _ = slow.render(int(ks[i]))
        np.testing.assert_array_equal(fast["inputs"][i], image)
        np.testing.assert_array_equal(fast["targets"][i], mask)


def _fractions(cfg, n: int) -> np.ndarray:
    counts = np.zeros(3, dtype=np.int64)
    for start in range(0, n, 100):
        block = TASK.generate(cfg, keys(cfg, min(100, n - start), start=start))
        counts += TASK.statistics(cfg, block)["class_pixels"]
    return counts / counts.sum()


def _check_reference_fractions(size: str, n: int) -> None:
    ref = np.array(REFERENCE[size])
    got = _fractions(_ref(PRESETS[size]), n)
    # the labelled share within 15 % (our dashes carry 3.5-17 % less ink than the reference's PIL lines), each
    # class within 25 % (class 2 follows the share of connected images)
    assert abs((got[1] + got[2]) / (ref[1] + ref[2]) - 1) <= 0.15, got
    np.testing.assert_allclose(got[1:], ref[1:], rtol=0.25)
    coverage = _fractions(PRESETS[size], min(n, 100))
    assert coverage[1] + coverage[2] < 0.8 * (ref[1] + ref[2])  # the default masks are far from the reference's


@pytest.mark.parametrize("size, n", [("128", 300), ("256", 150)])
def test_reference_rule_class_fractions(size, n):
    _check_reference_fractions(size, n)


@pytest.mark.slow
@pytest.mark.parametrize("size, n", [("128", 1000), ("256", 500), ("512", 300)])
def test_reference_rule_class_fractions_large(size, n):
    _check_reference_fractions(size, n)


def test_label_rule_config():
    assert PathfinderConfig().label_rule == "coverage"
    cfg = apply_overrides(PRESETS["128"], {"label_rule": "reference"})  # `-o label_rule=reference`
    assert cfg.label_rule == "reference" and cfg.to_dict()["label_rule"] == "reference"
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(PRESETS["128"], label_rule="halo")
    assert err.value.field == "label_rule" and "coverage, reference" in str(err.value)
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(PRESETS["128"], label_rule="reference", label_min_coverage=0.5)
    assert err.value.field == "label_min_coverage"


def test_card_names_rule_and_fractions():
    stats = {"val": {"class_pixels": [940, 44, 16], "connected": [5, 5], "n_distractors": [0] * 16 + [10],
                     "margin": [5, 5], "pair_attempts": [40]}}
    md = statistics_markdown(_ref(PRESETS["128"]), stats, preset="128")
    assert "`label_rule` = `reference`" in md and "94.000 % / 4.400 % / 1.500 %" in md
    md = statistics_markdown(PRESETS["128"], stats, preset="128")
    assert "`label_rule` = `coverage`" in md and "-o label_rule=reference" in md
    md = TASK.statistics_markdown(_ref(PRESETS["256"]), stats)  # the preset is recognised under either rule
    assert "preset 256" in md


def test_manifest_records_rule_and_old_versions_are_refused(tmp_path):
    """`config.label_rule` is in manifest.json; a version-1 folder is refused with one line naming both versions."""
    from ssmbench.data.folder.checks import check_folder
    from ssmbench.data.folder.manifest import Manifest
    from ssmbench.data.make.generate import generate_dataset

    res = generate_dataset("pathfinder", _ref(TINY), out=tmp_path, n=8, workers=1)
    manifest = json.loads((res.path / "manifest.json").read_text())
    assert manifest["config"]["label_rule"] == "reference" and manifest["task_version"] == TASK.version == "2"
    check_folder(res.path, Manifest.from_json(manifest), "train", expect_task="pathfinder")
    old = Manifest.from_json(dict(manifest, task_version="1"))
    with pytest.raises(DatasetError) as err:
        check_folder(res.path, old, "train", expect_task="pathfinder")
    line = str(err.value)
    assert "version 1" in line and "version 2" in line and "\n" not in line
