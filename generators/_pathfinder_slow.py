"""A straightforward Pathfinder implementation in plain NumPy/SciPy: the test oracle and the benchmark baseline.

It follows the procedure of data_cards/pathfinder.md literally, with whole-image float arrays as the reference does:
occupancy M in [0, 1], full-size margin images, a full grey dilation of M (scipy) for every extension, copies of
(image, M) for each distractor attempt, and the available-tail set A computed by shifting the blocked map over the
free zone. Its Lanczos resizes (free zone, reference labels) use PIL's whole-canvas coefficient matrices
(`_pathfinder_lanczos.resize_uint8` / `resize_float`, checked against Pillow in the tests), not the kernels'
run-based interior taps. It shares nothing with the Numba kernels except the random stream protocol (the project
RNG, drawn in the same order), so byte equality between the two is evidence that the fast kernels implement that
procedure.

Per image it costs seconds at 128 (like the reference), so tests use it on a handful of images.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import ndimage

from ._pathfinder_lanczos import free_zone, halo_superres, resize_float
from ._rng import randint, rng_state, uniform

REJECT_TRIES = 64
DEG = math.pi / 180.0


class _Geometry:
    """Coverage images of rounded rectangles by the defining sub-sample test (no shortcuts)."""

    def __init__(self, size: int, aa: int) -> None:
        self.size = size
        self.aa = aa
        self.full = aa * aa
        self.sub = np.array([(i + 0.5) / aa - 0.5 for i in range(aa)])

    def counts(self, py: int, px: int, theta: float, length: float, ht: float, rad: float) -> np.ndarray:
        """(S, S) int array: sub-samples of each pixel inside the shape (computed on a generous box)."""
        s, c = math.sin(theta), math.cos(theta)
        ext = length + ht + rad + 3
        y0, y1 = max(int(py - ext), 0), min(int(py + ext) + 1, self.size)
        x0, x1 = max(int(px - ext), 0), min(int(px + ext) + 1, self.size)
        out = np.zeros((self.size, self.size), dtype=np.int64)
        if y0 >= y1 or x0 >= x1:
            return out
        sy = (np.arange(y0, y1) - py).astype(np.float64)[:, None] + self.sub[None, :]  # (H, aa)
        sx = (np.arange(x0, x1) - px).astype(np.float64)[:, None] + self.sub[None, :]  # (W, aa)
        ys = sy[:, None, :, None]
        xs = sx[None, :, None, :]
        a = ys * s + xs * c
        b = ys * c - xs * s
        da = np.maximum(np.maximum(-a, 0.0), a - length)
        db = np.maximum(np.abs(b) - ht, 0.0)
        out[y0:y1, x0:x1] = (da * da + db * db <= rad * rad).sum(axis=(2, 3))
        return out

    def cov(self, *args: Any) -> np.ndarray:
        return self.counts(*args) / self.full


def _translate(p: tuple[int, int], theta: float, d: float) -> tuple[int, int]:
    return math.ceil(p[0] + d * math.sin(theta)), math.ceil(p[1] + d * math.cos(theta))


def _flip(theta: float) -> float:
    return theta + math.pi if theta < 0.0 else theta - math.pi


def _inside(p: tuple[int, int], size: int) -> bool:
    return 0 <= p[0] < size and 0 <= p[1] < size


class SlowPathfinder:
    """One image at a time: `render(key)` -> (image uint8, mask uint8, metadata dict)."""

    def __init__(self, config: Any, distractor_contrast: float | None = None, seedable: Any = None) -> None:
        """seedable: (len(margin_list), 360) 0/1, the orientations a first dash may take (None: all)."""
        self.c = config
        self.dist_contrast = config.snake_contrast if distractor_contrast is None else distractor_contrast
        self.seedable = None if seedable is None else np.asarray(seedable)
        self.S = config.size
        self.g = _Geometry(config.size, config.aa)
        self.ell = float(config.dash_length)
        self.ht = config.dash_thickness / 2.0
        self.lmc = config.label_min_coverage if config.label_min_coverage is not None else 1.0 / self.g.full
        self.counters = {"tail_enumerations": 0, "empty_tail_sets": 0, "attempts": 0}

    # -- primitives ---------------------------------------------------------------------------------------
    def halo(self, p: tuple[int, int], theta: float) -> np.ndarray:
        return self.g.cov(p[0], p[1], theta, self.ell, self.ht, float(self.m))

    def distractor_dash(self, p: tuple[int, int], theta: float) -> np.ndarray:
        return self.dist_contrast * self.g.cov(p[0], p[1], theta, self.ell, self.ht, 0.0)

    def disk(self, p: tuple[int, int]) -> np.ndarray:
        return self.c.marker_intensity * self.g.cov(p[0], p[1], 0.0, 0.0, 0.0, self.c.marker_radius)

    def footprint(self, theta: float) -> list[tuple[int, int]]:
        """The free zone: offsets where the halo, resized as an 8-bit image by PIL's rule (matrices), is 255."""
        big = int(self.ell + self.ht + self.m) + 3
        zone = free_zone(theta, self.ell, self.ht, self.m, self.c.aa, big)
        return [(int(y) - big, int(x) - big) for y, x in zip(*np.nonzero(zone), strict=True)]

    def reference_rendering(self, dashes: list) -> np.ndarray:
        """(S, S): the maximum over dashes of each dash's super-sampled rendering, Lanczos-resized (PIL's rule)."""
        S = self.S
        out = np.zeros((S, S))
        k = math.ceil(self.ell + self.ht) + 4  # the shape stays 4 px (> the 3 px filter reach) from the canvas edge
        n = 2 * k + 1
        for q, ang in dashes:
            small = resize_float(halo_superres(ang, self.ell, self.ht, 0.0, self.c.aa, -k, k), n, n)
            y0, x0 = q[0] - k, q[1] - k
            ya, yb, xa, xb = max(y0, 0), min(y0 + n, S), max(x0, 0), min(x0 + n, S)
            if ya < yb and xa < xb:
                out[ya:yb, xa:xb] = np.maximum(out[ya:yb, xa:xb], small[ya - y0:yb - y0, xa - x0:xb - x0])
        return out

    def sample_tail(self, M: np.ndarray, band: int, foot: list[tuple[int, int]]) -> tuple[int, int] | None:
        S = self.S
        B = M.copy()
        B[:band, :] = 1.0
        B[S - band:, :] = 1.0
        B[:, :band] = 1.0
        B[:, S - band:] = 1.0
        blocked = B > self.c.occupied_threshold

        def available(y: int, x: int) -> bool:
            for oy, ox in foot:
                if 0 <= y + oy < S and 0 <= x + ox < S and blocked[y + oy, x + ox]:
                    return False
            return True

        b = max(band, self.c.padding, 0)
        h = S - 2 * b
        if h <= 0:
            return None
        for _ in range(REJECT_TRIES):
            idx = randint(self.rng, h * h)
            y, x = b + idx // h, b + idx % h
            if available(y, x):
                return y, x
        self.counters["tail_enumerations"] += 1
        avail = np.ones((S, S), dtype=bool)  # A for every pixel at once: shift the blocked map over F
        for oy, ox in foot:
            shifted = np.zeros((S, S), dtype=bool)
            shifted[max(-oy, 0):S - max(oy, 0), max(-ox, 0):S - max(ox, 0)] = \
                blocked[max(oy, 0):S - max(-oy, 0), max(ox, 0):S - max(-ox, 0)]
            avail &= ~shifted
        where = np.flatnonzero(avail)
        if where.size == 0:
            self.counters["empty_tail_sets"] += 1
            return None
        j = int(where[randint(self.rng, where.size)])
        return j // S, j % S

    def first_dash(self, M: np.ndarray, band: int) -> tuple | None | bool:
        """(tail, theta, head, pivot); None if A is empty; False if every trial left the image."""
        for _ in range(self.c.seed_trials):
            deg = randint(self.rng, 360) - 180
            if self.seedable is not None and not self.seedable[self.c.margin_list.index(self.m), deg + 180]:
                return None  # the reference's dilation leaves no tail at this orientation
            theta = deg * DEG
            tail = self.sample_tail(M, band, self.footprint(theta))
            if tail is None:
                return None
            head = _translate(tail, theta, self.ell)
            pivot = _translate(head, _flip(theta), self.ell + self.m)
            if _inside(head, self.S) and _inside(pivot, self.S):
                return tail, theta, head, pivot
        return False

    def extend(self, path: dict, M: np.ndarray) -> np.ndarray | None:
        """One extension (step 2 of the card's procedure) on whole images; returns the new M or None on failure (path updated on success)."""
        c, S, m = self.c, self.S, self.m
        P = _translate(path["pivot"], path["theta"], self.ell + 2.0 * m)
        disk = np.array([[dy * dy + dx * dx <= m * m for dx in range(-m, m + 1)] for dy in range(-m, m + 1)])
        D = ndimage.maximum_filter(M, footprint=disk, mode="constant", cval=0.0)
        r = self.ell + m
        step = 360.0 / (2.0 * math.pi * r)
        pts = set()
        k = 0
        while k * step < 360.0:
            rad = (k * step) * (math.pi / 180.0)
            y, x = P[0] + r * math.sin(rad), P[1] + r * math.cos(rad)
            if 0 <= y < S and 0 <= x < S:
                pts.add((int(y), int(x)))
            k += 1
        cands = sorted(pts)
        if not cands:
            return None
        scores = []
        for q in cands:
            beta = math.atan2(q[0] - P[0], q[1] - P[1])
            delta = min(abs(beta - path["theta"]), 2 * math.pi - abs(beta - path["theta"]))
            turn = min(c.continuity * delta, math.pi / 2)
            w = 0.0 if turn >= math.pi / 2 else math.cos(turn) ** 2  # turns beyond 90/continuity: probability 0
            scores.append((1.0 - D[q]) * w)
        total = 0.0
        for sc in scores:
            total += sc
        if total < 1e-4:
            return None
        for _ in range(c.dash_trials):
            u = uniform(self.rng)
            cum, pick = 0.0, -1
            for i, sc in enumerate(scores):
                if sc > 0.0:
                    cum += sc / total
                    pick = i
                    if cum > u:
                        break
            q = cands[pick]
            beta = math.atan2(q[0] - P[0], q[1] - P[1])
            H = self.halo(q, _flip(beta))
            if np.max(M + H) < c.overlap_threshold:
                M = np.maximum(M, path["pending"])
                path.update(pivot=P, theta=beta, tip=q, pending=H)
                path["dashes"].append((q, _flip(beta)))
                return M
        return None

    # -- the image ------------------------------------------------------------------------------------------
    def main_pair(self, border: np.ndarray) -> tuple | None:
        c, S = self.c, self.S
        M = border.copy()
        first = self.first_dash(M, 2 * c.seed_distance)
        if not first:
            return None
        tail, theta, head, pivot = first
        paths = [dict(pivot=pivot, theta=theta, tip=head, pending=self.halo(tail, theta), dashes=[(tail, theta)])]
        for _ in range(c.seed_trials):
            theta2 = (randint(self.rng, 360) - 180) * DEG
            phi = randint(self.rng, 360) * DEG
            tail2 = (round(tail[0] + c.seed_distance * math.sin(phi)), round(tail[1] + c.seed_distance * math.cos(phi)))
            head2 = _translate(tail2, theta2, self.ell)
            pivot2 = _translate(head2, _flip(theta2), self.ell + self.m)
            if _inside(head2, S) and _inside(pivot2, S):
                paths.append(dict(pivot=pivot2, theta=theta2, tip=head2, pending=self.halo(tail2, theta2),
                                  dashes=[(tail2, theta2)]))
                break
        else:
            return None
        for _ in range(c.contour_length - 1):
            for path in paths:
                M = self.extend(path, M)
                if M is None:
                    return None
        M = np.maximum(M, paths[1]["pending"])
        if c.commit_last_dash_of_path0:
            M = np.maximum(M, paths[0]["pending"])
        return M, paths, (tail, tail2)

    def render(self, key: int) -> tuple[np.ndarray, np.ndarray, dict]:
        c, S = self.c, self.S
        self.rng = rng_state(np.uint64(key))
        connected = randint(self.rng, 2)
        self.m = c.margin_list[randint(self.rng, len(c.margin_list))]
        border = np.zeros((S, S))
        p = c.padding
        if p:
            border[:p, :] = border[S - p:, :] = border[:, :p] = border[:, S - p:] = 1.0
        attempt = 0
        pair = None
        while pair is None:
            attempt += 1
            if attempt > c.max_pair_attempts:
                raise RuntimeError("no main pair")
            self.counters["attempts"] += 1
            pair = self.main_pair(border)
        M, paths, origin_tips = pair
        cover = [np.zeros((S, S)), np.zeros((S, S))]  # each main path's own coverage, max over its dashes
        for s in range(2):
            for q, ang in paths[s]["dashes"]:
                cover[s] = np.maximum(cover[s], self.g.cov(q[0], q[1], ang, self.ell, self.ht, 0.0))
        image = np.maximum(c.snake_contrast * cover[0], c.snake_contrast * cover[1])
        placed = 0
        for _ in range(c.num_distractors):
            for _ in range(c.distractor_attempts):
                if np.count_nonzero(M <= c.occupied_threshold) / (S * S) < c.min_free_fraction:
                    continue
                img2, M2 = image.copy(), M.copy()
                first = self.first_dash(M2, 1)
                if not first:
                    continue
                tail, theta, head, pivot = first
                img2 = np.maximum(img2, self.distractor_dash(tail, theta))
                if c.mark_distractors:
                    img2 = np.maximum(img2, self.disk(pivot))
                path = dict(pivot=pivot, theta=theta, tip=head, pending=self.halo(tail, theta), dashes=[])
                for _ in range(c.distractor_length - 1):
                    M2 = self.extend(path, M2)
                    if M2 is None:
                        break
                    img2 = np.maximum(img2, self.distractor_dash(*path["dashes"][-1]))
                if M2 is None:
                    continue
                image, M = img2, np.maximum(M2, path["pending"])
                placed += 1
                break
        origin = randint(self.rng, 2)
        terminal = origin if connected else 1 - origin
        terminal_tips = (paths[0]["tip"], paths[1]["tip"])
        centres = (origin_tips[origin], terminal_tips[terminal])
        for centre in centres:
            image = np.maximum(image, self.disk(centre))
        image8 = np.rint(255.0 * np.clip(image / image.max(), 0.0, 1.0)).astype(np.uint8)
        mask = np.zeros((S, S), dtype=np.uint8)
        for s in range(2):
            value = 2 if (connected and s == origin) else 1
            if c.label_rule == "reference":
                rendering = self.reference_rendering(paths[s]["dashes"])
                on = (rendering >= (0.5 / 255.0) * rendering.max()) & (rendering.max() > 0.0)
            else:
                on = cover[s] >= self.lmc
            mask = np.maximum(mask, np.where(on, value, 0).astype(np.uint8))
        meta = dict(label=connected, origin_index=origin, terminal_index=terminal,
                    tips=[[list(origin_tips[s]), list(terminal_tips[s])] for s in range(2)],
                    marker_centres=[list(centres[0]), list(centres[1])], margin=self.m, n_distractors=placed,
                    n_pair_attempts=attempt, dashes=[paths[s]["dashes"] for s in range(2)])
        return image8, mask, meta
