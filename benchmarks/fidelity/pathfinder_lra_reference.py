"""LRA Pathfinder: ssmbench's `pathfinder_lra` against the generator that made LRA's data, run in this process.

    PYTHONSAFEPATH=1 python benchmarks/fidelity/pathfinder_lra_reference.py --pathfinder PATH                # 32/64/128/256
    PYTHONSAFEPATH=1 python benchmarks/fidelity/pathfinder_lra_reference.py --pathfinder PATH --sizes 32 --n 200 --json o.json

PATH is a checkout (or a bare git directory) of drewlinsley/pathfinder at commit ab9c130 (2019-12-06), the code LRA's
`lra_benchmarks/data/pathfinder.py` names; get it with `git clone https://github.com/drewlinsley/pathfinder` (MIT).
Its `snakes.py` and `snakes2.py` are written unchanged into a temporary folder and imported from there. That
code was written for Python 2.7, NumPy < 1.20 and SciPy < 1.3; what it calls and this machine lacks is supplied as
attributes, never by editing it: `np.float` = float, `np.round_` = np.round, and `scipy.misc.imresize` /
`scipy.misc.imsave` re-implemented with SciPy 1.1's semantics (float arrays byte-scaled from their min..max to
uint8, then PIL's Lanczos resize; `imsave` records the byte-scaled image here instead of writing a PNG). The
reference's `from_wrapper` is called once per image (batch id = image index) with LRA's settings for the size
(`SETTINGS`, Python 2 integer division: distractor_length 14/3 = 4) and `use_single_paddles=False` as its wrapper.

Per image and side: label, main-pair attempts, distractor paths placed, each main path's end-to-end distance, and ink
(sum of pixel values / 255 in the final image's units) of the main paths, the distractors and the circles, divided
by their drawn length (dashes x dash length) or by the number of circles. On the reference side these come from
wrapping its functions (`two_snakes`, `make_snake`, `draw_circle`); on ssmbench's from the stored fields and the
dash geometry (`generate_with_geometry`). Speed: process CPU seconds per image, one thread on both sides,
generation into memory (the reference's per-image metadata .npy write is included; it is small).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

COMMIT = "ab9c130cdf0f27c5bc4117801915521559a3cd2f"
FILES = ("snakes.py", "snakes2.py")
SETTINGS = {  # lra_benchmarks/data/pathfinder.py docstrings (google-research/long-range-arena), Python 2 division
    32: {"paddle_margin_list": [1], "window_size": [32, 32], "padding": 1, "paddle_length": 2, "marker_radius": 1.5,
         "contour_length": 14, "paddle_thickness": 0.5, "antialias_scale": 2, "seed_distance": 7,
         "continuity": 1.0, "distractor_length": 14 // 3, "num_distractor_snakes": 20 // (14 // 3),
         "snake_contrast_list": [2], "paddle_contrast_list": [0.75]},
    64: {"padding": 1, "paddle_margin_list": [1], "seed_distance": 12, "window_size": [64, 64],
         "marker_radius": 2.5, "contour_length": 14, "paddle_thickness": 1, "antialias_scale": 2, "continuity": 1.8,
         "distractor_length": 14 // 3, "num_distractor_snakes": 22 // (14 // 3), "snake_contrast_list": [0.8]},
    128: {"padding": 1, "paddle_margin_list": [2, 3], "seed_distance": 20, "window_size": [128, 128],
          "marker_radius": 3, "contour_length": 14, "paddle_thickness": 1.5, "antialias_scale": 2,
          "continuity": 1.8, "distractor_length": 14 // 3, "num_distractor_snakes": 35 // (14 // 3),
          "snake_contrast_list": [0.9]},
    256: {"paddle_margin_list": [3], "window_size": [256, 256], "marker_radius": 5, "contour_length": 14,
          "paddle_thickness": 2, "antialias_scale": 2, "continuity": 1.8, "distractor_length": 14 // 3,
          "num_distractor_snakes": 30 // (14 // 3), "snake_contrast_list": [1.0]},
}
DEFAULTS = {  # snakes2_wrapper.py's Args() defaults and the flags its body sets (use_single_paddles, segmentation)
    "padding": 22, "antialias_scale": 4, "LABEL": 1, "seed_distance": 27, "marker_radius": 3, "contour_length": 15,
    "distractor_length": 5, "num_distractor_snakes": 6, "snake_contrast_list": [1.0], "use_single_paddles": False,
    "max_target_contour_retrial": 4, "max_distractor_contour_retrial": 4, "max_paddle_retrial": 2,
    "continuity": 1.4, "paddle_length": 5, "paddle_thickness": 1.5, "paddle_margin_list": [4],
    "paddle_contrast_list": [1.0], "pause_display": False, "save_images": True, "save_metadata": True,
    "segmentation_task": False, "segmentation_task_double_circle": False,
}


# ---------------------------------------------------------------------------------------------------------------
# SciPy 1.1's imresize / imsave, which the reference calls
# ---------------------------------------------------------------------------------------------------------------

def bytescale(data: np.ndarray) -> np.ndarray:
    """scipy.misc.bytescale (SciPy <= 1.2) with its defaults: uint8 unchanged, else min..max -> 0..255."""
    if data.dtype == np.uint8:
        return data
    lo, hi = float(data.min()), float(data.max())
    scale = 255.0 / ((hi - lo) or 1.0)
    return ((data - lo) * scale).clip(0, 255).__add__(0.5).astype(np.uint8)


def imresize(arr: np.ndarray, size: tuple[int, int], interp: str = "bilinear") -> np.ndarray:
    """scipy.misc.imresize (SciPy <= 1.2) for 2-D arrays: byte-scale to an 'L' image, PIL resize, back to uint8."""
    from PIL import Image

    resample = {"nearest": Image.Resampling.NEAREST, "lanczos": Image.Resampling.LANCZOS,
                "bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}[interp]
    image = Image.fromarray(bytescale(np.asarray(arr)), mode=None)
    return np.array(image.resize((size[1], size[0]), resample=resample))


class Capture:
    """What the wrapped reference functions saw while drawing the current image."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.pairs: list[Any] = []        # two_snakes results (the last one is the image's main pair)
        self.distractor_ink = 0.0         # sum of pixel values the successful distractor paths added
        self.distractors = 0
        self.circles: list[np.ndarray] = []
        self.final: np.ndarray | None = None  # the byte-scaled image imsave would have written
        self.vmax = 1.0                   # its scale: max of the float image

    def imsave(self, name: str, arr: np.ndarray) -> None:
        arr = np.asarray(arr, dtype=np.float64)
        self.final, self.vmax = bytescale(arr), float(arr.max()) or 1.0


def load_reference(checkout: Path, into: Path, cap: Capture) -> tuple[Any, Any]:
    """Write the two files into `into` unchanged, supply what NumPy 2 / SciPy 1.17 removed, import and wrap."""
    import scipy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import scipy.misc

    for name in FILES:
        if (checkout / name).is_file():
            text = (checkout / name).read_text()
        else:  # a bare git directory
            text = subprocess.run(["git", f"--git-dir={checkout}", "show", f"{COMMIT}:{name}"], check=True,
                                  capture_output=True, text=True).stdout
        (into / name).write_text(text)
    np.float = float  # type: ignore[attr-defined]
    np.round_ = np.round  # type: ignore[attr-defined]
    scipy.misc.imresize = imresize  # type: ignore[attr-defined]
    scipy.misc.imsave = cap.imsave  # type: ignore[attr-defined]
    sys.path.insert(0, str(into))
    importlib.invalidate_caches()
    snakes, snakes2 = importlib.import_module("snakes"), importlib.import_module("snakes2")

    two_snakes, make_snake, draw_circle = snakes2.two_snakes, snakes.make_snake, snakes2.draw_circle

    def two_snakes_w(*a: Any, **k: Any) -> Any:
        out = two_snakes(*a, **k)
        cap.pairs.append(out)
        return out

    def make_snake_w(image: np.ndarray, *a: Any, **k: Any) -> Any:
        out = make_snake(image, *a, **k)
        if out[2]:
            cap.distractors += 1
            cap.distractor_ink += float(np.sum(out[0] - image))
        return out

    def draw_circle_w(*a: Any, **k: Any) -> Any:
        out = draw_circle(*a, **k)
        cap.circles.append(out)
        return out

    snakes2.two_snakes, snakes.make_snake, snakes2.draw_circle = two_snakes_w, make_snake_w, draw_circle_w
    return snakes, snakes2


def reference_images(snakes2: Any, cap: Capture, size: int, n: int, seed: int, out: Path) -> list[dict]:
    """Draw n images with the reference; per image its statistics and CPU seconds."""
    s = SETTINGS[size]
    np.random.seed(seed)
    random.seed(seed)
    rows = []
    for i in range(n):
        cap.reset()
        args = SimpleNamespace(**{**DEFAULTS, **s, "contour_path": str(out / str(size)), "batch_id": i,
                                  "n_images": 1})
        c0 = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            snakes2.from_wrapper(args)
        dt = time.process_time() - c0
        meta = np.load(out / str(size) / "metadata" / f"{i}.npy")
        images, _, origin, terminal, ok = cap.pairs[-1]
        main = np.maximum(images[0], images[1])
        circles = np.maximum(cap.circles[-2], cap.circles[-1]).astype(np.float64) / 255.0
        length = s["paddle_length"] if "paddle_length" in s else DEFAULTS["paddle_length"]
        rows.append({
            "seconds": dt, "label": int(meta[0][3]), "pair_attempts": len(cap.pairs),
            "distractors": cap.distractors,
            "end_to_end": float(np.mean([np.hypot(*np.subtract(origin[k], terminal[k])) for k in range(2)])),
            "main_ink_per_px": float(main.sum()) / cap.vmax / (2 * s["contour_length"] * length),
            "distractor_ink_per_px": (cap.distractor_ink / cap.vmax
                                      / max(1, cap.distractors * s["distractor_length"] * length)),
            "circle_ink": float(circles.sum()) / cap.vmax / 2,
            "image_ink": float(cap.final.sum()) / 255.0,
        })
    return rows


def ssmbench_images(size: int, n: int, seed: int) -> list[dict]:
    """The same statistics for n images of `pathfinder_lra` (val split keys), and CPU seconds per image."""
    from ssmbench.generators._pathfinder_slow import _Geometry
    from ssmbench.generators.pathfinder import generate_with_geometry
    from ssmbench.generators.pathfinder_lra import PRESETS, PathfinderLRA, intensities, pathfinder_config
    from ssmbench.seeding import keys_for

    task, config = PathfinderLRA(), PRESETS[str(size)]
    keys = keys_for(task.name, task.version, config.to_dict(), seed, "val", 0, n)
    task.generate(config, keys[:1])  # compile / load the kernels
    c0 = time.process_time()
    task.generate(config, keys)
    per_image = (time.process_time() - c0) / n
    main_i, dist_i, mark_i = intensities(config)
    out = generate_with_geometry(pathfinder_config(config), keys, geometry=True, distractor_contrast=dist_i,
                                 seed_rule=True)
    g = _Geometry(size, config.aa)
    ell, ht = config.dash_length, config.dash_thickness / 2
    rows = []
    for i in range(n):
        def cover(dashes: np.ndarray) -> np.ndarray:
            c = np.zeros((size, size))
            for y, x, ang, *_ in dashes:
                c = np.maximum(c, g.cov(int(y), int(x), float(ang), ell, ht, 0.0))
            return c
        main = cover(out["main_dashes"][i].reshape(-1, 5)) * main_i
        nd = int(out["n_distractors"][i])
        dist = cover(out["distractor_dashes"][i][:nd].reshape(-1, 5)) * dist_i
        circles = np.maximum(*(g.cov(int(y), int(x), 0.0, 0.0, 0.0, config.marker_radius)
                               for y, x in out["marker_centres"][i])) * mark_i
        image = np.maximum(np.maximum(main, dist), circles)
        vmax = float(image.max())
        if not np.array_equal(np.rint(255 * image / vmax).astype(np.uint8), out["inputs"][i]):
            raise SystemExit(f"size {size} image {i}: the geometry does not redraw the stored image")
        tips = out["tips"][i].astype(np.float64)
        rows.append({
            "seconds": per_image, "label": int(out["label"][i]), "pair_attempts": int(out["n_pair_attempts"][i]),
            "distractors": nd, "end_to_end": float(np.mean([np.hypot(*(tips[k, 0] - tips[k, 1])) for k in range(2)])),
            "main_ink_per_px": float(main.sum()) / vmax / (2 * config.contour_length * ell),
            "distractor_ink_per_px": float(dist.sum()) / vmax / max(1, nd * config.distractor_length * ell),
            "circle_ink": float(circles.sum()) / vmax / 2, "image_ink": float(out["inputs"][i].sum()) / 255.0,
        })
    return rows


def seeding_agreement(snakes: Any, size: int) -> dict[str, int]:
    """Orientations (of 360, per margin) at which the reference's seeding dilation has a pixel with no in-image
    sample, and whether ssmbench's `seedable_orientations` and `reference_seed_struct` say the same."""
    from ssmbench.generators._pathfinder_tables import reference_seed_struct, seedable_orientations

    s = {**DEFAULTS, **SETTINGS[size]}
    L, t, aa = s["paddle_length"], s["paddle_thickness"], s["antialias_scale"]
    out = {}
    for m in s["paddle_margin_list"]:
        large = snakes.generate_dilation_struct(m * aa)
        blank = np.zeros((size, size))
        ref, same = np.zeros(360, dtype=np.int64), 0
        for i in range(360):
            theta = (i - 180) * np.pi / 180
            _, struct = snakes.draw_line_n_mask(((L + m) * 2 + 1,) * 2, [L + m + 1] * 2, theta, L, t, m, large, aa)
            ref[i] = snakes.binary_dilate_custom(blank, struct, value_scale=1.).min() >= 0
            same += bool(np.array_equal(struct.astype(np.uint8) == 1, reference_seed_struct(theta, L, t, m, aa)))
        ours = seedable_orientations(L, t, m, aa)
        out[f"m{m}"] = {"reference_seedable": int(ref.sum()), "ssmbench_seedable": int(ours.sum()),
                        "orientations_agreeing": int((ref == ours).sum()), "identical_structs": same}
    return out


STATS = ("label", "pair_attempts", "distractors", "end_to_end", "main_ink_per_px", "distractor_ink_per_px",
         "circle_ink", "image_ink", "seconds")


def summary(rows: list[dict]) -> dict[str, float]:
    out = {k: float(np.mean([r[k] for r in rows])) for k in STATS}
    out["seconds_median"] = float(statistics.median(r["seconds"] for r in rows))
    out["n"] = len(rows)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pathfinder", type=Path, required=True, help="checkout or bare git dir of drewlinsley/pathfinder")
    p.add_argument("--sizes", default="32,64,128,256")
    p.add_argument("--n", type=int, default=0, help="images per size and side (default 200 / 100 / 60 / 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}")
    cap = Capture()
    results: dict[str, Any] = {"reference": f"drewlinsley/pathfinder {COMMIT}", "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        snakes, snakes2 = load_reference(a.pathfinder, Path(tmp), cap)
        for size in (int(s) for s in a.sizes.split(",")):
            n = a.n or {32: 200, 64: 100, 128: 60, 256: 30}[size]
            ref = summary(reference_images(snakes2, cap, size, n, a.seed, Path(tmp)))
            ours = summary(ssmbench_images(size, n, a.seed))
            seeding = seeding_agreement(snakes, size)
            results["sizes"][size] = {"reference": ref, "ssmbench": ours, "seeding": seeding}
            print(f"\nsize {size}, {n} images per side; first-dash orientations (of 360): {seeding}")
            print(f"{'statistic':24s} {'reference':>12s} {'ssmbench':>12s} {'ratio':>8s}")
            for k in (*STATS, "seconds_median"):
                r, o = ref[k], ours[k]
                print(f"{k:24s} {r:12.4g} {o:12.4g} {o / r if r else float('nan'):8.3f}")
            print(f"speed: ssmbench {ref['seconds'] / ours['seconds']:.0f}x faster (means)", flush=True)
    print(f"\nload average at end: {os.getloadavg()}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
