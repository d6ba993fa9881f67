"""Per-config tables for the Pathfinder kernels, built once per process and shared read-only by every image.

Every dash whose halo enters the occupancy map has one of finitely many orientations: a first dash has an integer
number of degrees, and an extension dash starting at candidate q points back at the integer pivot P, at angle
flip(atan2(q - P)) with q - P an integer offset on the candidate ring. Its halo coverage (integer sub-sample
counts) is therefore precomputed here as a dense template per orientation, with exactly the arithmetic of
`_pathfinder_geom.pixel_count` on the same float angle, so committing or testing a halo is a table blit instead of
a rasterisation. The free zone F_theta of every integer degree (the offsets where the halo, Lanczos-resized as
the reference's 8-bit image, is 255: `_pathfinder_lanczos.free_zones`) is stored as runs of offsets.

Tables per margin m (index mi in `margin_list`): candidate ring offsets in (y, x) order, atan2 of integer offsets,
disk half-widths, template ids of ring offsets and of the 360 degrees, and free-zone runs with their counts.
"""

from __future__ import annotations  # noqa: I001  (the _rng import below must precede numba)

import math

from . import _rng  # noqa: F401  (sets NUMBA_DISABLE_INTEL_SVML before numba is imported)

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from ._pathfinder_geom import max_subsample_distance, pixel_count, subsample_offsets  # noqa: E402
from ._pathfinder_lanczos import free_zones  # noqa: E402

DEG = math.pi / 180.0
HALF_PI = math.pi / 2.0
TWO_PI = 2.0 * math.pi


def candidate_ring(r: float) -> tuple[list[float], list[float]]:
    """Offsets (r sin a_k, r cos a_k) of the candidate points, a_k = k * 360 / (2 pi r) degrees, a_k < 360."""
    step = 360.0 / (2.0 * math.pi * r)
    ys: list[float] = []
    xs: list[float] = []
    k = 0
    while k * step < 360.0:
        rad = (k * step) * (math.pi / 180.0)
        ys.append(r * math.sin(rad))
        xs.append(r * math.cos(rad))
        k += 1
    return ys, xs


@njit(cache=True)
def _flip(theta):
    return theta + math.pi if theta < 0.0 else theta - math.pi


@njit(cache=True)
def _fill_template(pool, pos, theta, length, ht, rad, sub, aa, rho, meta_row):
    """Dense halo counts of a dash at the origin over its (unclipped) box; returns the next free pool position."""
    s = math.sin(theta)
    c = math.cos(theta)
    ext = ht + rad + 1.0
    y0 = int(math.floor(min(0.0, length * s) - ext))
    y1 = int(math.ceil(max(0.0, length * s) + ext)) + 1
    x0 = int(math.floor(min(0.0, length * c) - ext))
    x1 = int(math.ceil(max(0.0, length * c) + ext)) + 1
    h = y1 - y0
    w = x1 - x0
    for yy in range(h):
        for xx in range(w):
            pool[pos + yy * w + xx] = pixel_count(y0 + yy, x0 + xx, s, c, length, ht, rad, sub, aa, rho)
    meta_row[0] = pos
    meta_row[1] = y0
    meta_row[2] = x0
    meta_row[3] = h
    meta_row[4] = w
    return pos + h * w


@njit(cache=True)
def _build(thetas, length, ht, rad, sub, aa, rho, pool, meta):
    pos = 0
    for t in range(thetas.shape[0]):
        pos = _fill_template(pool, pos, thetas[t], length, ht, rad, sub, aa, rho, meta[t])
    return pos


def zone_runs(zones: np.ndarray, big: int) -> tuple[np.ndarray, np.ndarray]:
    """Each free zone as runs of offsets: (runs (n, R, 3) of (dy, lo, hi), counts (n,)); dy, lo, hi in [-big, big].

    A row may hold several runs: where the halo's edge runs along the pixel grid, Lanczos overshoot makes the
    outermost pixels 255 while the next ones inside stay below it (the reference's struct has the same gaps).
    """
    found: list[list[tuple[int, int, int]]] = []
    for d in range(zones.shape[0]):
        runs = []
        for r in range(2 * big + 1):
            row = np.concatenate([[False], zones[d, r], [False]]).astype(np.int8)
            edges = np.flatnonzero(np.diff(row))
            runs += [(r - big, int(a) - big, int(b) - 1 - big) for a, b in zip(edges[::2], edges[1::2], strict=True)]
        found.append(runs)
    out = np.zeros((zones.shape[0], max(1, max(len(r) for r in found)), 3), dtype=np.int64)
    for d, runs in enumerate(found):
        out[d, :len(runs)] = runs
    return out, np.array([len(r) for r in found], dtype=np.int64)


def template_spans(pool: np.ndarray, meta: np.ndarray, threshold: int = 1) -> np.ndarray:
    """(rows, 2): per template row, the columns [lo, hi) from its first to its last count >= threshold (lo = hi = 0
    if none).

    Sets meta[:, 5], the row of `spans` where each template's first row is (relative to this pool and meta).
    """
    spans = np.zeros((int(meta[:, 3].sum()), 2), dtype=np.int64)
    row = 0
    for t in range(meta.shape[0]):
        pos, _, _, h, w = (int(v) for v in meta[t, :5])
        nz = pool[pos:pos + h * w].reshape(h, w) >= threshold
        hit = nz.any(axis=1)
        spans[row:row + h, 0] = np.where(hit, nz.argmax(axis=1), 0)
        spans[row:row + h, 1] = np.where(hit, w - nz[:, ::-1].argmax(axis=1), 0)
        meta[t, 5] = row
        row += h
    return spans


@njit(cache=True)
def turn_weight(beta, th, cont):
    """cos^2(continuity * turn) for a step at angle beta after heading th; 0 for turns of 90 deg / cont or more."""
    dd = abs(beta - th)
    delta = min(dd, TWO_PI - dd)
    turn = cont * delta
    if turn >= HALF_PI:  # cos^2(pi/2): zero probability for turns beyond 90 deg / continuity
        return 0.0
    w = math.cos(turn)
    return w * w


@njit(cache=True)
def _weights(heads, offs, atan_tab, r1, cont, out):
    for t in range(heads.shape[0]):
        for e in range(offs.shape[0]):
            out[t, e] = turn_weight(atan_tab[offs[e, 0] + r1, offs[e, 1] + r1], heads[t], cont)


def ring_offsets(ys: list[float], xs: list[float]) -> np.ndarray | None:
    """The candidate ring as distinct integer pixel offsets in (y, x) order, or None where that is not exact.

    A candidate is the pixel int(P + ring point) for the integer pivot P (in-image points only), which equals
    P + floor(ring point) whenever each coordinate is an integer or at least 1e-9 away from one.
    """
    for v in (*ys, *xs):
        if v != math.floor(v) and min(v - math.floor(v), math.ceil(v) - v) < 1e-9:
            return None
    return np.array(sorted({(math.floor(y), math.floor(x)) for y, x in zip(ys, xs, strict=True)}), dtype=np.int64)


def candidate_tables(heads: list[np.ndarray], rings: list[tuple[list[float], list[float]]], atan_tab: np.ndarray,
                     r1s: list[int], continuity: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pending-dash template id: the ring offsets an extension can turn to, in (y, x) order, with their weights.

    heads[i] holds the heading of a path whose pending dash has each template id of margin i (a first dash: its
    angle; an extension: the angle from the pivot to the candidate). Returns CSR arrays (start (ids + 1,),
    offsets (E, 2), weights (E,)) keeping only non-zero weights, so an extension scores those candidates alone:
    zero-weight candidates add nothing to the total and are never picked. Empty arrays (start of length 0) where
    `ring_offsets` is not exact: the kernels then score the ring point by point.
    """
    starts, offs, ws = [0], [], []
    for i, (ys, xs) in enumerate(rings):
        ring = ring_offsets(ys, xs)
        if ring is None:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64), np.zeros(0)
        w = np.zeros((len(heads[i]), len(ring)))
        _weights(np.asarray(heads[i], dtype=np.float64), ring, atan_tab[i], r1s[i], float(continuity), w)
        for row in w:
            keep = np.flatnonzero(row > 0.0)
            offs.append(ring[keep])
            ws.append(row[keep])
            starts.append(starts[-1] + len(keep))
    return np.array(starts, dtype=np.int64), np.concatenate(offs), np.concatenate(ws)


def build_tables(dash_length: float, half_thickness: float, margins: tuple[int, ...], aa: int,
                 continuity: float) -> tuple:
    """Everything the kernels look up, as a tuple of arrays stacked over margins (see `_pathfinder_kernel`)."""
    sub = subsample_offsets(aa)
    rho = max_subsample_distance(aa)
    rings = [candidate_ring(dash_length + m) for m in margins]
    nmax = max(len(r[0]) for r in rings)
    r1s = [math.ceil(dash_length + m) + 1 for m in margins]
    width = 2 * max(r1s) + 1
    big = max(int(math.ceil(dash_length + half_thickness + m)) + 1 for m in margins)
    nm = len(margins)
    ring_y, ring_x = np.zeros((nm, nmax)), np.zeros((nm, nmax))
    order = np.zeros((nm, nmax), dtype=np.int64)
    atan_tab = np.zeros((nm, width, width))
    hw = np.zeros((nm, max(margins) + 1), dtype=np.int64)
    ring_tpl = np.full((nm, width, width), -1, dtype=np.int64)
    seed_tpl = np.zeros((nm, 360), dtype=np.int64)
    zone_list = []
    pools, metas, span_list, heads, base = [], [], [], [], 0
    for i, (m, (ys, xs)) in enumerate(zip(margins, rings, strict=True)):
        ring_y[i, :len(ys)] = ys
        ring_x[i, :len(xs)] = xs
        order[i, :len(ys)] = sorted(range(len(ys)), key=lambda k: (math.floor(ys[k]), math.floor(xs[k]), k))
        r1 = r1s[i]
        r = dash_length + m
        thetas = [deg * DEG for deg in range(-180, 180)]
        head = list(thetas)  # a path's heading when its pending dash has this template
        for a in range(2 * r1 + 1):
            for b in range(2 * r1 + 1):
                atan_tab[i, a, b] = math.atan2(a - r1, b - r1)
                if abs(math.hypot(a - r1, b - r1) - r) <= 2.0:  # every candidate lies within sqrt(2) of the ring
                    ring_tpl[i, a, b] = base + len(thetas)
                    thetas.append(float(_flip(atan_tab[i, a, b])))
                    head.append(float(atan_tab[i, a, b]))
        heads.append(np.array(head))
        for dy in range(m + 1):
            hw[i, dy] = math.isqrt(m * m - dy * dy)
        seed_tpl[i] = base + np.arange(360)
        box = 2 * int(math.ceil(dash_length + half_thickness + m + 1.0)) + 4
        pool = np.zeros(len(thetas) * box * box, dtype=np.uint8)
        meta = np.zeros((len(thetas), 6), dtype=np.int64)
        used = _build(np.array(thetas), float(dash_length), float(half_thickness), float(m), sub, aa, rho, pool,
                      meta)
        zone_list.append(zone_runs(free_zones(np.array(thetas[:360]), dash_length, half_thickness, m, aa, big), big))
        spans = template_spans(pool, meta)
        meta[:, 0] += sum(len(p) for p in pools)
        meta[:, 5] += sum(len(p) for p in span_list)
        span_list.append(spans)
        pools.append(pool[:used])
        metas.append(meta)
        base += len(thetas)
    nrun = max(z[0].shape[1] for z in zone_list)
    runs = np.zeros((nm, 360, nrun, 3), dtype=np.int64)
    for i, z in enumerate(zone_list):
        runs[i, :, :z[0].shape[1]] = z[0]
    return (ring_y, ring_x, order, atan_tab, np.array(r1s, dtype=np.int64), hw,
            np.array([len(r[0]) for r in rings], dtype=np.int64), np.concatenate(pools), np.concatenate(metas),
            ring_tpl, seed_tpl, runs, np.stack([z[1] for z in zone_list]), np.concatenate(span_list),
            *candidate_tables(heads, rings, atan_tab, r1s, continuity))


def reference_seed_struct(theta: float, length: int, thickness: float, margin: int, aa: int) -> np.ndarray:
    """The reference's first-dash structuring element at angle theta: (2 (L + m) + 1)^2 bool, the dash starting
    at [L + m + 1]^2 (one pixel below and right of the centre, the dilation's anchor).

    Drawn as the reference draws it (drewlinsley/pathfinder `snakes.draw_line_n_mask` then `.astype(uint8)`): a
    PIL line of width round(t aa) from the centre of a (L + ceil t + m) 2 aa + 1 canvas to the ceiling-rounded
    head, dilated by a disk of radius m aa, 0/255, Lanczos-resized as an 8-bit image to (L + ceil t + m) 2 + 1
    (`_pathfinder_lanczos.resize_uint8`, PIL's rule), placed around the start and clipped; True where it is 255.
    """
    from PIL import Image, ImageDraw
    from scipy.ndimage import grey_dilation

    from ._pathfinder_lanczos import resize_uint8

    half = length + int(math.ceil(thickness)) + margin
    n_big, c = 2 * half * aa + 1, half * aa
    hy = int(math.ceil(c + length * aa * math.sin(theta)))
    hx = int(math.ceil(c + length * aa * math.cos(theta)))
    line = Image.new("F", (n_big, n_big), "black")
    ImageDraw.Draw(line).line([(c, c), (hx, hy)], fill="white", width=int(round(thickness * aa)))
    r = margin * aa
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    halo = grey_dilation(np.array(line), footprint=yy * yy + xx * xx <= r * r, mode="constant", cval=0.0)
    small = resize_uint8(halo.astype(np.uint8), 2 * half + 1, 2 * half + 1)  # (2 half + 1)^2, 255 inside
    w = length + margin
    struct = np.zeros((2 * w + 1, 2 * w + 1), dtype=bool)
    start = w + 1  # the canvas index of the dash's first pixel; small's centre `half` lands there
    for y in range(2 * w + 1):
        for x in range(2 * w + 1):
            sy, sx = y - start + half, x - start + half
            if 0 <= sy <= 2 * half and 0 <= sx <= 2 * half:
                struct[y, x] = small[sy, sx] == 255
    return struct


def seedable_orientations(dash_length: float, thickness: float, margin: int, aa: int) -> np.ndarray:
    """(360,) int64: 1 where the reference generator could seed a path's first dash at degree index - 180.

    The reference finds first-dash tails by dilating the occupancy map (cv2.dilate) with `reference_seed_struct`.
    Pixels where every offset of that element falls outside the image come out as -DBL_MAX (OpenCV ignores
    samples beyond the border), and the reference then treats the whole map as unavailable
    (`find_available_coordinates` returns nothing when the map has a negative value): that orientation never
    seeds. With offsets d = element pixel - anchor, an orientation seeds iff d reaches all four closed quadrants
    (each image corner sees at least one offset inside the image). At LRA's 32 and 64 settings most orientations
    fail this; from margin 3 up none does.

    >>> int(seedable_orientations(2, 0.5, 1, 2).sum()), int(seedable_orientations(5, 1.5, 3, 2).sum())
    (30, 360)
    """
    length = int(round(dash_length))  # the reference's canvases need an integer length
    w = length + margin
    out = np.zeros(360, dtype=np.int64)
    for i in range(360):
        dy, dx = np.nonzero(reference_seed_struct((i - 180) * DEG, length, thickness, margin, aa))
        dy, dx = dy - w, dx - w
        out[i] = all(((sy * dy >= 0) & (sx * dx >= 0)).any() for sy in (1, -1) for sx in (1, -1))
    return out
