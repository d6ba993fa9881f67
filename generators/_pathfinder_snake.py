"""Pathfinder path growth in Numba: seeding a path's first dash and extending it dash by dash (data_cards/pathfinder.md, step 2).

Occupancy `occ` holds integer sub-sample counts (occupancy value = count / aa^2) so every threshold is an exact
integer comparison: a pixel is free iff count <= kfree, and an extension is rejected iff some pixel reaches
occ + halo count >= kover. Commits go through an undo log, so a failed main-pair attempt or distractor attempt is
rolled back in time proportional to what it touched, never by copying or clearing the whole image.

Work is local everywhere: the dilated occupancy Dm is evaluated only at candidate points whose turn weight is
non-zero, the overlap test reads only pixels of the dash's box that are occupied enough to fail, and a first dash's
tail is drawn by rejection from a uniform superset (exact enumeration after `reject_tries` misses; the result is
uniform on the available set either way).

Halo coverage comes from the per-config templates of `_pathfinder_tables`, one per possible dash orientation.

Path state `ps[k]`: 0-1 pivot (y, x), 2 orientation, 3-4 tip (y, x), 5-7 pending dash (tail y, tail x, angle),
8 the pending dash's template id. Dash records `rec[k, j]`: tail y, tail x, angle, pivot y, pivot x.
`tabs` (per image, for its margin): ring_y, ring_x, order, atan_tab, r1, hw, cand, score, pool, meta, ring_tpl,
seed_tpl, zone runs, zone run counts, template row spans, candidate tables (start, offsets, weights), the spans
of counts that can fail the overlap test.
"""

from __future__ import annotations  # noqa: I001  (the _rng import below must precede numba)

import math

from ._rng import randint, uniform  # also sets NUMBA_DISABLE_INTEL_SVML before numba is imported

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from ._pathfinder_occ import commit_template, dilate_count, region_clean, template_fits  # noqa: E402
from ._pathfinder_tables import turn_weight  # noqa: E402

# int parameters (ip)
SIZE, AA, PAD, SEED_DIST, CL, DL, ND, SEED_TRIALS, DASH_TRIALS, DIST_ATTEMPTS, MAX_PAIR, KFREE, KOVER, KLAB, \
    MARK_DIST, COMMIT_LAST, REJECT_TRIES, LABEL_REF, LZ_OFF = range(19)
# float parameters (fp)
LEN, HT, CONT, MARKER_R, CONTRAST, MARKER_I, MIN_FREE, RHO, DIST_CONTRAST = range(9)

DEG = math.pi / 180.0


@njit(cache=True, inline='always')
def flip(theta):
    return theta + math.pi if theta < 0.0 else theta - math.pi


@njit(cache=True, inline='always')
def translate(py, px, theta, d):
    """The reference's integer bookkeeping step: ceil of the real end point."""
    return int(math.ceil(py + d * math.sin(theta))), int(math.ceil(px + d * math.cos(theta)))


@njit(cache=True, inline='always')
def commit_pending(k, ps, occ, st, log, ip, pool, meta, spans, dirty):
    """M <- max(M, pending mask of path k)."""
    commit_template(occ, st, ip[KFREE], log, int(ps[k, 5]), int(ps[k, 6]), pool, meta, int(ps[k, 8]), spans, dirty)


@njit(cache=True)
def ring_scores(py, px, th, occ, m, ip, fp, tabs, dirty):
    """Score every candidate on the ring around pivot (py, px): cand/score in tabs[6:8]; returns (count, total).

    The general path, point by point; `table_scores` gives the same numbers from the per-heading tables.
    """
    ring_y, ring_x, order, atan_tab, r1, hw, cand, score = tabs[:8]
    size = ip[SIZE]
    full = ip[AA] * ip[AA]
    # candidate points on the ring, truncated, de-duplicated, in (y, x) order
    nc = 0
    in_order = True
    for t in range(ring_y.shape[0]):
        j = order[t]
        yv = py + ring_y[j]
        xv = px + ring_x[j]
        if yv < 0.0 or yv >= size or xv < 0.0 or xv >= size:
            continue
        key = int(yv) * size + int(xv)
        if nc > 0 and key <= cand[nc - 1]:
            if key == cand[nc - 1]:
                continue
            in_order = False
        cand[nc] = key
        nc += 1
    if not in_order:  # rare: float rounding moved a point across a pixel edge
        cand[:nc] = np.sort(cand[:nc])
        n2 = 0
        for t in range(nc):
            if n2 == 0 or cand[t] != cand[n2 - 1]:
                cand[n2] = cand[t]
                n2 += 1
        nc = n2
    total = 0.0
    pad = min(ip[PAD], size)
    for t in range(nc):
        qy = cand[t] // size
        qx = cand[t] % size
        w = turn_weight(atan_tab[qy - py + r1, qx - px + r1], th, fp[CONT])
        if w == 0.0:
            score[t] = 0.0
            continue
        dm = dilate_count(occ, qy, qx, m, hw, full, pad, dirty)
        sc = (1.0 - dm / full) * w
        score[t] = sc
        total += sc
    return nc, total


@njit(cache=True, inline='always')
def table_scores(py, px, tid, occ, m, ip, tabs, dirty):
    """`ring_scores` from the candidate tables of the pending dash's template `tid`: only the candidates with a
    non-zero turn weight, in the same (y, x) order, so the total and every pick are the same."""
    hw, cand, score = tabs[5], tabs[6], tabs[7]
    cstart, coff, cw = tabs[15], tabs[16], tabs[17]
    size = ip[SIZE]
    full = ip[AA] * ip[AA]
    pad = min(ip[PAD], size)
    lo, hi = cstart[tid], cstart[tid + 1]
    nc = 0
    total = 0.0
    reach = tabs[4] + m  # r1 bounds every candidate offset (see _pathfinder_tables)
    if region_clean(dirty, py, px, reach, size, pad):  # every disk is clean, inside the border: dm = 0 throughout
        for e in range(lo, hi):
            cand[nc] = (py + coff[e, 0]) * size + px + coff[e, 1]
            score[nc] = cw[e]  # (1 - 0 / full) * w == w exactly
            total += cw[e]
            nc += 1
        return nc, total
    for e in range(lo, hi):
        qy = py + coff[e, 0]
        qx = px + coff[e, 1]
        if qy < 0 or qy >= size or qx < 0 or qx >= size:
            continue
        dm = dilate_count(occ, qy, qx, m, hw, full, pad, dirty)
        sc = cw[e] if dm == 0 else (1.0 - dm / full) * cw[e]
        cand[nc] = qy * size + qx
        score[nc] = sc
        total += sc
        nc += 1
    return nc, total


@njit(cache=True, inline='always')
def extend(k, ps, rec, nrec, occ, st, log, m, ip, fp, tabs, rng, dirty):
    """Grow path k by one dash (an extension, as the card's step 2 describes it). Returns False on failure (nothing committed then)."""
    atan_tab, r1, cand, score, pool, meta, ring_tpl = tabs[3], tabs[4], tabs[6], tabs[7], tabs[8], tabs[9], tabs[10]
    spans = tabs[14]
    size = ip[SIZE]
    th = ps[k, 2]
    py, px = translate(ps[k, 0], ps[k, 1], th, fp[LEN] + 2.0 * m)
    if tabs[15].shape[0] > 0:
        nc, total = table_scores(py, px, int(ps[k, 8]), occ, m, ip, tabs, dirty)
    else:
        nc, total = ring_scores(py, px, th, occ, m, ip, fp, tabs, dirty)
    if nc == 0:
        return False
    if total < 1e-4:
        return False
    rejected = -1
    for _ in range(ip[DASH_TRIALS]):
        u = uniform(rng)
        cum = 0.0
        pick = -1
        for t in range(nc):
            if score[t] > 0.0:
                cum += score[t] / total
                pick = t
                if cum > u:
                    break
        if pick == rejected:
            continue
        qy = cand[pick] // size
        qx = cand[pick] % size
        beta = atan_tab[qy - py + r1, qx - px + r1]
        ang = flip(beta)
        tid = ring_tpl[qy - py + r1, qx - px + r1]  # every candidate offset has one (see _pathfinder_tables)
        if not template_fits(occ, ip[KOVER], qy, qx, pool, meta[tid], tabs[18]):
            rejected = pick
            continue
        commit_pending(k, ps, occ, st, log, ip, pool, meta, spans, dirty)
        ps[k, 0] = py
        ps[k, 1] = px
        ps[k, 2] = beta
        ps[k, 3] = qy
        ps[k, 4] = qx
        ps[k, 5] = qy
        ps[k, 6] = qx
        ps[k, 7] = ang
        ps[k, 8] = tid
        n = nrec[k]
        rec[k, n, 0] = qy
        rec[k, n, 1] = qx
        rec[k, n, 2] = ang
        rec[k, n, 3] = py
        rec[k, n, 4] = px
        nrec[k] = n + 1
        return True
    return False


@njit(cache=True, inline='always')
def tail_available(occ, kfree, band, py, px, zone, nz):
    """Is p in A: every in-image pixel of p + F_theta free in B (= occ with a `band`-wide frame set to 1)?

    F_theta is given as nz runs zone[j] = (dy, lo, hi): offsets (dy, lo ... hi).
    """
    size = occ.shape[0]
    for j in range(nz):
        y = py + zone[j, 0]
        if y < 0 or y >= size:
            continue
        xa = max(px + zone[j, 1], 0)
        xb = min(px + zone[j, 2], size - 1)
        if xa > xb:
            continue
        if y < band or y >= size - band or xa < band or xb >= size - band:
            return False
        for x in range(xa, xb + 1):
            if occ[y, x] > kfree:
                return False
    return True


@njit(cache=True)
def sample_tail(occ, kfree, band, pad, zone, nz, tries, rng, out):
    """Uniform tail from A: rejection from the free-frame rectangle, then exact enumeration. False if A is empty."""
    size = occ.shape[0]
    b = max(band, pad, 0)
    h = size - 2 * b
    if h <= 0:
        return False
    for _ in range(tries):
        idx = randint(rng, h * h)
        py = b + idx // h
        px = b + idx % h
        if occ[py, px] <= kfree and tail_available(occ, kfree, band, py, px, zone, nz):
            out[0] = py
            out[1] = px
            return True
    count = 0
    for py in range(b, size - b):
        for px in range(b, size - b):
            if occ[py, px] <= kfree and tail_available(occ, kfree, band, py, px, zone, nz):
                count += 1
    if count == 0:
        return False
    j = randint(rng, count)
    for py in range(b, size - b):
        for px in range(b, size - b):
            if occ[py, px] <= kfree and tail_available(occ, kfree, band, py, px, zone, nz):
                if j == 0:
                    out[0] = py
                    out[1] = px
                    return True
                j -= 1
    return False


@njit(cache=True, inline='always')
def start_path(k, ps, rec, nrec, ty, tx, theta, tid, hy, hx, vy, vx):
    """Record a first dash R(tail, theta): pivot m behind the tail, tip = head, pending = this dash."""
    ps[k, 0] = vy
    ps[k, 1] = vx
    ps[k, 2] = theta
    ps[k, 3] = hy
    ps[k, 4] = hx
    ps[k, 5] = ty
    ps[k, 6] = tx
    ps[k, 7] = theta
    ps[k, 8] = tid
    rec[k, 0, 0] = ty
    rec[k, 0, 1] = tx
    rec[k, 0, 2] = theta
    rec[k, 0, 3] = vy
    rec[k, 0, 4] = vx
    nrec[k] = 1


@njit(cache=True)
def seed_first_dash(occ, kfree, band, m, ip, fp, tabs, rng, out):
    """Up to seed_trials trials of (theta, tail); out = (ty, tx, theta_deg, hy, hx, vy, vx).

    Returns 1 on success, 0 if every trial left the image, -1 if A was empty or the orientation cannot seed
    (tabs[19][deg + 180] == 0, `_pathfinder_tables.seedable_orientations`; the attempt fails).
    """
    runs, nruns, seedable = tabs[12], tabs[13], tabs[19]
    size = ip[SIZE]
    ell = fp[LEN]
    tail = np.empty(2, dtype=np.int64)
    for _ in range(ip[SEED_TRIALS]):
        deg = randint(rng, 360) - 180
        if seedable[deg + 180] == 0:
            return -1
        if not sample_tail(occ, kfree, band, ip[PAD], runs[deg + 180], nruns[deg + 180], ip[REJECT_TRIES], rng,
                           tail):
            return -1
        theta = deg * DEG
        hy, hx = translate(tail[0], tail[1], theta, ell)
        vy, vx = translate(hy, hx, flip(theta), ell + m)
        if not (0 <= hy < size and 0 <= hx < size and 0 <= vy < size and 0 <= vx < size):
            continue
        out[0] = tail[0]
        out[1] = tail[1]
        out[2] = deg
        out[3] = hy
        out[4] = hx
        out[5] = vy
        out[6] = vx
        return 1
    return 0
