"""Lanczos-3 downscaling with the semantics of PIL's `Image.resize(..., Image.LANCZOS)`, for Pathfinder's reference label rule and free zone.

The reference generator (data_cards/pathfinder.md, Known discrepancies) drew every dash on a super-sampled canvas
and shrank it with PIL's Lanczos filter. Two of its behaviours are rebuilt here from that filter:

* `label_rule=reference`: a pixel is on main path s iff path s's own super-sampled rendering, Lanczos-resized to
  the image size, is >= 0.5/255 of its maximum; the resampling ringing adds a faint labelled ring around dashes.
* The free zone around a path's first dash: the pixels where the halo, resized as an 8-bit image, is exactly 255.

PIL's convention (`precompute_coeffs` in libImaging/Resample.c): output pixel x of an in -> out resize has its
centre at input coordinate c = (x + 0.5) * scale with scale = in / out; the filter support 3 is stretched by scale;
taps are the input pixels [int(c - support + 0.5), int(c + support + 0.5)) clipped to the input, with weights
lanczos3((x_in - c + 0.5) / scale), normalised to sum 1. 8-bit images use those weights rounded to 22-bit fixed
point, round the horizontal pass (done first) to uint8 with clipping, then the vertical pass the same way.

Our super-sampled grid has aa x aa points per pixel at offsets (i + 0.5) / aa - 0.5, so an exact aa-fold resize
puts every output pixel's centre on the pixel's own centre; away from the input's edges every output pixel uses
the same 6·aa taps (`interior_taps`), which is what the per-dash kernels use (the reference resized each dash in a
zero-padded window, so its edges never truncated a kernel).

>>> off, w = interior_taps(2)
>>> off, len(w), round(float(w.sum()), 12)   # output pixel y reads super-samples 2y - 5 ... 2y + 6
(-5, 12, 1.0)
>>> xmin, k = pil_coefficients(16, 8)        # the full PIL rule agrees away from the edges
>>> int(xmin[4]) - 2 * 4, bool(np.allclose(k[4, :12], w))
(-5, True)
"""

from __future__ import annotations  # noqa: I001  (the _rng import below must precede numba)

import functools
import math

from . import _rng  # noqa: F401  (sets NUMBA_DISABLE_INTEL_SVML before numba is imported)

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from ._pathfinder_geom import row_span  # noqa: E402

SUPPORT = 3.0
PRECISION_BITS = 32 - 8 - 2
"""PIL's fixed-point precision for 8-bit images."""


def lanczos3(x: np.ndarray | float) -> np.ndarray:
    """PIL's Lanczos filter: sinc(x) sinc(x / 3) on [-3, 3), 0 elsewhere."""
    x = np.asarray(x, dtype=np.float64)
    return np.where((x >= -SUPPORT) & (x < SUPPORT), np.sinc(x) * np.sinc(x / SUPPORT), 0.0)


def pil_coefficients(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """PIL's `precompute_coeffs` for resizing in_size -> out_size: (xmin (out,), weights (out, ksize)).

    Output pixel x is sum_k weights[x, k] * input[xmin[x] + k] (taps past the input's end have weight 0).
    """
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = SUPPORT * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    xmin = np.zeros(out_size, dtype=np.int64)
    weights = np.zeros((out_size, ksize), dtype=np.float64)
    for xx in range(out_size):
        centre = (xx + 0.5) * scale
        lo = max(int(centre - support + 0.5), 0)
        hi = min(int(centre + support + 0.5), in_size)
        w = lanczos3((np.arange(lo, hi) - centre + 0.5) / filterscale)
        total = w.sum()
        if total != 0.0:
            w = w / total
        xmin[xx] = lo
        weights[xx, :hi - lo] = w
    return xmin, weights


def interior_taps(aa: int) -> tuple[int, np.ndarray]:
    """(off, w): an aa-fold downscale's output pixel y is sum_k w[k] * super[aa * y + off + k], k < 6 aa."""
    n = 16
    xmin, weights = pil_coefficients(aa * n, n)
    y = n // 2
    w = weights[y, :6 * aa].copy()
    assert np.count_nonzero(weights[y, 6 * aa:]) == 0
    return int(xmin[y]) - aa * y, w


def fixed_point(weights: np.ndarray) -> np.ndarray:
    """PIL's `normalize_coeffs_8bpc`: weights as int64 in units of 2**-22, rounded half away from zero."""
    scaled = weights * float(1 << PRECISION_BITS)
    return np.where(weights < 0, np.trunc(scaled - 0.5), np.trunc(scaled + 0.5)).astype(np.int64)


def _clip8_array(acc: np.ndarray) -> np.ndarray:
    """PIL's clip8 after adding the rounding half: acc >> 22 clipped to [0, 255] (acc: exact integers)."""
    return np.clip((acc.astype(np.int64) + (1 << (PRECISION_BITS - 1))) >> PRECISION_BITS, 0, 255).astype(np.float64)


@functools.lru_cache(maxsize=32)
def _matrix(in_size: int, out_size: int, fixed: bool) -> np.ndarray:
    """(in_size, out_size) float64 matrix of the PIL coefficients (or of their 22-bit fixed-point integers).

    Fixed-point products and sums stay below 2**53, so float64 matrix products of them are exact integers.
    """
    xmin, weights = pil_coefficients(in_size, out_size)
    if fixed:
        weights = fixed_point(weights)
    mat = np.zeros((in_size, out_size), dtype=np.float64)
    for x in range(out_size):
        k = min(weights.shape[1], in_size - xmin[x])
        mat[xmin[x]:xmin[x] + k, x] = weights[x, :k]
    mat.flags.writeable = False
    return mat


def resize_float(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """PIL mode 'F' Lanczos resize of a 2-D float image (computed in float64): horizontal pass, then vertical."""
    a = np.asarray(image, dtype=np.float64)
    horiz = a @ _matrix(a.shape[1], out_w, False)
    return _matrix(a.shape[0], out_h, False).T @ horiz


def resize_uint8(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """PIL mode 'L' Lanczos resize of a 2-D uint8 image: fixed point, each pass rounded and clipped to uint8."""
    a = np.asarray(image, dtype=np.uint8).astype(np.float64)
    horiz = _clip8_array(a @ _matrix(a.shape[1], out_w, True))
    return _clip8_array(_matrix(a.shape[0], out_h, True).T @ horiz).astype(np.uint8)


def halo_superres(theta: float, length: float, ht: float, rad: float, aa: int, lo: int, hi: int) -> np.ndarray:
    """Super-sampled rendering (0/1) of the rounded rectangle of a dash at pixel 0 over pixel offsets [lo, hi]^2."""
    sub = np.array([(i + 0.5) / aa - 0.5 for i in range(aa)])
    g = np.arange((hi - lo + 1) * aa)
    f = (lo + g // aa) + sub[g % aa]
    s, c = math.sin(theta), math.cos(theta)
    a = f[:, None] * s + f[None, :] * c
    b = f[:, None] * c - f[None, :] * s
    da = np.maximum(np.maximum(-a, 0.0), a - length)
    db = np.maximum(np.abs(b) - ht, 0.0)
    return (da * da + db * db <= rad * rad).astype(np.uint8)


def free_zone(theta: float, length: float, ht: float, margin: int, aa: int, big: int) -> np.ndarray:
    """(2 big + 1)^2 bool: the free zone F_theta, offsets o from a dash's tail (at [big, big]).

    F_theta = the tail pixel itself and the offsets where the dash's halo, resized as the reference's 8-bit image,
    is 255 (at margin 2 the tail pixel is just below 255, so it is added: a path never starts on an occupied
    pixel, and every available tail stays inside the band-free frame the kernels sample from). The halo (points within `margin` of the dash) is rendered super-sampled as 0/255 and Lanczos-resized to the
    pixel grid exactly as PIL resizes mode 'L'; the reference's seeding struct kept only the pixels equal to 255.
    The canvas reaches 4 pixels past `big` on every side, so no output pixel that matters sees its edge.
    """
    lo, hi = -big - 4, big + 4
    u8 = halo_superres(theta, length, ht, float(margin), aa, lo, hi) * np.uint8(255)
    n = hi - lo + 1
    zone = resize_uint8(u8, n, n)[4:-4, 4:-4] == 255
    zone[big, big] = True  # the tail pixel itself
    return zone


@njit(cache=True)
def shape_resized(py, px, theta, length, ht, rad, sub, aa, off, cum, fixed, oy0, ox0, out):
    """out[y, x] = the Lanczos-resized super-sampled rendering of a rounded rectangle at pixel (oy0 + y, ox0 + x).

    The shape is the dash R(p, theta) grown by `rad` (0: the dash, m: its halo), rendered 1 at the sub-samples
    inside it (the point test of `_pathfinder_geom`) and 0 elsewhere. `cum` is the prefix sum of the interior
    taps (cum[k] = w[0] + ... + w[k - 1]). fixed=False: float weights, the float image (PIL mode 'F');
    fixed=True: `cum` of the 22-bit fixed-point taps, the shape at 255 and each pass rounded and clipped to
    uint8 (PIL mode 'L'; the integer sums are exact in float64). Each super-sample row is scanned once and its
    runs of inside points enter the horizontal pass through `cum`; the vertical pass is the plain 6·aa-tap sum.
    """
    s = math.sin(theta)
    c = math.cos(theta)
    r2 = rad * rad
    h, w = out.shape
    nt = cum.shape[0] - 1
    rows = (h - 1) * aa + nt
    cols = (w - 1) * aa + nt
    r0 = oy0 * aa + off  # global super-sample index of the window's first row / column
    c0 = ox0 * aa + off
    horiz = np.zeros((rows, w), dtype=np.float64)
    touched = np.empty((rows, 2), dtype=np.int64)  # output columns [lo, hi] each row reaches (lo > hi: none)
    for r in range(rows):
        gy = r0 + r
        fy = float(gy // aa - py) + sub[gy % aa]
        touched[r, 0] = w
        touched[r, 1] = -1
        # super-sample columns that can be inside: a conservative span from the grown rectangle (the point test
        # below decides), converted from offsets to the window's columns
        lo, hi = row_span(fy, s, c, length, ht, rad + 1e-6)
        qa = max(0, (px + lo - 1) * aa - c0)
        qb = min(cols, (px + hi + 2) * aa - c0)
        start = -1
        for q in range(qa, qb + 1):
            inside = False
            if q < qb:
                gx = c0 + q
                fx = float(gx // aa - px) + sub[gx % aa]
                a = fy * s + fx * c
                b = fy * c - fx * s
                da = max(max(-a, 0.0), a - length)
                db = max(abs(b) - ht, 0.0)
                inside = da * da + db * db <= r2
            if inside and start < 0:
                start = q
            elif not inside and start >= 0:
                last = q - 1  # a run [start, last] of inside points
                xa = max(0, (start - nt) // aa + 1)
                xb = min(w - 1, last // aa)
                for x in range(xa, xb + 1):
                    k0 = max(start - x * aa, 0)
                    k1 = min(last - x * aa, nt - 1)
                    horiz[r, x] += cum[k1 + 1] - cum[k0]
                touched[r, 0] = min(touched[r, 0], xa)
                touched[r, 1] = max(touched[r, 1], xb)
                start = -1
        if fixed:
            for x in range(w):
                horiz[r, x] = _clip8(255.0 * horiz[r, x])
    wt = np.empty(nt, dtype=np.float64)
    for k in range(nt):
        wt[k] = cum[k + 1] - cum[k]
    zero = _clip8(0.0) if fixed else 0.0
    for y in range(h):
        xa = w
        xb = -1
        for k in range(nt):
            xa = min(xa, touched[y * aa + k, 0])
            xb = max(xb, touched[y * aa + k, 1])
        for x in range(w):
            if x < xa or x > xb:  # no inside sample within reach: the rows hold zeros here
                out[y, x] = zero
                continue
            acc = 0.0
            for k in range(nt):
                acc += wt[k] * horiz[y * aa + k, x]
            out[y, x] = _clip8(acc) if fixed else acc


@njit(cache=True)
def _clip8(acc):
    """PIL's rounding and clipping of a fixed-point sum (an exact integer) to uint8, as a float."""
    v = (np.int64(acc) + (1 << (PRECISION_BITS - 1))) >> PRECISION_BITS
    return float(min(max(v, 0), 255))


@njit(cache=True)
def _free_zones(thetas, length, ht, rad, sub, aa, off, cum, big, zones):
    for t in range(thetas.shape[0]):
        shape_resized(0, 0, thetas[t], length, ht, rad, sub, aa, off, cum, True, -big, -big, zones[t])


def free_zones(thetas: np.ndarray, length: float, ht: float, margin: int, aa: int, big: int) -> np.ndarray:
    """(n, 2 big + 1, 2 big + 1) bool: `free_zone` for every angle, by the Numba kernel (interior taps)."""
    off, w = interior_taps(aa)
    cum = np.concatenate([[0.0], np.cumsum(fixed_point(w)).astype(np.float64)])
    sub = np.array([(i + 0.5) / aa - 0.5 for i in range(aa)])
    zones = np.zeros((len(thetas), 2 * big + 1, 2 * big + 1))
    _free_zones(np.asarray(thetas, dtype=np.float64), float(length), float(ht), float(margin), sub, aa, off, cum,
                big, zones)
    zone = zones == 255.0
    zone[:, big, big] = True  # the tail pixel itself, as in `free_zone`
    return zone


@njit(cache=True)
def label_path_reference(lab, value, rec, n, length, ht, sub, aa, off, cum, rel):
    """lab = max(lab, value) where path s (dash records rec[:n]) is >= rel times its resized rendering's maximum.

    The path's rendering is the pixel-wise maximum of its dashes' resized renderings (the reference resized every
    dash on its own canvas and composited with a maximum). Work stays on the path's bounding box (plus the
    3-pixel filter reach), clipped to the image.
    """
    size = lab.shape[0]
    reach = 3
    y0, y1, x0, x1 = size, 0, size, 0
    for j in range(n):
        py, px, ang = int(rec[j, 0]), int(rec[j, 1]), rec[j, 2]
        a, b, cc, d = _dash_window(py, px, ang, length, ht, reach, size)
        y0, y1, x0, x1 = min(y0, a), max(y1, b), min(x0, cc), max(x1, d)
    if y0 >= y1 or x0 >= x1:
        return
    buf = np.zeros((y1 - y0, x1 - x0), dtype=np.float64)
    best = 0.0
    for j in range(n):
        py, px, ang = int(rec[j, 0]), int(rec[j, 1]), rec[j, 2]
        a, b, cc, d = _dash_window(py, px, ang, length, ht, reach, size)
        if a >= b or cc >= d:
            continue
        out = np.empty((b - a, d - cc), dtype=np.float64)
        shape_resized(py, px, ang, length, ht, 0.0, sub, aa, off, cum, False, a, cc, out)
        for y in range(b - a):
            for x in range(d - cc):
                v = out[y, x]
                if v > buf[a - y0 + y, cc - x0 + x]:
                    buf[a - y0 + y, cc - x0 + x] = v
                if v > best:
                    best = v
    thr = rel * best
    for y in range(y1 - y0):
        for x in range(x1 - x0):
            if buf[y, x] >= thr and best > 0.0 and lab[y0 + y, x0 + x] < value:
                lab[y0 + y, x0 + x] = value


@njit(cache=True)
def _dash_window(py, px, theta, length, ht, reach, size):
    """Pixel box [y0, y1) x [x0, x1) (clipped to the image) that a dash's resized rendering can reach."""
    s = math.sin(theta)
    c = math.cos(theta)
    ey = py + length * s
    ex = px + length * c
    ext = ht + 1.0 + reach
    y0 = int(math.floor(min(py, ey) - ext))
    y1 = int(math.ceil(max(py, ey) + ext)) + 1
    x0 = int(math.floor(min(px, ex) - ext))
    x1 = int(math.ceil(max(px, ex) + ext)) + 1
    return max(y0, 0), min(y1, size), max(x0, 0), min(x1, size)
