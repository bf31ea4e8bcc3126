"""Alerts where users look: what the nightly benchmark workflow posts (job summary, one GitHub issue
per alarm) from `gpuenv regressions --alert DIR`.

An alarm is a regression whose change point lies among the newest RECENT points of its history (a
change needs 3 points after it to be found at all, and older ones were alerted on before), or a
series that stopped. Each alarm's title is stable from night to night (case and run of the change,
or case and its last run), so the workflow opens one issue per alarm and skips titles it has seen.
Each body gives the case, the numbers before and after with their 95% intervals, the commits and
library versions on each side and the commands that reproduce it: the case alone, and an
interleaved `gpuenv ab` (or `gpuenv sweep`) of the two sides, which settles whether it is real.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from gpuenv.history.regress import Found, Search, Stopped
from gpuenv.measure.fingerprint import identity
from gpuenv.modes import of
from gpuenv.results.schema import Record

RECENT = 5  # a change point among a history's newest RECENT points is new


@dataclass(frozen=True)
class Alarm:
    title: str
    body: str  # Markdown


def _value(r: Record) -> str:
    h = of(r).headline(r)
    return f"{h.value:,.4g} {h.unit} (95% interval {h.ci_low:,.4g}-{h.ci_high:,.4g})"


def _side(r: Record) -> str:
    sha = (r.where.git.sha or "unknown")[:10]
    return f"run `{r.run_id}`, gpuenv `{sha}`, {r.created_utc[:16]} UTC"


def regression_alarm(f: Found) -> Alarm:
    before, after = f.points[f.change.index - 1][1], f.points[f.change.index][1]
    metric = f" [{f.key.rsplit(' [', 1)[1]}" if f.key.endswith("]") else ""
    case = after.case_key + metric
    row = f.row()
    bench = shlex.join(["gpuenv", "bench", "--suite", after.suite, *of(after).reproduce_args(after)])
    filters = of(after).reproduce_args(after)
    a, b = before.where.packages, after.where.packages
    moved = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    checks = [f"    {bench}"]
    if before.where.git.sha and after.where.git.sha and before.where.git.sha != after.where.git.sha:
        checks.append("    " + shlex.join(["gpuenv", "ab", before.where.git.sha[:10], after.where.git.sha[:10], "--suite", after.suite, *filters]))
    for k, (x, y) in moved.items():
        if x and y:
            checks.append("    " + shlex.join(["gpuenv", "sweep", f"{k}=={x},{y}", "--suite", after.suite, "--backend", after.case.backend,
                                                 "--task", after.case.task]))
    body = "\n".join([
        f"**{case}** changed by **{row[4]}** at run `{after.run_id}` (change point #{f.change.index} of {len(f.points)} "
        f"points, permutation test p={f.change.p_value:.3g}; segment means {row[2]} -> {row[3]}).",
        "",
        f"- before: {_value(before)}; {_side(before)}",
        f"- after: {_value(after)}; {_side(after)}",
        f"- what changed: {row[6]}",
        f"- machine: {identity(after)}",
        "",
        "Reproduce the case, then compare the two sides interleaved (which tells a real change from the machine's drift):",
        "",
        *checks,
    ])
    return Alarm(f"gpuenv: {case} regressed at run {after.run_id}", body)


def stopped_alarm(s: Stopped) -> Alarm:
    why = f"its newest record failed: {s.newest_failure}" if s.newest_failure else "no later record of it (it left the suite, or was not run)"
    body = (f"**{s.case}** was last measured in run `{s.last_run}` ({s.last_utc[:10]}); {s.later_runs} later runs of its suite "
            f"measured its backend and task without it: {why}.")
    return Alarm(f"gpuenv: {s.case} stopped after run {s.last_run}", body)


def alarms(search: Search, recent: int = RECENT) -> list[Alarm]:
    new = [f for f in search.found if f.regression and f.change.index >= len(f.points) - recent]
    return [*map(regression_alarm, new), *map(stopped_alarm, search.stopped)]


def write(search: Search, out: Path, recent: int = RECENT) -> list[Alarm]:
    """OUT/summary.md (always: what was searched, what was found, what could not be seen) and
    OUT/alarms.json ([{title, body}], empty when nothing is alarming)."""
    found = alarms(search, recent)
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"## gpuenv regressions: {len(found)} alarm(s)", "",
             f"{len(search.found)} change point(s) in {search.histories} case histories ({search.records} records); "
             f"a regression counts as new when its change point is among its history's newest {recent} points.", ""]
    for a in found:
        lines += [f"### {a.title}", "", a.body, ""]
    blind = search.blind_lines()
    if blind:
        lines += ["### Not seen", "", *[f"- {b}" for b in blind if not b.startswith("stopped:")], ""]
    (out / "summary.md").write_text("\n".join(lines))
    (out / "alarms.json").write_text(json.dumps([{"title": a.title, "body": a.body} for a in found], indent=1))
    return found
