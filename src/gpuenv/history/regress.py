"""Case histories for change-point detection, oriented so that a drop is always a regression."""

from __future__ import annotations

from gpuenv.history.changepoints import ChangePoint
from gpuenv.results.schema import THROUGHPUT


def series_by_case(records: list[dict], by_version: str | None = None) -> dict[str, list[tuple[float, dict]]]:
    """(mode:case key) -> [(value, record)] in time order, or in release order of `by_version`'s
    version (then time within a version). Throughput: median steps/s; time-to-reward: 1 / IQM seconds
    (so that for both, lower is worse)."""
    from gpuenv.history.asv_import import _version_key

    def order(r: dict):
        if by_version:
            return (_version_key(r["where"]["packages"].get(by_version) or "0"), r["created_utc"])
        return r["created_utc"]

    out: dict[str, list[tuple[float, dict]]] = {}
    for r in sorted(records, key=order):
        if by_version and not r["where"]["packages"].get(by_version):
            continue
        if r["status"] != "ok":
            continue
        if r["measurement_mode"] == THROUGHPUT:
            v = r["summary"]["env_steps_per_s"]["median"]
        else:
            v = 1.0 / r["summary"]["time_to_threshold_s"]["iqm"]
        out.setdefault(f"{r['measurement_mode']}:{r['case_key']}", []).append((v, r))
    return out


def describe(key: str, points: list[tuple[float, dict]], cp: ChangePoint) -> list[str]:
    before, after = points[cp.index - 1][1], points[cp.index][1]
    a, b = before["where"]["packages"], after["where"]["packages"]
    changed = [f"{k} {a.get(k)}->{b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    sha_a = (before["where"]["git"].get("sha") or "?")[:8]
    sha_b = (after["where"]["git"].get("sha") or "?")[:8]
    if sha_a != sha_b:
        changed.append(f"gpuenv {sha_a}->{sha_b}")
    throughput = key.startswith(THROUGHPUT)
    fmt = (lambda v: f"{v:,.0f}/s") if throughput else (lambda v: f"{1 / v:,.1f} s")
    return [
        key.split(":", 1)[1],
        f"#{cp.index} {after['run_id']}",
        fmt(cp.before),
        fmt(cp.after),
        f"{100 * cp.change:+.1f}%" if throughput else f"{100 * (cp.before / cp.after - 1):+.1f}% time",
        "[red]regression[/]" if cp.change < 0 else "[green]improvement[/]",
        ", ".join(changed) or "nothing recorded",
    ]
