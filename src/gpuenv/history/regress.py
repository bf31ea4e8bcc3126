"""Case histories for change-point detection, oriented so that a drop is always a regression."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuenv.errors import UserError
from gpuenv.history.changepoints import ChangePoint, detect, min_points
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


SUSPICIOUS = "suspicious: within the points' own 95% intervals"


def describe(key: str, points: list[tuple[float, Record]], cp: ChangePoint, separated: bool | None = None) -> list[str]:
    before, after = points[cp.index - 1][1], points[cp.index][1]
    a, b = before.where.packages, after.where.packages
    changed = [f"{k} {a.get(k)}->{b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    sha_a = (before.where.git.sha or "?")[:8]
    sha_b = (after.where.git.sha or "?")[:8]
    if sha_a != sha_b:
        changed.append(f"gpuenv {sha_a}->{sha_b}")
    if why := machine_moved(points[: cp.index], points[cp.index:]):
        changed.append(why)
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
        SUSPICIOUS if separated is False else "regression" if cp.change < 0 else "improvement",
        ", ".join(changed) or "nothing recorded",
    ]


def interval(key: str, r: Record) -> tuple[float, float] | None:
    """A point's 95% interval, oriented like its value in the history (higher is better); None for a
    memory point (its history is of medians over workers, without an interval)."""
    if _metric(key) is not None:
        return None
    h = of(r).headline(r)
    if not (0 < h.ci_low <= h.ci_high):
        return None
    return (h.ci_low, h.ci_high) if h.higher_is_better else (1 / h.ci_high, 1 / h.ci_low)


def separated(key: str, points: list[tuple[float, Record]], cp: ChangePoint, lo: int, hi: int) -> bool | None:
    """Whether the points' own intervals tell the two sides of a change point apart: the median
    interval of the points after it (up to `hi`, the next change point) lies wholly beyond the median
    interval of those before it (from `lo`), below it for a drop; None where the points carry no
    interval. A change the search found in the headline values that the points' intervals do not
    confirm is "suspicious", not a regression: noisy points wander that far without a cause."""
    from statistics import median

    before = [iv for _, r in points[lo:cp.index] if (iv := interval(key, r))]
    after = [iv for _, r in points[cp.index:hi] if (iv := interval(key, r))]
    if not before or not after:
        return None
    b_lo, b_hi = median(x for x, _ in before), median(y for _, y in before)
    a_lo, a_hi = median(x for x, _ in after), median(y for _, y in after)
    return a_hi < b_lo if cp.change < 0 else a_lo > b_hi


def machine_moved(before: list[tuple[float, Record]], after: list[tuple[float, Record]]) -> str | None:
    """Where the machine's reference speed (median fingerprint of each side's records) differs beyond
    its noise across a change point: then the change may be the machine's, said in "what changed"."""
    from statistics import median

    from gpuenv.measure.fingerprint import differs
    from gpuenv.measure.fingerprint import of as fingerprint_of

    sides = []
    for pts in (before, after):
        fps = [f for _, r in pts if (f := fingerprint_of(r))]
        if not fps:
            return None
        sides.append(min(fps, key=lambda f: abs(f.python_mops.median - median(x.python_mops.median for x in fps))))
    why = differs(sides[0], sides[1])
    return f"machine speed {why} (the change may be the machine's)" if why else None


@dataclass(frozen=True)
class Found:
    """One change point in one case's history."""

    key: str  # mode:case key@workload [metric]
    points: list[tuple[float, Record]]  # the history it was found in, oriented (higher is better)
    change: ChangePoint
    separated: bool | None = None  # the points' own intervals tell the sides apart (None: they carry none)

    def row(self) -> list[str]:
        """COLUMNS' cells, plain text (from records: escape them to print)."""
        return describe(self.key, self.points, self.change, self.separated)

    @property
    def regression(self) -> bool:
        """A drop the points' intervals confirm (or cannot judge): what exits 1 and raises an alert."""
        return self.change.change < 0 and self.separated is not False

    @property
    def suspicious(self) -> bool:
        return self.separated is False


@dataclass(frozen=True)
class Stopped:
    """A case whose history ends while later runs of its suite went on without it: a backend that
    broke, an image that no longer builds, a case dropped from the suite."""

    case: str  # mode:case key
    last_run: str  # the run of its last ok record
    last_utc: str
    later_runs: int  # later runs of the same suite that measured its backend on its task
    newest_failure: str | None  # the newest later record of the case, where it failed: its kind and reason


@dataclass(frozen=True)
class Search:
    """`gpuenv regressions`: what it found, and what it could not see."""

    found: list[Found]
    histories: int
    records: int
    min_points: int  # a history shorter than this can show no change point
    short: list[tuple[str, int]]  # (history, its points) for those
    stopped: list[Stopped]

    def blind_lines(self) -> list[str]:
        """What the search could not see, one line each (empty when it saw everything)."""
        out = []
        if self.short:
            sizes = sorted(n for _, n in self.short)
            out.append(f"{len(self.short)} of {self.histories} case histories have fewer than {self.min_points} points "
                       f"(median {sizes[len(sizes) // 2]}, longest {sizes[-1]}): no change can be found in those, whatever "
                       f"their values, until each has {self.min_points}")
        for s in self.stopped:
            why = (f"; its newest record failed: {s.newest_failure}" if s.newest_failure
                   else "; no later record of it (it left the suite, or was not run)")
            out.append(f"stopped: {s.case} was last measured in run {s.last_run} ({s.last_utc[:10]}), and {s.later_runs} later "
                       f"runs of its suite measured its backend and task without it{why}")
        return out


def check_min_change(min_change: float) -> float:
    if not (math.isfinite(min_change) and 0 <= min_change < 10):
        raise UserError(f"--min-change must be a fraction in [0, 10) (got {min_change}); 0.05 means 5%")
    return min_change


STOPPED_AFTER = 2  # later runs of its suite without a case, before its history counts as stopped


def stopped_cases(records: list[Record], after: int = STOPPED_AFTER) -> list[Stopped]:
    """Cases whose last ok record is older than `after` or more later runs of the same suite that
    measured the same backend on the same task (any variant, any num_envs): a run that did not try
    that backend and task (a sweep of another library, `bench --backend X`, a machine that cannot
    run it) says nothing about the case."""
    tried: dict[tuple[str, str, str], dict[str, str]] = {}  # (suite, backend, task) -> run id -> its first record's time
    for r in records:
        t = tried.setdefault((r.suite, r.case.backend, r.case.task), {})
        t[r.run_id] = min(t.get(r.run_id, r.created_utc), r.created_utc)
    last: dict[tuple[str, str], Record] = {}  # (suite, mode:case key) -> its newest ok record
    newest: dict[tuple[str, str], Record] = {}  # ... its newest record of any status
    for r in sorted(records, key=lambda r: r.created_utc):
        k = (r.suite, f"{r.measurement_mode}:{r.case_key}")
        newest[k] = r
        if r.status == "ok":
            last[k] = r
    out = []
    for (suite, case), r in sorted(last.items()):
        runs = tried[(suite, r.case.backend, r.case.task)]
        later = sum(t > runs[r.run_id] for t in runs.values())
        if later >= after:
            n = newest[(suite, case)]
            failure = f"{n.failure.kind.value}: {n.failure.reason[:120]}" if n.failure is not None and n is not r else None
            out.append(Stopped(case, r.run_id, r.created_utc, later, failure))
    return out


def change_points(records: list[Record], *, min_change: float = 0.05, by_version: str | None = None) -> Search:
    """`gpuenv regressions`: every change point in every case history, and what could not be seen."""
    check_min_change(min_change)
    series = series_by_case(records, by_version)
    found = []
    for key, points in sorted(series.items()):
        cps = detect([v for v, _ in points], min_change=min_change)
        bounds = [0, *(c.index for c in cps), len(points)]  # each change point's sides end at its neighbours
        found += [Found(key, points, cp, separated(key, points, cp, bounds[i], bounds[i + 2])) for i, cp in enumerate(cps)]
    need = min_points()
    short = [(key, len(points)) for key, points in sorted(series.items()) if len(points) < need]
    return Search(found, len(series), len(records), need, short, stopped_cases(records))
