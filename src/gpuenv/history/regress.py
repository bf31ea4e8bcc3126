"""Case histories for change-point detection, oriented so that a drop is always a regression."""

from __future__ import annotations

from gpuenv.history.changepoints import ChangePoint
from gpuenv.modes import of


def series_by_case(records: list[dict], by_version: str | None = None) -> dict[str, list[tuple[float, dict]]]:
    """(mode:case key@workload) -> [(value, record)] in time order, or in release order of `by_version`'s
    version (then time within a version). The value is the mode's headline, turned so that higher is
    better (throughput: steps/s; time-to-reward: 1 / IQM seconds). Only records of one workload form
    a history: a change of measurement settings or physics starts a new one."""
    from gpuenv.history.asv_import import version_key

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
        v = of(r).headline(r).goodness()
        out.setdefault(f"{r['measurement_mode']}:{r['case_key']}@{r['workload_id'][:6]}", []).append((v, r))
    return out


def describe(key: str, points: list[tuple[float, dict]], cp: ChangePoint) -> list[str]:
    before, after = points[cp.index - 1][1], points[cp.index][1]
    a, b = before["where"]["packages"], after["where"]["packages"]
    changed = [f"{k} {a.get(k)}->{b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    sha_a = (before["where"]["git"].get("sha") or "?")[:8]
    sha_b = (after["where"]["git"].get("sha") or "?")[:8]
    if sha_a != sha_b:
        changed.append(f"gpuenv {sha_a}->{sha_b}")
    h = of(after).headline(after)
    if h.higher_is_better:
        fmt, change = (lambda v: f"{v:,.0f}/s"), f"{100 * cp.change:+.1f}%"
    else:
        fmt, change = (lambda v: f"{1 / v:,.1f} s"), f"{100 * (cp.before / cp.after - 1):+.1f}% time"
    return [
        key.split(":", 1)[1],
        f"#{cp.index} {after['run_id']}",
        fmt(cp.before),
        fmt(cp.after),
        change,
        "[red]regression[/]" if cp.change < 0 else "[green]improvement[/]",
        ", ".join(changed) or "nothing recorded",
    ]
