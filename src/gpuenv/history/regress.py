"""Case histories for change-point detection, oriented so that a drop is always a regression."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuenv.errors import UserError
from gpuenv.history.changepoints import ChangePoint, detect
from gpuenv.measure.stats import upper_median
from gpuenv.modes import of
from gpuenv.modes.base import MEMORY_METRICS, Metric
from gpuenv.results.schema import Record

Series = dict[str, list[tuple[float, Record]]]


def series_by_case(records: list[Record], by_version: str | None = None) -> Series:
    """(mode:case key@workload) -> [(value, record)] in time order, or in release order of `by_version`'s
    version (then time within a version). The value is the mode's headline, turned so that higher is
    better (throughput: steps/s; time-to-reward: 1 / IQM seconds; a memory peak, its own history
    under "KEY [host memory]": 1 / MiB, median over workers). Only records of one workload form
    a history: a change of measurement settings or physics starts a new one."""
    from gpuenv.pins import version_key

    def order(r: Record):
        if by_version:
            return (version_key(r.where.packages.get(by_version) or "0"), r.created_utc)
        return r.created_utc

    out: Series = {}
    for r in sorted(records, key=order):
        if by_version and not r.where.packages.get(by_version):
            continue
        if r.status != "ok":
            continue
        key = f"{r.measurement_mode}:{r.case_key}@{r.workload_id[:6]}"
        out.setdefault(key, []).append((of(r).headline(r).goodness(), r))
        for metric in MEMORY_METRICS:  # memory peaks have histories too, lower is better
            mid = upper_median(of(r).memory_values(r, metric))
            if mid:
                out.setdefault(f"{key} [{metric.name}]", []).append((1.0 / mid, r))
    return out


def _metric(key: str) -> Metric | None:
    return next((m for m in MEMORY_METRICS if key.endswith(f" [{m.name}]")), None)


COLUMNS = ("case", "at run", "before", "after", "change", "kind", "what changed")  # describe()'s cells


def describe(key: str, points: list[tuple[float, Record]], cp: ChangePoint) -> list[str]:
    before, after = points[cp.index - 1][1], points[cp.index][1]
    a, b = before.where.packages, after.where.packages
    changed = [f"{k} {a.get(k)}->{b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    sha_a = (before.where.git.sha or "?")[:8]
    sha_b = (after.where.git.sha or "?")[:8]
    if sha_a != sha_b:
        changed.append(f"gpuenv {sha_a}->{sha_b}")
    h = of(after).headline(after)
    metric = _metric(key)
    if metric is not None:
        fmt, change = (lambda v: f"{1 / v:,.0f} {metric.unit}"), f"{100 * (cp.before / cp.after - 1):+.1f}% {metric.name}"
    elif h.higher_is_better:
        fmt, change = (lambda v: f"{v:,.0f}/s"), f"{100 * cp.change:+.1f}%"
    else:
        fmt, change = (lambda v: f"{1 / v:,.1f} s"), f"{100 * (cp.before / cp.after - 1):+.1f}% time"
    return [
        key.split(":", 1)[1],
        f"#{cp.index} {after.run_id}",
        fmt(cp.before),
        fmt(cp.after),
        change,
        "regression" if cp.change < 0 else "improvement",
        ", ".join(changed) or "nothing recorded",
    ]


@dataclass(frozen=True)
class Found:
    """One change point in one case's history."""

    key: str  # mode:case key@workload [metric]
    points: list[tuple[float, Record]]  # the history it was found in, oriented (higher is better)
    change: ChangePoint

    def row(self) -> list[str]:
        """COLUMNS' cells, plain text (from records: escape them to print)."""
        return describe(self.key, self.points, self.change)

    @property
    def regression(self) -> bool:
        return self.change.change < 0


def check_min_change(min_change: float) -> float:
    if not (math.isfinite(min_change) and 0 <= min_change < 10):
        raise UserError(f"--min-change must be a fraction in [0, 10) (got {min_change}); 0.05 means 5%")
    return min_change


def change_points(records: list[Record], *, min_change: float = 0.05, by_version: str | None = None) -> tuple[list[Found], int]:
    """`gpuenv regressions`: (every change point in every case history, how many histories were searched)."""
    check_min_change(min_change)
    series = series_by_case(records, by_version)
    found = [Found(key, points, cp) for key, points in sorted(series.items())
             for cp in detect([v for v, _ in points], min_change=min_change)]
    return found, len(series)
