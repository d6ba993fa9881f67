"""Sub-sample coverage rasteriser for Pathfinder (dashes, halos, coverage: data_cards/pathfinder.md), written for Numba.

Every shape is a "rounded rectangle": the points within distance `rad` of the closed rectangle whose axis runs
from the centre of integer pixel p along direction u(theta) = (sin theta, cos theta) for `length` pixels, with
half-width `ht`. A dash is rad = 0; its halo adds rad = m; a marker disk is length = ht = 0 at theta = 0 (then
a = dx and b = dy exactly, so the test is the plain disk test).

Coverage is an integer count of the aa x aa sub-samples of a pixel that lie in the shape (coverage = count / aa^2).
The sub-sample of pixel offset (oy, ox) = pixel - p is (oy + sub[i], ox + sub[j]) with sub[i] = (i + 0.5)/aa - 0.5,
so counts are translation invariant for integer moves. Pixels whose centre is farther than rad + rho from the
rectangle (rho = largest sub-sample distance from a pixel centre) are skipped, pixels deep inside are counted full;
only boundary pixels run the aa^2 point tests. The shortcuts keep a 1e-9 safety margin, so they never decide a
pixel that the point tests could decide otherwise.

>>> import numpy as np
>>> sub = subsample_offsets(2)
>>> shape_count(0, 0, 0.0, 1.0, 5.0, 0.75, 0.0, sub, 2)   # the dash's own first pixel: half of it is behind p
2
>>> pixel_count(0, 2, 0.0, 1.0, 5.0, 0.75, 0.0, sub, 2, max_subsample_distance(2))
4
"""

from __future__ import annotations  # noqa: I001  (the _rng import below must precede numba)

import math

from . import _rng  # noqa: F401  (sets NUMBA_DISABLE_INTEL_SVML before numba is imported)

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

EPS = 1e-9


def subsample_offsets(aa: int) -> np.ndarray:
    """(aa,) float64 offsets of the sub-sample rows/columns from the pixel centre."""
    return np.array([(i + 0.5) / aa - 0.5 for i in range(aa)], dtype=np.float64)


def max_subsample_distance(aa: int) -> float:
    """Largest distance from a pixel centre to one of its sub-samples."""
    return math.sqrt(2.0) * (0.5 - 0.5 / aa)


@njit(cache=True)
def rect_distance(fy, fx, s, c, length, ht):
    """Distance from the point (fy, fx) (relative to p) to the rectangle; also returns the axis coordinates."""
    a = fy * s + fx * c
    b = fy * c - fx * s
    da = -a
    if da < 0.0:
        da = 0.0
    if a - length > da:
        da = a - length
    db = abs(b) - ht
    if db < 0.0:
        db = 0.0
    return da, db, a, b


@njit(cache=True)
def shape_count(oy, ox, s, c, length, ht, rad, sub, aa):
    """Number of sub-samples of pixel offset (oy, ox) inside the shape (the defining point test)."""
    r2 = rad * rad
    n = 0
    for i in range(aa):
        sy = oy + sub[i]
        for j in range(aa):
            sx = ox + sub[j]
            da, db, _, _ = rect_distance(sy, sx, s, c, length, ht)
            if da * da + db * db <= r2:
                n += 1
    return n


@njit(cache=True)
def pixel_count(oy, ox, s, c, length, ht, rad, sub, aa, rho):
    """`shape_count` with exact shortcuts for pixels far outside or deep inside the shape."""
    fy = float(oy)
    fx = float(ox)
    da, db, a, b = rect_distance(fy, fx, s, c, length, ht)
    d = math.sqrt(da * da + db * db)
    if d > rad + rho + EPS:
        return 0
    if d + rho < rad - EPS:
        return aa * aa
    if a >= rho + EPS and a <= length - rho - EPS and abs(b) <= ht - rho - EPS:
        return aa * aa
    return shape_count(fy, fx, s, c, length, ht, rad, sub, aa)


@njit(cache=True)
def shape_bbox(py, px, s, c, length, ht, rad, size):
    """Pixel box [y0, y1) x [x0, x1) (clipped to the image) that holds every pixel the shape touches."""
    ey = py + length * s
    ex = px + length * c
    ext = ht + rad + 1.0
    y0 = int(math.floor(min(py, ey) - ext))
    y1 = int(math.ceil(max(py, ey) + ext)) + 1
    x0 = int(math.floor(min(px, ex) - ext))
    x1 = int(math.ceil(max(px, ex) + ext)) + 1
    return max(y0, 0), min(y1, size), max(x0, 0), min(x1, size)


@njit(cache=True)
def row_span(oy, s, c, length, ht, ext):
    """Column offsets [lo, hi] (relative to p) where row offset oy can meet the rectangle grown by ext.

    The grown rectangle (a in [-ext, length + ext], |b| <= ht + ext) contains every point within ext of the
    rectangle, so pixels outside the span have count 0. Near-axis-aligned directions skip a constraint, which
    only widens the span.
    """
    fy = float(oy)
    lo = -1e18
    hi = 1e18
    if abs(c) > 1e-9:
        u = (-ext - fy * s) / c
        v = (length + ext - fy * s) / c
        lo = max(lo, min(u, v))
        hi = min(hi, max(u, v))
    if abs(s) > 1e-9:
        u = (fy * c - (ht + ext)) / s
        v = (fy * c + (ht + ext)) / s
        lo = max(lo, min(u, v))
        hi = min(hi, max(u, v))
    if lo > hi:
        return 1, 0
    return int(math.floor(max(lo, -1e9))) - 1, int(math.ceil(min(hi, 1e9))) + 1


@njit(cache=True)
def draw_max(img, py, px, theta, length, ht, rad, sub, aa, rho):
    """img = max(img, coverage count) over the shape's box (uint8 counts). Returns the largest count drawn."""
    s = math.sin(theta)
    c = math.cos(theta)
    y0, y1, x0, x1 = shape_bbox(py, px, s, c, length, ht, rad, img.shape[0])
    best = 0
    for y in range(y0, y1):
        lo, hi = row_span(y - py, s, c, length, ht, rad + rho + 1e-6)
        for x in range(max(x0, px + lo), min(x1, px + hi + 1)):
            k = pixel_count(y - py, x - px, s, c, length, ht, rad, sub, aa, rho)
            if k > img[y, x]:
                img[y, x] = k
            if k > best:
                best = k
    return best


@njit(cache=True)
def draw_label(lab, value, kmin, py, px, theta, length, ht, sub, aa, rho):
    """lab = max(lab, value) where the dash covers at least kmin sub-samples."""
    s = math.sin(theta)
    c = math.cos(theta)
    y0, y1, x0, x1 = shape_bbox(py, px, s, c, length, ht, 0.0, lab.shape[0])
    for y in range(y0, y1):
        lo, hi = row_span(y - py, s, c, length, ht, rho + 1e-6)
        for x in range(max(x0, px + lo), min(x1, px + hi + 1)):
            if lab[y, x] < value:
                if pixel_count(y - py, x - px, s, c, length, ht, 0.0, sub, aa, rho) >= kmin:
                    lab[y, x] = value
