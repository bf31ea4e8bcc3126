"""Case histories for change-point detection, oriented so that a drop is always a regression."""

from __future__ import annotations

from rich.markup import escape

from gpuenv.history.changepoints import ChangePoint
from gpuenv.measure.stats import upper_median
from gpuenv.modes import of
from gpuenv.modes.base import MEMORY_METRICS, Metric


def series_by_case(records: list[dict], by_version: str | None = None) -> dict[str, list[tuple[float, dict]]]:
    """(mode:case key@workload) -> [(value, record)] in time order, or in release order of `by_version`'s
    version (then time within a version). The value is the mode's headline, turned so that higher is
    better (throughput: steps/s; time-to-reward: 1 / IQM seconds; a memory peak, its own history
    under "KEY [host memory]": 1 / MiB, median over workers). Only records of one workload form
    a history: a change of measurement settings or physics starts a new one."""
    from gpuenv.pins import version_key

    def order(r: dict):
        if by_version:
            return (version_key(r["where"]["packages"].get(by_version) or "0"), r["created_utc"])
        return r["created_utc"]

    out: dict[str, list[tuple[float, dict]]] = {}
    for r in sorted(records, key=order):
        if by_version and not r["where"]["packages"].get(by_version):
            continue
        if r["status"] != "ok":
            continue
        key = f"{r['measurement_mode']}:{r['case_key']}@{r['workload_id'][:6]}"
        out.setdefault(key, []).append((of(r).headline(r).goodness(), r))
        for metric in MEMORY_METRICS:  # memory peaks have histories too, lower is better
            mid = upper_median(of(r).memory_values(r, metric))
            if mid:
                out.setdefault(f"{key} [{metric.name}]", []).append((1.0 / mid, r))
    return out


def _metric(key: str) -> Metric | None:
    return next((m for m in MEMORY_METRICS if key.endswith(f" [{m.name}]")), None)


def describe(key: str, points: list[tuple[float, dict]], cp: ChangePoint) -> list[str]:
    before, after = points[cp.index - 1][1], points[cp.index][1]
    a, b = before["where"]["packages"], after["where"]["packages"]
    changed = [f"{k} {a.get(k)}->{b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    sha_a = (before["where"]["git"].get("sha") or "?")[:8]
    sha_b = (after["where"]["git"].get("sha") or "?")[:8]
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
        escape(key.split(":", 1)[1]),  # "[host memory]" is text, not rich markup
        f"#{cp.index} {after['run_id']}",
        fmt(cp.before),
        fmt(cp.after),
        change,
        "[red]regression[/]" if cp.change < 0 else "[green]improvement[/]",
        ", ".join(changed) or "nothing recorded",
    ]
