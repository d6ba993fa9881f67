"""Pathfinder per-image algorithm (data_cards/pathfinder.md, Generation procedure and Labels) and the batched `prange` kernel.

`render_image` turns one key into one image, its label mask and its metadata; `fill_batch` runs it over samples
with `prange` (row i depends only on keys[i]). Random draws, in order: connected, margin, then per main-pair
attempt the two first dashes and the alternating extensions, then the distractors, then the origin path.

Metadata row (int64): 0 label, 1 origin, 2 terminal, 3-10 tips [path][origin, terminal][y, x], 11-14 marker
centres [origin, terminal][y, x], 15 margin, 16 distractors placed, 17 main-pair attempts, 18 error flag.
"""

from __future__ import annotations  # noqa: I001  (the _rng import below must precede numba)

import math

from ._rng import randint, rng_state  # also sets NUMBA_DISABLE_INTEL_SVML before numba is imported

import numpy as np  # noqa: E402
from numba import njit, prange  # noqa: E402

from ._pathfinder_geom import draw_label, draw_max  # noqa: E402
from ._pathfinder_lanczos import label_path_reference  # noqa: E402
from ._pathfinder_occ import SHIFT, free_count, undo_to  # noqa: E402
from ._pathfinder_snake import (  # noqa: E402
    AA, CL, COMMIT_LAST, CONTRAST, DEG, DIST_ATTEMPTS, DIST_CONTRAST, DL, HT, KFREE, KLAB, LABEL_REF, LEN, LZ_OFF, MARK_DIST,
    MARKER_I, MARKER_R, MAX_PAIR, MIN_FREE, ND, PAD, RHO, SEED_DIST, SEED_TRIALS, SIZE, commit_pending, extend, flip,
    seed_first_dash, start_path, translate,
)

META = 19
REF_LEVEL = 0.5 / 255.0
"""label_rule=reference: a pixel is on a path where its resized rendering is >= this times the rendering's maximum."""


@njit(cache=True)
def main_pair(occ, st, log, ps, rec, nrec, origin_tips, m, ip, fp, sub, tabs, rng, dirty):
    """One attempt at the two main paths (the card's procedure, step 2). On failure occ is rolled back."""
    seed_tpl = tabs[11]
    size = ip[SIZE]
    ell = fp[LEN]
    mark = st[1]
    free0 = st[0]
    seed = np.empty(7, dtype=np.int64)
    ok = seed_first_dash(occ, ip[KFREE], 2 * ip[SEED_DIST], m, ip, fp, tabs, rng, seed)
    if ok <= 0:
        return False
    ty, tx = seed[0], seed[1]
    start_path(0, ps, rec, nrec, ty, tx, seed[2] * DEG, seed_tpl[seed[2] + 180], seed[3], seed[4], seed[5],
               seed[6])
    origin_tips[0, 0] = ty
    origin_tips[0, 1] = tx
    placed = False
    for _ in range(ip[SEED_TRIALS]):  # second first dash: seed_distance away, occupancy not consulted
        deg = randint(rng, 360) - 180
        theta = deg * DEG
        phi = randint(rng, 360) * DEG
        uy = int(np.rint(ty + ip[SEED_DIST] * math.sin(phi)))
        ux = int(np.rint(tx + ip[SEED_DIST] * math.cos(phi)))
        hy, hx = translate(uy, ux, theta, ell)
        vy, vx = translate(hy, hx, flip(theta), ell + m)
        if 0 <= hy < size and 0 <= hx < size and 0 <= vy < size and 0 <= vx < size:
            start_path(1, ps, rec, nrec, uy, ux, theta, seed_tpl[deg + 180], hy, hx, vy, vx)
            origin_tips[1, 0] = uy
            origin_tips[1, 1] = ux
            placed = True
            break
    if placed:
        for _ in range(ip[CL] - 1):
            if not extend(0, ps, rec, nrec, occ, st, log, m, ip, fp, tabs, rng, dirty):
                placed = False
                break
            if not extend(1, ps, rec, nrec, occ, st, log, m, ip, fp, tabs, rng, dirty):
                placed = False
                break
    if not placed:
        undo_to(occ, st, log, mark, tabs[9], tabs[14], min(ip[PAD], size), ip[AA] * ip[AA], dirty)
        st[0] = free0
        return False
    for k in range(2):
        if k == 1 or ip[COMMIT_LAST]:
            commit_pending(k, ps, occ, st, log, ip, tabs[8], tabs[9], tabs[14], dirty)
    st[0] = free_count(occ, ip[KFREE])
    st[1] = 0  # the pair is final: forget its undo log; distractors log pixels
    st[2] = 0
    return True


@njit(cache=True)
def distractors(occ, st, log, ps, drec, dnrec, dmark, m, ip, fp, sub, tabs, rng, dirty):
    """Place up to num_distractors short paths (the card's procedure, step 3). Returns how many were placed."""
    seed_tpl = tabs[11]
    size = ip[SIZE]
    placed = 0
    seed = np.empty(7, dtype=np.int64)
    nrec = np.zeros(3, dtype=np.int64)
    for _ in range(ip[ND]):
        for _ in range(ip[DIST_ATTEMPTS]):
            if st[0] / (size * size) < fp[MIN_FREE]:
                continue
            mark = st[1]
            free0 = st[0]
            if seed_first_dash(occ, ip[KFREE], 1, m, ip, fp, tabs, rng, seed) <= 0:
                continue
            rec = drec[placed:placed + 1]  # row 0 of this view is distractor `placed`
            start_path(0, ps, rec, nrec, seed[0], seed[1], seed[2] * DEG, seed_tpl[seed[2] + 180], seed[3],
                       seed[4], seed[5], seed[6])
            ok = True
            for _ in range(ip[DL] - 1):
                if not extend(0, ps, rec, nrec, occ, st, log, m, ip, fp, tabs, rng, dirty):
                    ok = False
                    break
            if not ok:
                undo_to(occ, st, log, mark, tabs[9], tabs[14], min(ip[PAD], size), ip[AA] * ip[AA], dirty)
                st[0] = free0
                continue
            commit_pending(0, ps, occ, st, log, ip, tabs[8], tabs[9], tabs[14], dirty)
            st[1] = 0
            dmark[placed, 0] = seed[5]  # marker at the pivot, m beyond the free end of the first dash
            dmark[placed, 1] = seed[6]
            dnrec[placed] = nrec[0]
            placed += 1
            break
    return placed


@njit(cache=True)
def render_image(key, ip, fp, margins, sub, tables, img, lab, meta, rec, drec, dnrec, dmark):
    """Generate one image into img (S, S) uint8, lab (S, S) uint8 and meta (META,) int64."""
    size = ip[SIZE]
    aa = ip[AA]
    full = aa * aa
    rng = rng_state(key)
    connected = randint(rng, 2)
    mi = randint(rng, margins.shape[0])
    m = margins[mi]
    nring = tables[6][mi]
    tabs = (tables[0][mi][:nring], tables[1][mi][:nring], tables[2][mi][:nring], tables[3][mi], tables[4][mi],
            tables[5][mi], np.empty(nring, dtype=np.int64), np.empty(nring, dtype=np.float64), tables[7], tables[8],
            tables[9][mi], tables[10][mi], tables[11][mi], tables[12][mi], tables[14], tables[15],
            tables[16], tables[17], tables[18], tables[19][mi])
    occ = np.zeros((size, size), dtype=np.uint8)
    pad = min(ip[PAD], size)
    for y in range(size):
        for x in range(size):
            if y < pad or y >= size - pad or x < pad or x >= size - pad:
                occ[y, x] = full
    st = np.zeros(3, dtype=np.int64)  # free pixel count, undo-log fill, log mode (`_pathfinder_occ`)
    st[2] = 1  # box mode for the main pair
    nb = (size + (1 << SHIFT) - 1) >> SHIFT
    dirty = np.zeros((nb, nb), dtype=np.uint8)
    for y in range(size):
        for x in range(size):
            if occ[y, x] <= ip[KFREE]:
                st[0] += 1
    box = int(np.ceil(2.0 * (fp[LEN] + fp[HT] + m + 2.0))) + 2
    log = np.empty(((2 * ip[CL] + ip[DL] + 4) * box * box, 2), dtype=np.int64)
    ps = np.zeros((3, 9), dtype=np.float64)
    nrec = np.zeros(2, dtype=np.int64)
    origin_tips = np.zeros((2, 2), dtype=np.int64)
    attempts = 0
    ok = False
    while attempts < ip[MAX_PAIR] and not ok:
        attempts += 1
        ok = main_pair(occ, st, log, ps, rec, nrec, origin_tips, m, ip, fp, sub, tabs, rng, dirty)
    meta[17] = attempts
    if not ok:
        meta[18] = 1
        return
    terminal_tips = np.empty((2, 2), dtype=np.int64)
    for k in range(2):
        terminal_tips[k, 0] = ps[k, 3]
        terminal_tips[k, 1] = ps[k, 4]
    nplaced = distractors(occ, st, log, ps, drec, dnrec, dmark, m, ip, fp, sub, tabs, rng, dirty)
    origin = randint(rng, 2)
    terminal = origin if connected else 1 - origin
    # render: dash counts into img, marker counts into mk, labels into lab
    img[:, :] = 0
    lab[:, :] = 0
    mk = np.zeros((size, size), dtype=np.uint8)
    ell, ht, rho = fp[LEN], fp[HT], fp[RHO]
    maxd = 0
    for k in range(2):
        value = 2 if (connected == 1 and k == origin) else 1
        for j in range(nrec[k]):
            py, px, ang = int(rec[k, j, 0]), int(rec[k, j, 1]), rec[k, j, 2]
            maxd = max(maxd, draw_max(img, py, px, ang, ell, ht, 0.0, sub, aa, rho))
            if not ip[LABEL_REF]:
                draw_label(lab, value, ip[KLAB], py, px, ang, ell, ht, sub, aa, rho)
        if ip[LABEL_REF]:  # the rule only reads the finished geometry: no random draws depend on it
            label_path_reference(lab, value, rec[k], nrec[k], ell, ht, sub, aa, ip[LZ_OFF], tables[13], REF_LEVEL)
    dd = np.zeros((size, size), dtype=np.uint8)  # distractor dash counts: their own contrast
    maxdd = 0
    for d in range(nplaced):
        for j in range(dnrec[d]):
            maxdd = max(maxdd, draw_max(dd, int(drec[d, j, 0]), int(drec[d, j, 1]), drec[d, j, 2], ell, ht, 0.0,
                                        sub, aa, rho))
    maxm = draw_max(mk, origin_tips[origin, 0], origin_tips[origin, 1], 0.0, 0.0, 0.0, fp[MARKER_R], sub, aa, rho)
    maxm = max(maxm, draw_max(mk, terminal_tips[terminal, 0], terminal_tips[terminal, 1], 0.0, 0.0, 0.0,
                              fp[MARKER_R], sub, aa, rho))
    if ip[MARK_DIST]:
        for d in range(nplaced):
            maxm = max(maxm, draw_max(mk, dmark[d, 0], dmark[d, 1], 0.0, 0.0, 0.0, fp[MARKER_R], sub, aa, rho))
    quantise(img, dd, mk, maxd, maxdd, maxm, full, fp[CONTRAST], fp[DIST_CONTRAST], fp[MARKER_I])
    meta[0] = connected
    meta[1] = origin
    meta[2] = terminal
    for k in range(2):
        meta[3 + 4 * k] = origin_tips[k, 0]
        meta[4 + 4 * k] = origin_tips[k, 1]
        meta[5 + 4 * k] = terminal_tips[k, 0]
        meta[6 + 4 * k] = terminal_tips[k, 1]
    meta[11] = origin_tips[origin, 0]
    meta[12] = origin_tips[origin, 1]
    meta[13] = terminal_tips[terminal, 0]
    meta[14] = terminal_tips[terminal, 1]
    meta[15] = m
    meta[16] = nplaced
    meta[18] = 0


@njit(cache=True)
def value_counts(values):
    """(256,) int64 counts of each byte value in a 1-D uint8 array: `np.bincount` without widening to int64."""
    counts = np.zeros(256, dtype=np.int64)
    for i in range(values.shape[0]):
        counts[values[i]] += 1
    return counts


@njit(cache=True)
def level(v, vmax):
    """rint(255 * clip(v / vmax, 0, 1)), round half to even."""
    if vmax <= 0.0:
        return np.uint8(0)
    return np.uint8(np.rint(255.0 * min(max(v / vmax, 0.0), 1.0)))


@njit(cache=True)
def quantise(img, dd, mk, maxd, maxdd, maxm, full, contrast, dist_contrast, marker_i):
    """img = rint(255 * clip(v / max v, 0, 1)), v = max(contrast * main-path dash cov, dist_contrast * distractor
    dash cov, marker_i * marker cov); img holds the main-path counts on entry, dd the distractors', mk the markers'.

    v / max is monotone in each count, so three lookup tables give exactly the pixel-wise formula (with
    dist_contrast == contrast this equals one table applied to the larger of the two dash counts).
    """
    vmax = max(contrast * (maxd / full), dist_contrast * (maxdd / full), marker_i * (maxm / full))
    lut_d = np.zeros(full + 1, dtype=np.uint8)
    lut_dd = np.zeros(full + 1, dtype=np.uint8)
    lut_m = np.zeros(full + 1, dtype=np.uint8)
    for k in range(full + 1):
        lut_d[k] = level(contrast * (k / full), vmax)
        lut_dd[k] = level(dist_contrast * (k / full), vmax)
        lut_m[k] = level(marker_i * (k / full), vmax)
    size = img.shape[0]
    for y in range(size):
        for x in range(size):
            a = max(lut_d[img[y, x]], lut_dd[dd[y, x]])
            b = lut_m[mk[y, x]]
            img[y, x] = a if a > b else b


@njit(cache=True, parallel=True)
def fill_batch(keys, ip, fp, margins, sub, tables, images, labels, meta, geo_main, geo_dist, geo_dn, geo_dmark):
    """Generate len(keys) images with prange over samples.

    The geo_* arrays receive each image's dash records when their first dimension is len(keys) (tests, previews);
    pass arrays with a first dimension of 0 to keep them per image only.
    """
    n = keys.shape[0]
    keep = geo_main.shape[0] == n
    for i in prange(n):
        if keep:
            rec = geo_main[i]
            drec = geo_dist[i]
            dnrec = geo_dn[i]
            dmark = geo_dmark[i]
        else:
            rec = np.zeros(geo_main.shape[1:], dtype=np.float64)
            drec = np.zeros(geo_dist.shape[1:], dtype=np.float64)
            dnrec = np.zeros(geo_dn.shape[1:], dtype=np.int64)
            dmark = np.zeros(geo_dmark.shape[1:], dtype=np.int64)
        render_image(keys[i], ip, fp, margins, sub, tables, images[i], labels[i], meta[i], rec, drec, dnrec,
                     dmark)
