"""Make a synthetic history to time gpuenv's readers at scale (a measurement aid, not a test).

    python tools/synth_history.py DEST --records 10000 [--from results/published]

writes copies of the source's records, run after run, each copy with a new run id and created_utc a
day later than the one before, until DEST holds the number asked for: what a year of nightly runs
looks like to `gpuenv show`, `compare`, `regressions` and `report`. The measured values are the
source's own, unchanged; only the run ids and dates are new, so nothing read from DEST is a result.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--from", dest="source", type=Path, default=ROOT / "results" / "published")
    a = ap.parse_args(argv)
    runs: dict[str, list[dict]] = {}
    for p in sorted(a.source.rglob("*.json")):
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("schema") == "gpuenv.result":
            runs.setdefault(rec["run_id"], []).append(rec)
    if not runs:
        print(f"error: no gpuenv records in {a.source}", file=sys.stderr)
        return 2
    written, copy = 0, 0
    start = datetime(2027, 1, 1)
    while written < a.records:
        for run_id, recs in sorted(runs.items()):
            day = start + timedelta(days=copy)
            new_id = f"{day:%Y%m%dT%H%M%SZ}-{copy:06x}"
            folder = a.dest / new_id
            folder.mkdir(parents=True, exist_ok=True)
            for i, rec in enumerate(recs[: a.records - written]):
                rec = {**rec, "run_id": new_id, "created_utc": day.isoformat(timespec="seconds") + "+00:00"}
                (folder / f"{i:03d}-{rec['case_key']}.json").write_text(json.dumps(rec))
                written += 1
            copy += 1
            if written >= a.records:
                break
    print(f"{written} records in {copy} runs written to {a.dest} (copies of {a.source}, new run ids and dates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
