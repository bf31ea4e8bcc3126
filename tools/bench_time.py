"""Where a run's time went: seconds per case and per backend, from its records' creation times.

    python tools/bench_time.py results/local/<run id> [--start ISO-TIME]

A case's time is its record's creation time minus the previous record's (the first case: minus --start,
when the run began, else unknown), so it holds the case's worker processes, its environment's build on
first use and the harness between cases. Prints a Markdown table per backend (cases, seconds, share)
and the cases by time, largest first: what `make bench`'s 15-minute budget is spent on (docs/testing.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path


def case_seconds(run: Path, start: datetime | None) -> list[tuple[str, str, float | None]]:
    """(case key, backend, seconds) in run order."""
    rows = []
    for p in run.glob("*.json"):
        r = json.loads(p.read_text())
        if r.get("schema") == "gpuenv.result":
            rows.append((datetime.fromisoformat(r["created_utc"]), r["case_key"], r["case"]["backend"]))
    rows.sort()
    out, prev = [], start
    for t, key, backend in rows:
        out.append((key, backend, (t - prev).total_seconds() if prev else None))
        prev = t
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--start", help="when the run began (ISO 8601, UTC), for the first case's time")
    a = p.parse_args(argv)
    if not a.run.is_dir():
        print(f"{a.run} is not a run folder: give results/local/<run id>", file=sys.stderr)
        return 2
    start = datetime.fromisoformat(a.start) if a.start else None
    rows = case_seconds(a.run, start)
    known = [s for _, _, s in rows if s is not None]
    total = sum(known)
    by: dict[str, list[float]] = {}
    for _, backend, s in rows:
        by.setdefault(backend, []).append(s or 0.0)
    print(f"run {a.run.name}: {len(rows)} cases, {total:,.0f} s between records" + ("" if start else " (the first case's time unknown)"))
    print("\n| backend | cases | seconds | share |\n|---|---|---|---|")
    for backend, secs in sorted(by.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {backend} | {len(secs)} | {sum(secs):,.0f} | {100 * sum(secs) / total:.0f}% |" if total else f"| {backend} | {len(secs)} | - | - |")
    print("\n| case | seconds |\n|---|---|")
    for key, _, s in sorted(rows, key=lambda r: -(r[2] or 0)):
        print(f"| {key} | {'-' if s is None else f'{s:,.0f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
