"""Pathfinder's occupancy map M (data_cards/pathfinder.md, step 2): commits, the overlap test, dilation, rollback.

`occ` holds integer sub-sample counts (occupancy = count / aa^2, never above full = aa^2); the `pad`-wide border is
full from the start. Halos enter it as the templates of `_pathfinder_tables` (dense counts per orientation, with
each template row's span of non-zero counts in `spans`). `st` is the per-image state: st[0] the free-pixel count,
st[1] the undo-log fill, st[2] the log mode.

* Pixel mode (st[2] = 0, distractors): every raised pixel is logged as (index, old value); `undo_to` writes the old
  values back, so any state can be restored.
* Box mode (st[2] = 1, the main pair): the pair is always tried on the initial map (border only), so a commit logs
  just (origin, template id) and raises occ branch-free, leaving st[0] alone (`free_count` recounts it once the
  pair is final); `undo_to` resets each logged template's spans to the initial map. Same map, a fraction of the
  work.

`dirty` is a coarse map, one flag per BLOCK x BLOCK pixels, set wherever a commit may have raised an interior pixel
(a conservative bound: flags are only cleared when the whole interior is known to be zero again). `dilate_count`
answers 0 at once when the disk meets no flagged block, which is the common case.
"""

from __future__ import annotations  # noqa: I001  (the _rng import below must precede numba)

from . import _rng  # noqa: F401  (sets NUMBA_DISABLE_INTEL_SVML before numba is imported)

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

SHIFT = 3
BLOCK = 1 << SHIFT
"""Side of a `dirty` block, pixels."""


@njit(cache=True, inline='always')
def commit_template(occ, st, kfree, log, qy, qx, pool, meta, tid, spans, dirty):
    """occ = max(occ, halo counts of template `tid` placed with its origin at (qy, qx)).

    Logs the change and keeps the free-pixel count st[0] (pixel mode; see the module docstring) and flags the
    touched blocks in `dirty`. Only each template row's non-zero span is visited: a zero never raises occ.
    """
    size = occ.shape[0]
    pos, y0, x0, h, w, rp = meta[tid, 0], meta[tid, 1], meta[tid, 2], meta[tid, 3], meta[tid, 4], meta[tid, 5]
    ya = max(qy + y0, 0)
    yb = min(qy + y0 + h, size)
    boxed = st[2] != 0
    if boxed:
        n = st[1]
        log[n, 0] = qy * size + qx
        log[n, 1] = tid
        st[1] = n + 1
    xa0 = max(qx + x0, 0)
    xb0 = min(qx + x0 + w, size)
    if ya < yb and xa0 < xb0:  # flag the template's whole box: fewer writes than per row, still an upper bound
        dirty[ya >> SHIFT:((yb - 1) >> SHIFT) + 1, xa0 >> SHIFT:((xb0 - 1) >> SHIFT) + 1] = 1
    for y in range(ya, yb):
        r = y - qy - y0
        base = pos + r * w - (qx + x0)
        xa = max(qx + x0 + spans[rp + r, 0], 0)
        xb = min(qx + x0 + spans[rp + r, 1], size)
        if boxed:  # branch-free (vectorised); the free count is recounted once the pair is final
            for x in range(xa, xb):
                occ[y, x] = max(occ[y, x], pool[base + x])
            continue
        for x in range(xa, xb):
            k = pool[base + x]
            old = occ[y, x]
            if k > old:
                n = st[1]
                log[n, 0] = y * size + x
                log[n, 1] = old
                st[1] = n + 1
                occ[y, x] = k
                if old <= kfree and k > kfree:
                    st[0] -= 1


@njit(cache=True)
def free_count(occ, kfree):
    """Pixels with occupancy count <= kfree (free)."""
    size = occ.shape[0]
    n = 0
    for y in range(size):
        for x in range(size):
            n += occ[y, x] <= kfree
    return n


@njit(cache=True, inline='always')
def undo_to(occ, st, log, mark, meta, spans, pad, full, dirty):
    """Roll the occupancy back to log position `mark` (the free count is restored by the caller)."""
    size = occ.shape[0]
    if st[2] == 0:
        for n in range(st[1] - 1, mark - 1, -1):
            idx = log[n, 0]
            occ[idx // size, idx % size] = log[n, 1]
        st[1] = mark
        return
    for n in range(mark, st[1]):  # box mode: back to the initial map (zero inside, full on the border)
        qy = log[n, 0] // size
        qx = log[n, 0] % size
        tid = log[n, 1]
        y0, x0, h, rp = meta[tid, 1], meta[tid, 2], meta[tid, 3], meta[tid, 5]
        for y in range(max(qy + y0, 0), min(qy + y0 + h, size)):
            r = y - qy - y0
            xa = max(qx + x0 + spans[rp + r, 0], 0)
            xb = min(qx + x0 + spans[rp + r, 1], size)
            if y < pad or y >= size - pad:
                occ[y, xa:xb] = full
                continue
            occ[y, max(xa, pad):min(xb, size - pad)] = 0
            for x in range(xa, min(xb, pad)):
                occ[y, x] = full
            for x in range(max(xa, size - pad), xb):
                occ[y, x] = full
    st[1] = mark
    if mark == 0:
        dirty[:, :] = 0


@njit(cache=True, inline='always')
def template_fits(occ, kover, qy, qx, pool, meta_row, strong):
    """True iff max(occ + halo counts of the template at (qy, qx)) < the overlap limit (no pixel reaches kover).

    occ never exceeds full, so only template counts >= kover - full can fail: `strong` holds each template row's
    span of those (`_pathfinder_tables.template_spans` at that threshold). Each row is reduced to its maximum
    without branches, then compared.
    """
    size = occ.shape[0]
    pos, y0, x0, h, w, rp = meta_row[0], meta_row[1], meta_row[2], meta_row[3], meta_row[4], meta_row[5]
    ya = max(qy + y0, 0)
    yb = min(qy + y0 + h, size)
    for y in range(ya, yb):
        r = y - qy - y0
        base = pos + r * w - (qx + x0)
        xa = max(qx + x0 + strong[rp + r, 0], 0)
        xb = min(qx + x0 + strong[rp + r, 1], size)
        best = 0
        for x in range(xa, xb):
            best = max(best, np.int32(occ[y, x]) + np.int32(pool[base + x]))
        if best >= kover:
            return False
    return True


@njit(cache=True, inline='always')
def region_clean(dirty, qy, qx, reach, size, pad):
    """True iff the square qy, qx +- reach lies inside the border (pad > 0) and meets no dirty block: occ is 0 on it."""
    if pad <= 0 or qy - reach < pad or qy + reach >= size - pad or qx - reach < pad or qx + reach >= size - pad:
        return False
    for by in range((qy - reach) >> SHIFT, ((qy + reach) >> SHIFT) + 1):
        for bx in range((qx - reach) >> SHIFT, ((qx + reach) >> SHIFT) + 1):
            if dirty[by, bx]:
                return False
    return True


@njit(cache=True, inline='always')
def dilate_count(occ, qy, qx, m, hw, full, pad, dirty):
    """Grey dilation of occ over the disk {o : |o|^2 <= m^2} at one point; out-of-image offsets ignored.

    The border is full (and nothing exceeds full), so a disk reaching into it gives full at once; a disk that meets
    no dirty block gives 0; otherwise each disk row is reduced to its maximum, then compared.
    """
    size = occ.shape[0]
    if pad > 0:
        if qy - m < pad or qy + m >= size - pad or qx - m < pad or qx + m >= size - pad:
            return full
        if region_clean(dirty, qy, qx, m, size, pad):
            return 0
    best = 0
    for dy in range(-m, m + 1):
        y = qy + dy
        if y < 0 or y >= size:
            continue
        w = hw[abs(dy)]
        rb = 0
        for x in range(max(qx - w, 0), min(qx + w, size - 1) + 1):
            rb = max(rb, occ[y, x])
        if rb > best:
            best = rb
            if best >= full:
                return best
    return best
