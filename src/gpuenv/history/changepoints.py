"""Change points in a noisy series (one case's history), after the E-divisive / Hunter idea.

Binary segmentation: in a segment, the split that maximises the two-sample t statistic is a
candidate; it counts when a permutation test of that *maximum* (so the many possible splits are
accounted for) gives p < alpha and the means differ by at least `min_change` (relative). Then both
sides are searched again. Comparing each point with the previous one raises dozens of false alarms on
a noisy machine; testing the best split of the whole segment against shuffles of it does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TIE = 1e-9  # relative: two t statistics this close are the same split's


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new regime
    before: float  # mean of the segment before
    after: float  # mean of the segment after
    p_value: float

    @property
    def change(self) -> float:
        return self.after / self.before - 1 if self.before else float("inf")


def _max_t(x: np.ndarray, min_size: int) -> tuple[int, float]:
    n = x.size
    best_k, best_t = -1, -1.0
    csum, csq = np.cumsum(x), np.cumsum(x * x)
    total, total_sq = csum[-1], csq[-1]
    for k in range(min_size, n - min_size + 1):
        n1, n2 = k, n - k
        m1, m2 = csum[k - 1] / n1, (total - csum[k - 1]) / n2
        v1 = max(csq[k - 1] / n1 - m1 * m1, 0.0) * n1 / max(n1 - 1, 1)
        v2 = max((total_sq - csq[k - 1]) / n2 - m2 * m2, 0.0) * n2 / max(n2 - 1, 1)
        se = np.sqrt(v1 / n1 + v2 / n2)
        t = abs(m1 - m2) / se if se > 0 else (np.inf if m1 != m2 else 0.0)
        if t > best_t:
            best_k, best_t = k, t
    return best_k, best_t


def min_points(alpha: float = 0.01, min_size: int = 3) -> int:
    """The fewest points in which `detect` can find a change at all: a permutation test cannot give a
    p-value below 2 / C(n, n/2) (the observed split and its mirror are among the orderings), so
    shorter histories can show no change point, whatever their values."""
    from math import comb

    n = 2 * min_size
    while 2 / comb(n, n // 2) >= alpha:
        n += 1
    return n


def detect(
    series,
    *,
    alpha: float = 0.01,
    min_change: float = 0.05,
    min_size: int = 3,
    permutations: int = 500,
    seed: int = 0,
) -> list[ChangePoint]:
    x = np.asarray(series, dtype=float)
    rng = np.random.default_rng(seed)
    found: list[ChangePoint] = []

    shortest = min_points(alpha, min_size)

    def search(lo: int, hi: int) -> None:
        seg = x[lo:hi]
        if seg.size < shortest:  # no split of it could reach p < alpha: none is claimed by chance either
            return
        k, t = _max_t(seg, min_size)
        if k < 0 or t == 0:
            return
        before, after = seg[:k].mean(), seg[k:].mean()
        if before == 0 or abs(after / before - 1) < min_change:
            return
        # a shuffle that reproduces the split (its groups in another order) has the same t up to
        # rounding: counted as reaching it, or short histories would look significant by rounding
        exceed = sum(_max_t(rng.permutation(seg), min_size)[1] >= t * (1 - TIE) for _ in range(permutations))
        p = (exceed + 1) / (permutations + 1)
        if p >= alpha:
            return
        found.append(ChangePoint(lo + k, float(before), float(after), float(p)))
        search(lo, lo + k)
        search(lo + k, hi)

    search(0, x.size)
    return sorted(found, key=lambda c: c.index)
