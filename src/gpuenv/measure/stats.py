"""Statistics over timed values grouped by worker process.

Variation between processes (memory layout, thread placement, turbo state) is usually larger than
within one, so the bootstrap resamples processes first, then values inside each resampled process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

WIDE_INTERVAL = 0.05  # warn when the 95% interval's half-width exceeds 5% of the median


def upper_median(values) -> float | None:
    """The middle value (the upper one of an even count) of the values that exist: a value some
    process or seed really measured, never an average of two. None when none exists (absent, not 0)."""
    vs = sorted(v for v in values if v is not None)
    return vs[len(vs) // 2] if vs else None


@dataclass(frozen=True)
class Summary:
    median: float
    ci_low: float
    ci_high: float
    n_values: int
    n_processes: int
    confidence: float = 0.95

    @property
    def rel_half_width(self) -> float:
        if self.median == 0:
            return float("inf")
        return (self.ci_high - self.ci_low) / 2 / abs(self.median)

    @property
    def wide(self) -> bool:
        return self.rel_half_width > WIDE_INTERVAL

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rel_half_width"] = self.rel_half_width
        return d


def _bootstrap_medians(groups: Sequence[Sequence[float]], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of n_boot hierarchical resamples: processes with replacement, then each picked
    process's values with replacement."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays:
        raise ValueError("no values to summarise")
    k = len(arrays)
    if len({a.size for a in arrays}) == 1:  # every process has as many values (the usual case): one array op
        m = arrays[0].size
        data = np.stack(arrays)  # (process, value)
        picks = rng.integers(0, k, size=(n_boot, k, 1))
        within = rng.integers(0, m, size=(n_boot, k, m))
        return np.median(data[picks, within].reshape(n_boot, k * m), axis=1)
    out = np.empty(n_boot)
    for i in range(n_boot):
        picks = rng.integers(0, k, size=k)
        sample = np.concatenate([arrays[p][rng.integers(0, len(arrays[p]), size=len(arrays[p]))] for p in picks])
        out[i] = np.median(sample)
    return out


def summarize(
    groups: Sequence[Sequence[float]], *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Summary:
    """Median of all values with a hierarchical bootstrap percentile interval."""
    flat = [v for g in groups for v in g]
    boots = _bootstrap_medians(groups, n_boot, np.random.default_rng(seed))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Summary(
        median=float(np.median(flat)),
        ci_low=float(lo),
        ci_high=float(hi),
        n_values=len(flat),
        n_processes=sum(1 for g in groups if len(g)),
        confidence=confidence,
    )


def ratio(
    num: Sequence[Sequence[float]],
    den: Sequence[Sequence[float]],
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Summary:
    """Ratio of medians num/den with an interval from independent bootstraps of both sides."""
    rng = np.random.default_rng(seed)
    b = _bootstrap_medians(num, n_boot, rng) / _bootstrap_medians(den, n_boot, rng)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(b, [alpha, 1 - alpha])
    med = float(np.median([v for g in num for v in g]) / np.median([v for g in den for v in g]))
    return Summary(
        median=med,
        ci_low=float(lo),
        ci_high=float(hi),
        n_values=sum(len(g) for g in num),
        n_processes=sum(1 for g in num if len(g)),
        confidence=confidence,
    )


# --- time-to-reward: few runs (seeds), some censored at their budget ---------------------------


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% (rliable's aggregate; trims floor(n/4) per end)."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        raise ValueError("no values")
    k = int(np.floor(x.size * 0.25))
    return float(x[k : x.size - k].mean())


@dataclass(frozen=True)
class Aggregate:
    """IQM over runs with a percentile bootstrap interval (runs resampled with replacement)."""

    iqm: float
    ci_low: float
    ci_high: float
    median: float
    n: int
    confidence: float = 0.95

    def to_dict(self) -> dict:
        return asdict(self)


def aggregate(values: Sequence[float], *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0) -> Aggregate:
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to aggregate")
    rng = np.random.default_rng(seed)
    boots = np.array([iqm(x[rng.integers(0, x.size, size=x.size)]) for _ in range(n_boot)])
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return Aggregate(iqm(x), float(lo), float(hi), float(np.median(x)), int(x.size), confidence)


def _faster_score(a: float, a_reached: bool, b: float, b_reached: bool) -> float:
    """1 if run a is surely faster than run b, 0 if surely slower, 0.5 if tied or unknown.

    A censored run only says "more than its budget" (Gehan's rule): it beats nothing, and it loses
    only to a run that reached the threshold in less time than that budget.
    """
    if a_reached and b_reached:
        return 1.0 if a < b else (0.5 if a == b else 0.0)
    if a_reached and not b_reached:
        return 1.0 if a < b else 0.5
    if b_reached and not a_reached:
        return 0.0 if b < a else 0.5
    return 0.5


def prob_faster(
    a: Sequence[tuple[float, bool]],
    b: Sequence[tuple[float, bool]],
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """P(a run of A reaches the threshold sooner than a run of B), over all pairs of runs, with a
    bootstrap interval (both sides resampled). Runs are (time, reached) pairs; censored runs carry
    their budget as time. Returns (probability, ci_low, ci_high)."""
    if not a or not b:
        raise ValueError("both sides need at least one run")
    score = np.array([[_faster_score(ta, ra, tb, rb) for tb, rb in b] for ta, ra in a])
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), size=(n_boot, len(a)))  # every resample at once: (n_boot, |a|) and (n_boot, |b|)
    ib = rng.integers(0, len(b), size=(n_boot, len(b)))
    boots = score[ia[:, :, None], ib[:, None, :]].mean(axis=(1, 2))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return float(score.mean()), float(lo), float(hi)


# --- paired comparisons: interleaved A/B blocks ------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    import math

    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h if math.isfinite(h) else 0.0


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    import math

    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_sf2(t: float, df: int) -> float:
    """Two-sided tail probability P(|T| >= |t|) of Student's t with df degrees of freedom."""
    return _betainc(df / 2, 0.5, df / (df + t * t))


def t_quantile(p: float, df: int) -> float:
    """The t value with P(T <= t) = p (p > 0.5), by bisection on the tail."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_sf2(mid, df) / 2 > 1 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Paired:
    """B/A from paired blocks: the geometric mean of the per-block ratios with a t interval on their
    logarithms, and the two-sided p-value of "no change" (a paired t-test on the log ratios)."""

    ratio: float
    ci_low: float
    ci_high: float
    p: float
    n: int  # complete pairs
    sd_log: float  # spread of the log ratios between blocks: this machine's pair-to-pair noise
    confidence: float = 0.95

    def to_dict(self) -> dict:
        return asdict(self)


def paired(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95) -> Paired:
    """Pairs (a[i], b[i]) of positive values measured side by side; at least two pairs."""
    import math

    if len(a) != len(b) or len(a) < 2:
        raise ValueError("paired() needs two equally long sequences of at least two values")
    d = np.log(np.asarray(b, dtype=float)) - np.log(np.asarray(a, dtype=float))
    n = int(d.size)
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * se
    p = 1.0 if se == 0 and mean == 0 else (0.0 if se == 0 else t_sf2(mean / se, n - 1))
    return Paired(math.exp(mean), math.exp(mean - half), math.exp(mean + half), p, n, sd, confidence)


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Adjusted p-values (q-values) of the Benjamini-Hochberg step-up procedure, in input order: a
    case is significant at false discovery rate q when its adjusted value is <= q."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        out[i] = min(1.0, running)
    return out
